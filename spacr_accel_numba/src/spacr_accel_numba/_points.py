"""The point operations on numba: read attribution and the merge's inlier counts on a uniform grid
of the fixed points, the moving ones shared between threads (:mod:`._points_kernels`).

EXACT BY THE SAME COMPARISONS. A candidate is decided by the float64 sum ``dy * dy + dx * dx``
against the squared bound, as SciPy's KD-tree decides it point by point, and a gap is ``hypot`` as
``np.hypot`` computes it. The tree also takes or skips whole nodes by rectangle distances it rounds
on its own, which can only matter for a sum within rounding of the bound: a read with such a
candidate is flagged and answered by the tree itself (``toolkit.attribute_by_tree``, the floor's
path). Counting needs no tree: spaCR's count compares the nearest distance, which is exact.

THE GRID. Cells at least as wide as the padded reach (and no more than about four per fixed point
along an axis), the fixed points sorted by cell; a point visits the cells its padded reach
touches. The pad (``2**-30`` relative, ``2**-45`` of the largest coordinate) is far above the
rounding of a coordinate difference, so no point within the bound is ever outside the cells visited.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import struct
from types import ModuleType

import numpy as np

from spacr_accel_core.toolkit import attribute_by_tree, cpu_threads, neighbourhoods, padded_reach, run_parts

__all__ = ["attribute_reads", "count_within", "kernels", "warm_job"]

_THREADED = 2048
"""Reads (or moved points) from which a call is shared between threads."""


def kernels() -> ModuleType:
    """The compiled loops (imports numba and loads or compiles them on first use)."""
    from . import _points_kernels

    return _points_kernels


class _Grid:
    """The fixed points bucketed by cell: their coordinates and indices in cell order, each cell's
    first slot, and the arithmetic the kernels place a point with."""

    def __init__(self, points: np.ndarray, reach: float) -> None:
        self.low_y, self.low_x = float(points[:, 0].min()), float(points[:, 1].min())
        span_y, span_x = float(points[:, 0].max()) - self.low_y, float(points[:, 1].max()) - self.low_x
        across = min(1024, 4 * math.isqrt(points.shape[0]) + 4)
        self.cell = max(reach, max(span_y, span_x) / across)
        self.rows = int(span_y / self.cell) + 1
        self.columns = int(span_x / self.cell) + 1
        flat = ((points[:, 0] - self.low_y) / self.cell).astype(np.int64) * self.columns \
            + ((points[:, 1] - self.low_x) / self.cell).astype(np.int64)
        order = np.argsort(flat, kind="stable")
        self.index = order.astype(np.int64)
        self.y = np.ascontiguousarray(points[order, 0])
        self.x = np.ascontiguousarray(points[order, 1])
        self.starts = np.zeros(self.rows * self.columns + 1, dtype=np.int64)
        np.cumsum(np.bincount(flat, minlength=self.rows * self.columns), out=self.starts[1:])

    def placing(self) -> tuple[object, ...]:
        return self.y, self.x, self.starts, self.low_y, self.low_x, self.cell, self.rows, self.columns


def _frozen(array: np.ndarray) -> np.ndarray:
    """A read-only view: the kernels are compiled once, for the read-only arrays the core passes."""
    view = array.view()
    view.flags.writeable = False
    return view


def _parts(count: int, work: int | None = None) -> list[tuple[int, int]]:
    """``count`` items in one contiguous share per thread (one share below :data:`_THREADED` of
    ``work``, the points to place, ``count`` by default)."""
    threads = 1 if (count if work is None else work) < _THREADED else min(count, cpu_threads())
    edges = np.linspace(0, count, threads + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in itertools.pairwise(edges) if b > a]


def attribute_reads(compiled: ModuleType, peaks: np.ndarray, centroids: np.ndarray, radius: np.ndarray,
                    footprint: float, tie: float) -> tuple[np.ndarray, np.ndarray]:
    """spaCR's owners and flags; reads with a candidate at the rounding of the bound by the tree."""
    reach = float(radius.max()) + float(footprint)
    bound = reach * reach
    largest = max(float(np.abs(peaks).max()), float(np.abs(centroids).max())) + reach
    band = bound * 2.0**-36 + largest * largest * 2.0**-40
    reach_padded = padded_reach(bound + band, largest)
    grid = _Grid(centroids, reach_padded)
    count = peaks.shape[0]
    owner = np.full(count, -1, dtype=np.int64)
    ambiguous = np.zeros(count, dtype=bool)
    close = np.zeros(count, dtype=bool)
    y, x, starts, low_y, low_x, cell, rows, columns = grid.placing()
    fixed = (_frozen(peaks), y, x, grid.index, _frozen(radius), starts, low_y, low_x, cell, rows, columns)
    run_parts(compiled.attribute, [(*fixed, reach_padded, bound, band, float(footprint), float(tie), begin, end,
                                    owner, ambiguous, close) for begin, end in _parts(count)])
    deferred = np.flatnonzero(close)
    if deferred.size:
        owner[deferred], ambiguous[deferred] = attribute_by_tree(np.ascontiguousarray(peaks[deferred]), centroids,
                                                                 radius, footprint, tie)
    return owner, ambiguous


_LAST: list[tuple[bytes, tuple[object, ...]]] = []
"""The last target's neighbourhoods: a search scores batch after batch against one target."""


def _neighbourhoods(target: np.ndarray, reach: float) -> tuple[object, ...]:
    """The toolkit's grid of the targets, as the count kernel takes it; kept for the next call
    with the same target bytes and reach (the key is a digest of them)."""
    key = hashlib.blake2b(target.tobytes() + struct.pack("<dq", reach, target.shape[0]), digest_size=20).digest()
    last = _LAST[-1] if _LAST else None
    if last is not None and last[0] == key:
        return last[1]
    grid = neighbourhoods(target, reach)
    placing = (grid.near_y, grid.near_x, grid.starts, grid.low_y, grid.low_x, grid.cell, grid.rows, grid.columns)
    _LAST[:] = [(key, placing)]
    return placing


def count_within(compiled: ModuleType, moved: np.ndarray, target: np.ndarray, limit: float) -> np.ndarray:
    """Per set, the points with a target whose float64 sum is within ``limit``."""
    sets, points = moved.shape[:2]
    if math.isinf(limit):
        return np.full(sets, points, dtype=np.int64)
    # a point within the bound of a target is no larger than the target plus the bound's root
    placing = _neighbourhoods(target, padded_reach(limit, float(np.abs(target).max()) + math.sqrt(limit)))
    counts = np.zeros(sets, dtype=np.int64)
    chunks = _parts(sets, sets * points)
    frozen = _frozen(moved)
    run_parts(compiled.count, [(frozen, *placing, float(limit), begin, end, counts) for begin, end in chunks])
    return counts


def warm_job() -> object:
    """Compile (or load) both loops on the driver's exact types: for a warm-up."""
    compiled = kernels()
    compiled.warm_types()
    return count_within(compiled, np.zeros((1, 1, 2)), np.zeros((1, 2)), 1.0)
