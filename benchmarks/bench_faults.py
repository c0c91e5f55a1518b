"""What a hostile input or plugin costs: a thin field under a huge window, and a plugin that hangs.

1. ``maximum_filter`` of a ``(1, 10000)`` field with size 20001 (and ``(1, 70000)`` with 200001):
   time against ``scipy.ndimage.maximum_filter`` on the same field, and the peak traced memory
   (targets: at most 2x scipy's time and 50 MiB).
2. A plugin whose ``spacr_accel_backend_info`` never answers, ranked above everything: what a
   forced ``backend="numpy"`` call costs (target: nothing, it never asks that plugin), what the first
   automatic call costs (target: at most the bound, once per process) and what the next one costs.
   Each in a fresh interpreter with ``SPACR_ACCEL_PROBE_TIMEOUT`` set to ``--bound`` seconds.

The tie-heavy cases of nearest neighbours have their own section, ``benchmarks/bench_science.py --only
ties``.

Run: ``python benchmarks/bench_faults.py [--repeat 5] [--bound 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tracemalloc

import numpy as np
from _timing import side_by_side  # the benchmarks' one timer, beside this file

HUNG = """
import sys
import json, threading, time, types
import numpy as np
import spacr_accel_core
from spacr_accel_core import Declaration, hookimpl, ops
hung = types.ModuleType("hung")
hung.SPACR_ACCEL_PLUGIN = Declaration(name="hung", priority=10_000.0, accelerated=False)
hung.spacr_accel_backend_info = hookimpl(lambda: threading.Event().wait())
hung.spacr_accel_matmul = hookimpl(lambda first, second: np.matmul(first, second))
if {register}:
    spacr_accel_core.register(hung, "hung")
a = np.ones((8, 4), np.float32); b = np.ones((4, 4), np.float32)
times = {}
for name, kwargs in (("forced backend='numpy'", {"backend": "numpy"}), ("first automatic call", {}),
                     ("second automatic call", {})):
    start = time.perf_counter(); ops.matmul(a, b, **kwargs); times[name] = time.perf_counter() - start
times["served by"] = spacr_accel_core.last_dispatch().backend
print(json.dumps(times))
"""


def thin(shape: tuple[int, int], size: int, repeat: int) -> None:
    import scipy.ndimage

    from spacr_accel_core import ops

    field = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    timed = side_by_side({"ours": lambda: ops.maximum_filter(field, size),  # interleaved: the noise hits both
                          "scipy": lambda: scipy.ndimage.maximum_filter(field, size, mode="nearest")}, repeat)
    ours, scipys = timed["ours"].best, timed["scipy"].best
    assert np.array_equal(timed["ours"].answer, timed["scipy"].answer)
    tracemalloc.start()
    ops.maximum_filter(field, size)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"maximum_filter {shape} size {size}: ours {ours * 1e3:.2f} ms, scipy {scipys * 1e3:.2f} ms "
          f"(ours/scipy {ours / scipys:.3f}; target <= 2), peak traced memory {peak / 2**20:.2f} MiB (<= 50)")


def hung(bound: float) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPACR_ACCEL")}
    env["SPACR_ACCEL_PROBE_TIMEOUT"] = str(bound)
    runs = {}
    for register in (False, True):  # the same process without the plugin, for the baseline
        done = subprocess.run([sys.executable, "-c", HUNG.replace("{register}", str(register))], capture_output=True,
                              text=True, env=env, check=True, timeout=300)
        runs[register] = json.loads(done.stdout)
    served = runs[True].pop("served by")
    runs[False].pop("served by")
    print(f"a backend_info that never answers, bound {bound:g} s (served by {served}); fresh processes,")
    print("  each first call includes discovery; 'without' is the same process with no such plugin:")
    for name, seconds in runs[True].items():
        print(f"  {name:24s} {seconds * 1e3:9.1f} ms   (without: {runs[False][name] * 1e3:7.1f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--bound", type=float, default=2.0)
    args = parser.parse_args()
    thin((1, 10000), 20001, args.repeat)
    thin((1, 70000), 200001, 1)  # scipy takes about half a minute here: once is enough
    hung(args.bound)


if __name__ == "__main__":
    main()
