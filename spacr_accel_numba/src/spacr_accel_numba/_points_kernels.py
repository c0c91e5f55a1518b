# mypy: disallow-untyped-defs=False, disallow-untyped-calls=False
"""The compiled loops of the point operations (imports numba): read attribution and the merge's
inlier count, each on a uniform grid of the fixed points and a share of the moving ones given by
the driver (:mod:`._points`).

A point's cells are those its padded reach touches, found by the same monotonic arithmetic that
placed the fixed points in cells (``floor((x - low) / cell)``, clipped), so every fixed point within
the reach is in one of them however the division rounds. Inside, the float64 sum ``dy * dy + dx *
dx`` decides, as SciPy's tree's does, and ``math.hypot`` is C's ``hypot``, NumPy's ``np.hypot``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

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
