# mypy: disallow-untyped-defs=False, disallow-untyped-calls=False
"""The points family's compiled loops and their drivers: read attribution and the merge's inlier
counts on a uniform grid of the fixed points, the moving ones shared between threads. Imported by
the hooks of :mod:`._points` once the kernel is ready (it imports numba, ~0.4 s), and by the
warm-up.

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

A point's cells are those its padded reach touches, found by the same monotonic arithmetic that
placed the fixed points in cells (``floor((x - low) / cell)``, clipped), so every fixed point within
the reach is in one of them however the division rounds. Inside, the float64 sum ``dy * dy + dx *
dx`` decides, as SciPy's tree's does, and ``math.hypot`` is C's ``hypot``, NumPy's ``np.hypot``.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import struct

import numba
import numpy as np

from spacr_accel_core.toolkit import attribute_by_tree, cpu_threads, neighbourhoods, padded_reach, run_parts

from . import _locator  # noqa: F401  (before any njit: these kernels' cache stamped with every file they come from)


@numba.njit(nogil=True, cache=True, inline="always")
def _span(value, reach, low, cell, cells):
    """The first and last cell (clipped to ``0 .. cells - 1``) that ``[value - reach, value + reach]``
    touches; ``first > last`` when it touches none. Clipped before the conversion to an integer,
    so a coordinate far outside the grid never converts out of range."""
    first = (value - reach - low) / cell
    last = (value + reach - low) / cell
    if last < 0.0 or first >= cells:
        return 1, 0
    return int(min(max(first, 0.0), cells - 1.0)), int(min(last, cells - 1.0))


@numba.njit(nogil=True, cache=True)
def attribute(peaks, fixed_y, fixed_x, fixed_index, radius, starts, low_y, low_x, cell, rows, columns,
              reach, bound, band, footprint, tie, begin, end, owner, ambiguous, close):
    """Reads ``begin .. end``: each one's owner or -1, its flag, and ``close`` where a centre's sum
    lies within ``band`` of ``bound`` (the tree's own rounding could decide that candidate)."""
    for n in range(begin, end):
        py, px = peaks[n, 0], peaks[n, 1]
        row_first, row_last = _span(py, reach, low_y, cell, rows)
        column_first, column_last = _span(px, reach, low_x, cell, columns)
        best, best_index, second = math.inf, -1, math.inf
        uncertain = False
        for row in range(row_first, row_last + 1):
            for slot in range(starts[row * columns + column_first], starts[row * columns + column_last + 1]):
                dy = fixed_y[slot] - py
                dx = fixed_x[slot] - px
                squared = dy * dy + dx * dx
                if abs(squared - bound) <= band:
                    uncertain = True
                if squared > bound:
                    continue
                j = fixed_index[slot]
                gap = math.hypot(dy, dx) - radius[j]
                if gap < best or (gap == best and j < best_index):
                    second = best
                    best, best_index = gap, j
                elif gap < second:
                    second = gap
        close[n] = uncertain
        if best_index < 0 or best > footprint:
            continue
        if second - best < tie:
            ambiguous[n] = True
        else:
            owner[n] = best_index


@numba.njit(nogil=True, cache=True)
def count(moved, near_y, near_x, starts, low_y, low_x, cell, rows, columns, limit, first_set, last_set, counts):
    """Sets ``first_set .. last_set``: the points with a fixed point whose sum is within ``limit``.

    ``starts`` indexes, per cell of the grid grown by one cell on every side, the fixed points of
    its own and its eight neighbouring cells (``near_y``, ``near_x``): one cell's list holds every
    fixed point within a cell's width of a point in it."""
    for b in range(first_set, last_set):
        inside = 0
        for n in range(moved.shape[1]):
            py, px = moved[b, n, 0], moved[b, n, 1]
            down = (py - low_y) / cell
            across = (px - low_x) / cell
            if not (-1.0 <= down < rows + 1.0 and -1.0 <= across < columns + 1.0):
                continue
            here = (math.floor(down) + 1) * (columns + 2) + math.floor(across) + 1
            for slot in range(starts[here], starts[here + 1]):
                dy = near_y[slot] - py
                dx = near_x[slot] - px
                if dy * dy + dx * dx <= limit:
                    inside += 1
                    break
        counts[b] = inside


def warm_types() -> None:
    """Compile both loops on the driver's exact argument types."""
    one = np.zeros((1, 2))
    one.flags.writeable = False
    index = np.zeros(1, dtype=np.int64)
    starts = np.array([0, 1], dtype=np.int64)
    flat = np.zeros(1)
    fixed = np.zeros(1)
    fixed.flags.writeable = False
    attribute(one, flat, flat, index, fixed, starts, 0.0, 0.0, 1.0, 1, 1, 1.0, 1.0, 0.0, 1.0, 1.0, 0, 1,
              np.full(1, -1, dtype=np.int64), np.zeros(1, dtype=np.bool_), np.zeros(1, dtype=np.bool_))
    sets = np.zeros((1, 1, 2))
    sets.flags.writeable = False
    count(sets, flat, flat, np.zeros(10, dtype=np.int64), 0.0, 0.0, 1.0, 1, 1, 1.0, 0, 1, np.zeros(1, dtype=np.int64))


# ---- the drivers ----------------------------------------------------------------------------------


_THREADED = 2048
"""Reads (or moved points) from which a call is shared between threads."""


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


def attribute_reads(peaks: np.ndarray, centroids: np.ndarray, radius: np.ndarray,
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
    run_parts(attribute, [(*fixed, reach_padded, bound, band, float(footprint), float(tie), begin, end,
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


def count_within(moved: np.ndarray, target: np.ndarray, limit: float) -> np.ndarray:
    """Per set, the points with a target whose float64 sum is within ``limit``."""
    sets, points = moved.shape[:2]
    if math.isinf(limit):
        return np.full(sets, points, dtype=np.int64)
    # a point within the bound of a target is no larger than the target plus the bound's root
    placing = _neighbourhoods(target, padded_reach(limit, float(np.abs(target).max()) + math.sqrt(limit)))
    counts = np.zeros(sets, dtype=np.int64)
    chunks = _parts(sets, sets * points)
    frozen = _frozen(moved)
    run_parts(count, [(frozen, *placing, float(limit), begin, end, counts) for begin, end in chunks])
    return counts


def warm_points() -> object:
    """Compile (or load) both loops on the driver's exact types: for a warm-up."""
    warm_types()
    return count_within(np.zeros((1, 1, 2)), np.zeros((1, 2)), 1.0)
