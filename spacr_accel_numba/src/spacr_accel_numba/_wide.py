"""Exact nearest neighbours of wide points (16 coordinates and more): one float32 GEMM, tile by
tile, each tile folded into every row's running minimum and candidates while it is in cache.

WHY TALL TILES. NumPy's GEMM (the BLAS's, with its threads) packs its right operand again on every
call: full-width blocks of ~100 rows repacked all 20,000 targets 200 times. Tiles of
:data:`_TILE_ROWS` x :data:`_TILE_COLUMNS` (16 MiB, in the shared cache) took the D = 64,
20,000 x 20,000 GEMM from 0.39-0.43 s to 0.35-0.36 s (best of 11, interleaved; 2048 rows then).
4096 rows rather than 2048 halve the GEMM calls and the hand-offs between threads, each a wait
for every thread: on two busy cores the search took 0.57 of faiss's time against 0.96 with 2048
rows (0.83 against 0.87 on one thread); 8192 rows and 2048 columns were no better.

WHY A RUNNING STATE. A row's threshold (its minimum plus the margin,
:class:`spacr_accel_core.exact.ExpansionPlan`) is known only after its last tile, so each tile
updates the running minimum and keeps the columns at or below the running threshold
(:func:`._kernels.absorb_tile`): the threshold only falls, so no final candidate is missed, and
usually one or two columns are kept. A row with more candidates than :data:`HELD` (ties,
duplicated targets) is searched again whole, its GEMM row recomputed.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from spacr_accel_core.toolkit import ExpansionPlan, cpu_threads, expansion_plan, run_parts

_F32_UNIT = float(np.finfo(np.float32).eps) / 2  # unit roundoff of an IEEE float32 GEMM
_TILE_ROWS = 4096
_TILE_COLUMNS = 1024  # with _TILE_ROWS, 16 MiB of float32: measured best of 256-8192 at M = 20,000
_AGAIN_BYTES = 8 << 20  # one block of whole GEMM rows for the rows searched again

HELD = 16
"""Candidates a row keeps across tiles before it is searched again whole."""

WIDE = 16
"""From this many coordinates on the GEMM beats a tree (the NumPy floor's rule too); between the
grid's 3 and this, the floor's KD-tree answers."""


def search(kernels: ModuleType, source: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each source's exact nearest target (lowest index on ties) and the float64 squared distance.

    :param kernels: the compiled :mod:`._kernels`.
    :param source: float32 or float64 ``(N, D)`` finite points (D >= 1).
    :param target: likewise ``(M, D)``, M >= 1.
    """
    n, m, dims = source.shape[0], target.shape[0], source.shape[1]
    plan = expansion_plan(source, target, np.float32, _F32_UNIT)
    # The plan's product is D + 1 deep, its last term 1 x |t|^2: the GEMM runs D deep (a depth the
    # BLAS's kernels take whole) and the kernels add |t|^2, the sum's last term, as they read.
    left, right, norms = plan.left[:, :dims], plan.right[:dims], plan.right[dims]
    s64 = np.ascontiguousarray(source, dtype=np.float64)
    t64 = np.ascontiguousarray(target, dtype=np.float64)
    # numba compiles read-only arrays as other types, and no call may compile: copied if so.
    s64 = s64 if s64.flags.writeable else s64.copy()
    t64 = t64 if t64.flags.writeable else t64.copy()
    found = np.empty(n, dtype=np.int64)
    squared = np.empty(n, dtype=np.float64)
    rows, columns = min(n, _TILE_ROWS), min(m, _TILE_COLUMNS)
    tile = np.empty((rows, columns), dtype=np.float32)
    lowest = np.empty(rows, dtype=np.float32)
    held_at = np.empty((rows, HELD), dtype=np.int64)
    held_value = np.empty((rows, HELD), dtype=np.float32)
    held = np.empty(rows, dtype=np.int64)
    again: list[np.ndarray] = []
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        lowest[:] = np.inf
        held[:] = 0
        bounds = np.linspace(0, stop - start, min(cpu_threads(), stop - start) + 1).astype(np.int64)
        for column in range(0, m, columns):
            block = tile[:stop - start, :min(m, column + columns) - column]
            np.matmul(left[start:stop], right[:, column:column + block.shape[1]], out=block)
            sums = norms[column:column + block.shape[1]]
            run_parts(kernels.absorb_tile, [(block, sums, column, plan.margin, start, lowest, held_at, held_value,
                                             held, int(bounds[i]), int(bounds[i + 1]))
                                            for i in range(len(bounds) - 1)])
        kernels.settle_held(lowest[:stop - start], plan.margin, start, held_at, held_value, held, s64, t64,
                            found, squared)
        again.append(start + np.flatnonzero(held[:stop - start] < 0))
    _search_again(kernels, plan, np.concatenate(again), s64, t64, found, squared)
    return found, squared


def _search_again(kernels: ModuleType, plan: ExpansionPlan, rows: np.ndarray, s64: np.ndarray,
                  t64: np.ndarray, found: np.ndarray, squared: np.ndarray) -> None:
    """Settle ``rows`` (indices into the source) from their whole GEMM rows (:func:`._kernels.settle_rows`)."""
    m, dims = t64.shape
    step = max(1, _AGAIN_BYTES // (4 * m))
    for first in range(0, rows.shape[0], step):
        chosen = rows[first:first + step]
        approx = plan.left[chosen, :dims] @ plan.right[:dims]  # |t|^2 added by the kernel, as above
        part_found = np.empty(chosen.shape[0], dtype=np.int64)
        part_squared = np.empty(chosen.shape[0], dtype=np.float64)
        kernels.settle_rows(approx, plan.right[dims], plan.margin[chosen], 0, s64[chosen], t64, part_found,
                            part_squared, 0, chosen.shape[0])
        found[chosen] = part_found
        squared[chosen] = part_squared
