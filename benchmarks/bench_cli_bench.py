"""Does ``spacr-accel bench --quick`` report what a warm call of each backend really costs?

The bench is run in this process (``spacr_accel_core.commands._bench.run(quick=True)``, the same function
the command calls), then every row it timed is timed again directly: the same operation, the same
inputs (``_bench.cases(quick=True)``), ``backend=NAME``, one untimed warm call, then the best of
``--repeat`` calls in a row, as a caller that uses one backend makes them (the bench interleaves the
backends, so on a small machine one backend's worker threads can still be busy when the next one
starts; the ratio shows what that costs). Each row prints the bench's best, the direct best and
their ratio side by side; the target is a ratio within 2 either way on every row (a warm-up, an
import or a compilation counted as a time shows up as a ratio of 10 to 1000).

Run: ``python benchmarks/bench_cli_bench.py [--repeat 5]``; exits 1 when a row misses the target.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from _timing import side_by_side  # the benchmarks' one timer, beside this file

from spacr_accel_core import ops
from spacr_accel_core.commands import _bench

TARGET = 2.0
"""The most a bench row may differ from a direct warm call, either way."""


def best_direct(calls: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """The best of ``repeat`` timed calls in a row per backend, after one untimed warm call.

    :param calls: backend name -> its forced call.
    :param repeat: timed calls per backend.
    """
    return {name: side_by_side({name: call}, repeat, warm=True)[name].best for name, call in calls.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed direct calls per backend (default 5)")
    args = parser.parse_args()

    start = time.perf_counter()
    report = _bench.run(quick=True)
    print(f"spacr-accel bench --quick took {time.perf_counter() - start:.1f} s here")
    inputs = {case.operation: case for case in _bench.cases(quick=True)}
    missed = 0
    print(f"{'operation':<20} {'backend':<10} {'device':<8} {'bench ms':>10} {'direct ms':>10} "
          f"{'bench/direct':>13}  target <= {TARGET:g}x either way")
    for operation in report["operations"]:
        case = inputs[operation["operation"]]
        function = getattr(ops, case.operation)
        timed = {row["backend"]: row for row in operation["results"] if row["best_s"] is not None}
        calls: dict[str, Callable[[], Any]] = {name: partial(function, *case.args, backend=name) for name in timed}
        direct = best_direct(calls, args.repeat)
        for name, row in timed.items():
            ratio = row["best_s"] / direct[name]
            met = 1.0 / TARGET <= ratio <= TARGET
            missed += not met
            print(f"{case.operation:<20} {name:<10} {row['device'] or '-':<8} {row['best_s'] * 1e3:>10.2f} "
                  f"{direct[name] * 1e3:>10.2f} {ratio:>12.2f}x  {'met' if met else 'MISSED'}")
        for row in operation["results"]:
            if row["best_s"] is None:
                print(f"{case.operation:<20} {row['backend']:<10} not timed: {row['status']}, "
                      f"{row['reason'] or row['detail']}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
