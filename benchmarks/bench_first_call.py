"""What a process pays for the registry: the first call, and every call after it.

The first ``ops.maximum_filter`` of a fresh process discovers the plugins. With every backend
installed it must cost at most 60 ms more than with torch and CuPy blocked outright
(``SPACR_ACCEL_DISABLE=torch,cupy``), and leave torch unimported on a machine without a GPU: every
Dask worker and every CLI start pays it. Each variant runs in its own fresh interpreter, the
variants interleaved, best of ``--repeat``; the time is measured inside the child, from just
before ``import spacr_accel_core.ops`` to just after the first call returns.

Then a tiny ``(8 x 4) @ (4 x 4)`` through ``ops`` per call, against plain ``@``, in interleaved
blocks of calls (target: at most 5 us per call through ``ops``).

Run: ``python benchmarks/bench_first_call.py [--repeat 7]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from _timing import rounds, side_by_side  # the benchmarks' one timer, beside this file

CHILD = """
import json, sys, time
import numpy as np
field = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
start = time.perf_counter()
from spacr_accel_core import ops, last_dispatch
ops.maximum_filter(field, 5, gpu={gpu})
took = time.perf_counter() - start
print(json.dumps({{"seconds": took, "torch": "torch" in sys.modules, "cupy": "cupy" in sys.modules,
                  "served": last_dispatch().backend}}))
"""

VARIANTS = {
    "every backend installed": {},
    "SPACR_ACCEL_DISABLE=torch,cupy": {"SPACR_ACCEL_DISABLE": "torch,cupy"},
}


def first_call(extra_env: dict[str, str], gpu: bool) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPACR_ACCEL")} | extra_env
    done = subprocess.run([sys.executable, "-c", CHILD.format(gpu=gpu)], capture_output=True, text=True,
                          env=env, check=True, timeout=300)
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    for gpu in (True, False):
        # interleaved: the machine's noise hits both alike
        runs = rounds({name: (lambda env=env, gpu=gpu: first_call(env, gpu)) for name, env in VARIANTS.items()},
                      args.repeat)
        best = {name: min(float(str(got["seconds"])) for got in results) for name, results in runs.items()}
        seen = {name: results[-1] for name, results in runs.items()}
        base = best["SPACR_ACCEL_DISABLE=torch,cupy"]
        print(f"first ops.maximum_filter, gpu={gpu} (best of {args.repeat}, fresh interpreters):")
        for name in VARIANTS:
            print(f"  {name:32s} {best[name] * 1e3:7.1f} ms  (+{(best[name] - base) * 1e3:5.1f} ms; "
                  f"torch imported: {seen[name]['torch']}, cupy imported: {seen[name]['cupy']}, "
                  f"served by {seen[name]['served']})")

    import numpy as np

    from spacr_accel_core import ops

    first = np.ones((8, 4), np.float32)
    second = np.ones((4, 4), np.float32)
    ops.matmul(first, second)
    timed = side_by_side({"ops": lambda: ops.matmul(first, second), "plain": lambda: first @ second}, 5, each=20000)
    through_ops, plain = timed["ops"].best, timed["plain"].best
    print(f"tiny (8 x 4) @ (4 x 4): through ops {through_ops * 1e6:.2f} us per call, plain @ {plain * 1e6:.2f} us "
          f"(dispatch overhead {(through_ops - plain) * 1e6:.2f} us)")


if __name__ == "__main__":
    main()
