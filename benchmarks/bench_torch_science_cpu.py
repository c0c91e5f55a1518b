#!/usr/bin/env python3
"""The torch backend forced onto the CPU (``backend="torch", gpu=False``) against numba, on the
science calls, measured side by side in one run on the same inputs:

* ``nearest_neighbours`` k=4, N = M = 100,000 points in 2-D (uniform over a 10,000-pixel plate).
  Target: torch within 3x of numba.
* ``nearest_neighbours`` k=2, ``metric="hamming"``, 20,000 x 20,000 descriptors of 32 bytes.
  Target: torch within 3x of numba.

Both answers are also compared with the NumPy floor, bit for bit. Times are the best of
``--repeats`` runs, the two backends alternating so that a busy machine slows both alike.

Run: ``python benchmarks/bench_torch_science_cpu.py`` (about a minute on two cores). Exits
non-zero when a target is missed or an answer differs.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def alternating(repeats: int, *works: Callable[[], object]) -> list[float]:
    """The best time of each work over ``repeats`` rounds, run in turn within each round."""
    best = [float("inf")] * len(works)
    for _ in range(repeats):
        for number, work in enumerate(works):
            start = time.perf_counter()
            work()
            best[number] = min(best[number], time.perf_counter() - start)
    return best


def same(first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray]) -> bool:
    return bool(np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=100_000, help="N = M for k=4 (default 100,000)")
    parser.add_argument("--descriptors", type=int, default=20_000, help="N = M for Hamming (default 20,000)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch

    from spacr_accel_core import ops, warm_up

    warm_up()  # numba compiles its kernels in the background: wait, so compile time is not timed
    rng = np.random.default_rng(0)
    source = rng.uniform(0, 10_000, (args.points, 2)).astype(np.float32)
    target = rng.uniform(0, 10_000, (args.points, 2)).astype(np.float32)
    bits = rng.integers(0, 256, (args.descriptors, 32), dtype=np.uint8)
    other = rng.integers(0, 256, (args.descriptors, 32), dtype=np.uint8)
    cases: list[tuple[str, Callable[..., Any]]] = [
        (f"nearest k=4, N=M={args.points:,} D=2",
         lambda **o: ops.nearest_neighbours(source, target, k=4, **o)),
        (f"Hamming k=2, {args.descriptors:,} x {args.descriptors:,} x 32 B",
         lambda **o: ops.nearest_neighbours(bits, other, k=2, metric="hamming", **o)),
    ]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; torch forced onto the CPU (gpu=False)")
    print(f"{'call':<40} {'numba s':>9} {'torch s':>9} {'torch/numba':>12} {'target':>7} {'agrees':>7}")
    failed = False
    for label, call in cases:
        floor = call(backend="numpy")
        by_numba = call(backend="numba")
        by_torch = call(backend="torch", gpu=False)
        agrees = same(floor, by_numba) and same(floor, by_torch)
        numba_s, torch_s = alternating(args.repeats, functools.partial(call, backend="numba"),
                                       functools.partial(call, backend="torch", gpu=False))
        ratio = torch_s / numba_s
        failed |= ratio > 3.0 or not agrees
        print(f"{label:<40} {numba_s:>9.3f} {torch_s:>9.3f} {ratio:>11.1f}x {'<= 3x':>7} "
              f"{'yes' if agrees else 'NO':>7}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
