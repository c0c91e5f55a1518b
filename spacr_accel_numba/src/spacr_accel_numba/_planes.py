"""The spot score on numba: NumPy's float32 order of operations in one compiled pass per band of rows,
the bands shared between the CPU's threads.

WHY IT IS NumPy's ANSWER. NumPy's float32 ``std(axis=0)`` of a C-ordered ``(C, K, Y, X)`` stack adds
the cycles pixel by pixel in order from ``+0.0`` (the cycle axis is never the inner loop while more
than one pixel is reduced, so no pairwise blocks), divides by the count in float64 (its count is an
``intp``) and rounds once, squares each float32 deviation, sums the squares the same way, divides,
takes the float32 square root; ``mean(axis=0)`` over the channels adds those in order and divides.
The kernel does exactly these operations in that order per pixel (IEEE float32, no fast-math, no
fused multiply-add), so its bits are NumPy's, NaN and infinity included. The core hands every
backend at least two pixels (a single pixel is summed pairwise, and answered by the core).

WHY NOT THE TRANSLATION. A translation is a copy: NumPy's slice copy of a contiguous run is the C
library's ``memcpy``, and the floor writes each byte once. A compiled copy loop measured at half
that speed on a 1480 x 1480 float32 plane, and threads did not pay on a shared two-core machine,
so numba leaves the translation to the floor (docs/decisions.md).
"""

from __future__ import annotations

import functools
from types import ModuleType

import numpy as np

from spacr_accel_core.toolkit import cpu_threads, run_parts

__all__ = ["kernels", "spot_score", "warm_job"]

SPLIT_ROWS = 16
"""Rows below which the score runs in one thread (a hand-off costs more than such a band)."""


@functools.cache
def kernels() -> ModuleType:
    """The compiled loop (imports numba and loads or compiles it on first use)."""
    from . import _planes_kernels

    return _planes_kernels


def spot_score(compiled: ModuleType, stack: np.ndarray) -> np.ndarray:
    """float32 ``(Y, X)`` of a C-contiguous float32 ``(C, K, Y, X)`` stack (NumPy's bits)."""
    source = np.ascontiguousarray(stack, dtype=np.float32)
    if source.flags.writeable:  # one compiled variant: the read-only views the core passes
        source = source.view()
        source.flags.writeable = False
    height = source.shape[2]
    out = np.empty(source.shape[2:], dtype=np.float32)
    threads = 1 if height < SPLIT_ROWS else min(cpu_threads(), height)
    edges = np.linspace(0, height, threads + 1).astype(int)
    run_parts(compiled.score_rows, [(source, out, int(edges[i]), int(edges[i + 1])) for i in range(threads)])
    return out


def warm_job() -> object:
    """Compile (or load) the kernel on inputs of exactly the driver's types: for a warm-up."""
    stack = np.zeros((2, 1, 2, 2), dtype=np.float32)
    stack.flags.writeable = False
    return spot_score(kernels(), stack)
