"""Does ``spacr-accel bench --quick`` report what a warm call of each backend really costs?

The command is run as a user runs it (``python -m spacr_accel_core bench --quick --json``, its
report read from the documented keys), then every row it timed is timed again directly in this
process: the same operation (``table.rows()[name].function``), the same input (the row's
``bench(quick=True, rng)``, drawn from the stream the bench draws it from: seed 0 and the
operation's name; were that stream to change, the input would keep its sizes and only its values
would differ), ``backend=NAME``, one untimed warm call, then the best of ``--repeat`` calls in a
row, as a caller that uses one backend makes them (the bench interleaves the backends, so on a
small machine one backend's worker threads can still be busy when the next one starts; the ratio
shows what that costs). Each row prints the bench's best, the direct best and
their ratio side by side; the target is a ratio within 2 either way on every row (a warm-up, an
import or a compilation counted as a time shows up as a ratio of 10 to 1000).

Run: ``python benchmarks/bench_cli_bench.py [--repeat 5]``; exits 1 when a row misses the target.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from _timing import side_by_side  # the benchmarks' one timer, beside this file

from spacr_accel_core.table import Example, rows

TARGET = 2.0
"""The most a bench row may differ from a direct warm call, either way."""


def best_direct(calls: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """The best of ``repeat`` timed calls in a row per backend, after one untimed warm call.

    :param calls: backend name -> its forced call.
    :param repeat: timed calls per backend.
    """
    return {name: side_by_side({name: call}, repeat, warm=True)[name].best for name, call in calls.items()}


def bench_quick() -> dict[str, Any]:
    """``spacr-accel bench --quick --json``'s report (the command exits 1 on a disagreement, and
    still reports)."""
    done = subprocess.run([sys.executable, "-m", "spacr_accel_core", "bench", "--quick", "--json"],
                          capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"spacr-accel bench --quick failed (exit {done.returncode}):\n{done.stderr}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def bench_input(name: str) -> Example:
    """The operation's ``--quick`` input, from the stream the bench draws it from (seed 0)."""
    return rows()[name].bench(True, np.random.default_rng([0, zlib.crc32(name.encode())]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed direct calls per backend (default 5)")
    args = parser.parse_args()

    start = time.perf_counter()
    report = bench_quick()
    print(f"spacr-accel bench --quick took {time.perf_counter() - start:.1f} s here (a process of its own)")
    missed = 0
    print(f"{'operation':<20} {'backend':<10} {'device':<8} {'bench ms':>10} {'direct ms':>10} "
          f"{'bench/direct':>13}  target <= {TARGET:g}x either way")
    for operation in report["operations"]:
        name = operation["operation"]
        timed = {row["backend"]: row for row in operation["results"] if row["best_s"] is not None}
        if timed:
            example, function = bench_input(name), rows()[name].function
            calls: dict[str, Callable[[], Any]] = {
                backend: partial(function, *example.args, backend=backend, **dict(example.keywords))
                for backend in timed}
            direct = best_direct(calls, args.repeat)
        for backend, row in timed.items():
            ratio = row["best_s"] / direct[backend]
            met = 1.0 / TARGET <= ratio <= TARGET
            missed += not met
            print(f"{name:<20} {backend:<10} {row['device'] or '-':<8} {row['best_s'] * 1e3:>10.2f} "
                  f"{direct[backend] * 1e3:>10.2f} {ratio:>12.2f}x  {'met' if met else 'MISSED'}")
        for row in operation["results"]:
            if row["best_s"] is None:
                print(f"{name:<20} {row['backend']:<10} not timed: {row['status']}, "
                      f"{row['reason'] or row['detail']}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
