"""What ``import spacr_accel_core.ops`` costs a process over ``import numpy``.

Every Dask worker, every CLI start and every script that only wants ``ops.<name>`` pays the
import before its first call, so it must stay at most 50 ms over NumPy's own. Each sample is a
fresh interpreter that times ``import numpy`` and then ``import spacr_accel_core.ops`` (the second
timing is what the package adds, NumPy already loaded); the median of ``--repeat`` (11) samples is
printed, with the imports a plain call does not need that the package loaded anyway (there should
be none) and, with ``--top N``, the N costliest modules ``-X importtime`` saw beyond NumPy's.

``--startup`` measures instead what ``SPACR_ACCEL_PATCH`` costs a process that never imports
spaCR: ``python -c pass`` with the variable set (its ``.pth`` line registers the import hook) and
unset, interleaved, the median of ``--repeat`` (20) of each printed in ms with the difference
(target: at most 10 ms), and the modules the set start imports beyond the unset one's (there should
be nothing but the standard library's and the hook's own).

Run: ``python benchmarks/bench_import.py [--repeat 11] [--top 15]``, or
``python benchmarks/bench_import.py --startup [--repeat 20]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

from _timing import rounds, side_by_side  # the benchmarks' one timer, beside this file

CHILD = """
import json, sys, time
start = time.perf_counter()
import numpy
middle = time.perf_counter()
import spacr_accel_core.ops
end = time.perf_counter()
print(json.dumps({"numpy": middle - start, "ops": end - middle,
                  "unneeded": sorted(m for m in UNNEEDED if m in sys.modules)}))
"""

UNNEEDED = ("importlib.metadata", "scipy", "torch", "cupy", "dask", "numba")
"""Imported by discovery, by a backend or by a message when they are needed, never by the import."""


def _env() -> dict[str, str]:
    """The caller's environment without spacr-accel settings, and with bytecode caching on: with
    ``PYTHONDONTWRITEBYTECODE`` set every child would compile the package from source, a cost an
    installed copy pays once, not at each import."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("SPACR_ACCEL") and k != "PYTHONDONTWRITEBYTECODE"}


def sample() -> dict[str, Any]:
    code = f"UNNEEDED = {UNNEEDED!r}\n{CHILD}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(),
                          check=True, timeout=300)
    answer: dict[str, Any] = json.loads(done.stdout)  # the child's JSON: numbers and a list
    return answer


def costliest(top: int) -> list[tuple[int, str]]:
    """The ``top`` modules with the largest own import time that ``import numpy`` alone does not load."""
    def own_times(code: str) -> dict[str, int]:
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True,
                              text=True, env=_env(), check=True, timeout=300)
        times: dict[str, int] = {}
        for line in done.stderr.splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[0].startswith("import time:") and parts[1].strip().isdigit():
                times[parts[2].strip()] = int(parts[0].split(":")[1])
        return times

    numpy_only = own_times("import numpy")
    extra = own_times("import spacr_accel_core.ops")
    return sorted(((us, name) for name, us in extra.items() if name not in numpy_only), reverse=True)[:top]


def start(value: str | None) -> None:
    """One ``python -c pass``, the variable set to ``value`` (None: unset)."""
    env = _env() if value is None else {**_env(), "SPACR_ACCEL_PATCH": value}
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True, timeout=60)


def startup(repeat: int) -> None:
    """The variable's start-up cost, set against unset, one run of each in turn."""
    start("1")  # writes the hook's bytecode cache, as an installed copy has it
    timed = side_by_side({"unset": lambda: start(None), "set": lambda: start("1")}, repeat)
    off_ms, on_ms = timed["unset"].median * 1e3, timed["set"].median * 1e3
    print(f"python -c pass: SPACR_ACCEL_PATCH unset {off_ms:.1f} ms, set {on_ms:.1f} ms, difference "
          f"{on_ms - off_ms:+.1f} ms (median of {repeat} interleaved runs each; target: at most 10 ms)")
    code = "import sys; print(' '.join(sorted(sys.modules)))"
    seen = {value: set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                      env=_env() if value is None else {**_env(), "SPACR_ACCEL_PATCH": value},
                                      timeout=60).stdout.split()) for value in (None, "1")}
    beyond = sorted(seen["1"] - seen[None])
    foreign = [name for name in beyond if name.split(".")[0] not in sys.stdlib_module_names]
    print(f"imported at start with it set, beyond unset: {', '.join(beyond) or 'nothing'} "
          f"(outside the standard library: {', '.join(foreign) or 'nothing'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--top", type=int, default=0)
    parser.add_argument("--startup", action="store_true", help="what SPACR_ACCEL_PATCH costs python -c pass")
    args = parser.parse_args()
    if args.startup:
        startup(args.repeat or 20)
        return
    args.repeat = args.repeat or 11
    sample()  # writes the bytecode caches, as an installed copy has them
    samples = rounds({"sample": sample}, args.repeat)["sample"]
    numpy_ms = statistics.median(float(s["numpy"]) for s in samples) * 1e3
    ops_ms = statistics.median(float(s["ops"]) for s in samples) * 1e3
    unneeded = sorted({m for s in samples for m in s["unneeded"]})
    print(f"import numpy: {numpy_ms:.1f} ms; import spacr_accel_core.ops after it: {ops_ms:.1f} ms "
          f"over NumPy (median of {args.repeat} fresh interpreters; target: at most 50 ms)")
    print(f"imported though a plain call does not need it: {', '.join(unneeded) or 'nothing'}")
    if args.top:
        print("costliest own import times beyond NumPy's (one -X importtime run):")
        for us, name in costliest(args.top):
            print(f"  {us / 1e3:6.1f} ms  {name}")


if __name__ == "__main__":
    main()
