"""The OpenCV backend against the NumPy floor on maximum_filter: ratios measured side by side.

Both run through ``spacr_accel_core.ops`` exactly as a caller gets them (``backend="opencv"`` and
``backend="numpy"``), alternately in one process, best of several repeats, so both see the same
machine load; only the ratio is a result. OpenCV runs on its own thread pool by default; the
single-thread row (``cv2.setNumThreads(1)``) compares the algorithms core for core.

    python examples/spacr-accel-opencv/bench.py            # about half a minute on 2 cores
    python examples/spacr-accel-opencv/bench.py --json
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np

from spacr_accel_core import ops
from spacr_accel_core.testing import assert_same_field

CASES = (((256, 256), 5), ((1024, 1024), 3), ((1024, 1024), 9), ((2048, 2048), 5), ((2048, 2048), 15),
         ((2048, 2048), 41), ((4096, 4096), 9))
"""Field shapes and windows of spaCR's peak finding: tiles to whole plates, spot radii 1 to 20."""


def side_by_side(first: Callable[[], object], second: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Best times of two callables, run alternately so both see the same machine load."""
    a, b = [], []
    for _ in range(repeat):
        for times, fn in ((a, first), (b, second)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return min(a), min(b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="interleaved repeats; the best of each is kept")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()

    import cv2

    rng = np.random.default_rng(0)
    rows = []
    for threads in (cv2.getNumThreads(), 1):
        cv2.setNumThreads(threads)
        for shape, size in CASES:
            field = rng.standard_normal(shape).astype(np.float32)
            assert_same_field(ops.maximum_filter(field, size, backend="opencv"),
                              ops.maximum_filter(field, size, backend="numpy"))
            numpy_s, opencv_s = side_by_side(lambda f=field, s=size: ops.maximum_filter(f, s, backend="numpy"),
                                             lambda f=field, s=size: ops.maximum_filter(f, s, backend="opencv"),
                                             args.repeat)
            rows.append({"shape": list(shape), "size": size, "opencv_threads": threads,
                         "numpy_ms": numpy_s * 1e3, "opencv_ms": opencv_s * 1e3, "speedup": numpy_s / opencv_s})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"maximum_filter, numpy / opencv (best of {args.repeat} interleaved; > 1 means OpenCV is faster)")
    print(f"{'field':>11} {'size':>4} {'cv2 threads':>11} {'numpy ms':>9} {'opencv ms':>9} {'speed-up':>8}")
    for row in rows:
        field = "x".join(map(str, row["shape"]))
        print(f"{field:>11} {row['size']:>4} {row['opencv_threads']:>11} {row['numpy_ms']:>9.2f} "
              f"{row['opencv_ms']:>9.2f} {row['speedup']:>7.2f}x")


if __name__ == "__main__":
    main()
