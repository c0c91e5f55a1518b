"""Automatic dispatch against the NumPy floor on maximum_filter's awkward shapes: ratios side by side.

"Auto" is ``ops.maximum_filter(field, size)`` over every installed plugin, the example plugins
under ``examples/`` included (``pip install -e examples/spacr-accel-opencv``); "floor" is the same
call with ``backend="numpy"``. Both run alternately in one process (best of several repeats, so
both see the same machine load), after the numba backend's kernels are compiled
(``spacr_accel_numba.warm()``); each row names the backend that served "auto" and checks its
answer bit for bit against the floor's. The shapes are where a backend whose time grows with the
window (``cv2.dilate`` compares every tap) falls behind one whose time does not: long thin fields
under windows wider than the field, and wide windows on tiles.

    python benchmarks/bench_dispatch_floor.py            # about ten seconds on 2 cores
    python benchmarks/bench_dispatch_floor.py --repeat 9

Target: every "auto / floor" at most 2.0 (whatever the registry picks is never more than twice
as slow as the floor it outranks); it prints, it does not assert.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from _timing import fastest  # the benchmarks' one timer, beside this file

CASES = (((2, 70_000), 99_999), ((2, 70_000), 1001), ((2, 70_000), 201), ((2, 70_000), 93),
         ((8, 20_000), 5001), ((64, 4096), 1001), ((64, 4096), 301), ((4096, 64), 1001),
         ((512, 512), 301), ((1024, 1024), 151), ((2048, 2048), 101))
"""Field shapes and window edges: line scans and strips of a plate, then tiles under wide windows
(a background estimate, a colony-sized neighbourhood)."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="interleaved repeats; the best of each is kept")
    args = parser.parse_args()

    from spacr_accel_core import last_dispatch, ops
    from spacr_accel_core.testing import assert_same_field
    try:
        import spacr_accel_numba
    except ImportError:
        print("spacr-accel-numba is not installed")
    else:
        spacr_accel_numba.warm()

    rng = np.random.default_rng(0)
    print(f"installed, in order: {', '.join(ops.accelerated_backends(gpu=False))}")
    print(f"{'field':>12} {'size':>6} {'auto ms':>8} {'floor ms':>8} {'auto/floor':>10}  served by")
    worst = 0.0
    for shape, size in CASES:
        field = rng.standard_normal(shape).astype(np.float32)
        got = ops.maximum_filter(field, size, gpu=False)
        served = last_dispatch()
        assert_same_field(got, ops.maximum_filter(field, size, backend="numpy"))
        auto, floor = fastest(lambda f=field, s=size: ops.maximum_filter(f, s, gpu=False),
                              lambda f=field, s=size: ops.maximum_filter(f, s, backend="numpy"),
                              repeat=args.repeat)
        worst = max(worst, auto / floor)
        name = served.backend if served else "?"
        declined = ", ".join(n for n, _ in served.declined) if served else ""
        print(f"{'x'.join(map(str, shape)):>12} {size:>6} {auto * 1e3:8.2f} {floor * 1e3:8.2f} "
              f"{auto / floor:10.2f}  {name}" + (f" (declined: {declined})" if declined else ""), flush=True)
    print(f"worst auto/floor {worst:.2f} (target <= 2.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
