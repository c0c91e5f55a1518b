"""Exact nearest neighbours of wide points (4 coordinates and more): one float32 GEMM per block of
sources, settled in the same pass that finds each row's candidates.

WHY FUSED. The NumPy floor's matrix path makes three more passes over each ``(rows, M)`` block
after the GEMM (the row minimum, the comparison with the margin, the candidates' positions). Here the
block is kept small enough to stay in the CPU's cache, and each thread takes its share of the
block's rows: NumPy's SIMD argmin gives each row's minimum and threshold, and one compiled pass
counts the candidates, almost always the minimum alone, which is then the answer
(:func:`._kernels.settle_rows` walks the row otherwise). Threading the argmin too, not only the
settle, took D = 64, 20,000 x 20,000 from 1.13-1.21x faiss's time to 0.78-1.11x in the same runs.
The GEMM is NumPy's (the BLAS's threads).
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from spacr_accel_core.exact import expansion_plan
from spacr_accel_core.tiling import cpu_threads, run_parts

_F32_UNIT = float(np.finfo(np.float32).eps) / 2  # unit roundoff of an IEEE float32 GEMM
_BLOCK_BYTES = 8 << 20  # one block of the GEMM's result: measured best of 2-32 MiB at M = 20,000

WIDE = 16
"""From this many coordinates on the GEMM beats a tree (the NumPy floor's rule too); between the
grid's 3 and this, the floor's KD-tree answers."""


def search(kernels: ModuleType, source: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each source's exact nearest target (lowest index on ties) and the float64 squared distance.

    :param kernels: the compiled :mod:`._kernels`.
    :param source: float32 or float64 ``(N, D)`` finite points (D >= 1).
    :param target: likewise ``(M, D)``, M >= 1.
    """
    n, m = source.shape[0], target.shape[0]
    plan = expansion_plan(source, target, np.float32, _F32_UNIT)
    s64 = np.ascontiguousarray(source, dtype=np.float64)
    t64 = np.ascontiguousarray(target, dtype=np.float64)
    found = np.empty(n, dtype=np.int64)
    squared = np.empty(n, dtype=np.float64)
    rows = max(cpu_threads(), min(n, _BLOCK_BYTES // (4 * m)))
    approx = np.empty((rows, m), dtype=np.float32)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        block = approx[:stop - start]
        np.matmul(plan.left[start:stop], plan.right, out=block)
        bounds = np.linspace(0, stop - start, min(cpu_threads(), stop - start) + 1).astype(np.int64)
        run_parts(_settle, [(kernels, block, plan.margin, start, s64, t64, found, squared,
                             int(bounds[i]), int(bounds[i + 1])) for i in range(len(bounds) - 1)])
    return found, squared


def _settle(kernels: ModuleType, block: np.ndarray, margin: np.ndarray, start: int, s64: np.ndarray,
            t64: np.ndarray, found: np.ndarray, squared: np.ndarray, first: int, stop: int) -> None:
    """Rows ``first:stop`` of one block, in one thread: NumPy's SIMD argmin (it releases the GIL),
    the threshold as the float32 sum the floor makes (minimum + margin), then the compiled settle,
    while those rows are still in this core's cache."""
    rows = block[first:stop]
    lowest_at = rows.argmin(axis=1)
    thresholds = rows[np.arange(stop - first), lowest_at]
    thresholds += margin[start + first:start + stop]
    kernels.settle_rows(rows, thresholds, lowest_at, start + first, s64, t64, found, squared, 0, stop - first)
