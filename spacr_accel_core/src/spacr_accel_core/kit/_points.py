"""Read attribution by SciPy's own KD-tree ball query, without spaCR's loop over the reads: the
floor's answer, and the one a compiled backend defers to for the reads whose candidate set
rounding could change. Public through :mod:`spacr_accel_core.toolkit` (:func:`attribute_by_tree`,
:func:`decide_attribution`); ``scipy.spatial`` is imported on first use.

WHY THE TREE ITSELF. spaCR's candidates for a read are what ``cKDTree.query_ball_point`` returns
for it: the objects whose float64 squared distance is within the squared reach, except that the
tree also takes (or skips) whole nodes by their rectangles' distances, which it updates step by
step and so rounds on its own. Where a sum lies within rounding of the bound only the same tree,
built the same way on the same centres, gives the same set; one query of every read at once
returns each set sorted by object index, as spaCR's call does.

WHY ``np.hypot``. spaCR's gap is ``np.hypot(dy, dx) - radius``: C's ``hypot``, which is not the
square root of ``dy * dy + dx * dx`` rounded (about one pair in six differs in its last bit), and
the gaps decide the owner and the tie, so the same function gives the same answer.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Neighbourhoods", "attribute_by_tree", "decide_attribution", "neighbourhoods", "padded_reach"]


def decide_attribution(count: int, rows: np.ndarray, members: np.ndarray, gaps: np.ndarray,
                       footprint: float, tie: float) -> tuple[np.ndarray, np.ndarray]:
    """spaCR's verdict from each read's candidates: the smallest gap (lowest object among equals)
    owns the read within ``footprint``, unless the second smallest lies less than ``tie`` above it.

    :param count: the reads.
    :param rows: int64 ``(K,)``: the read of each candidate.
    :param members: int64 ``(K,)``: the object of each candidate.
    :param gaps: float64 ``(K,)``: its gap, ``np.hypot(dy, dx) - radius``.
    :returns: ``(owner, ambiguous)``, int64 and bool ``(count,)``.
    """
    owner = np.full(count, -1, dtype=np.int64)
    ambiguous = np.zeros(count, dtype=bool)
    if rows.size == 0:
        return owner, ambiguous
    order = np.lexsort((members, gaps, rows))  # by read, then gap, then object: spaCR's stable sort
    rows, members, gaps = rows[order], members[order], gaps[order]
    first = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    ends = np.r_[first[1:], rows.size]
    read = rows[first]
    smallest = gaps[first]
    has_second = ends - first > 1
    second = gaps[np.minimum(first + 1, rows.size - 1)]
    within = ~(smallest > footprint)
    tied = within & has_second & (second - smallest < tie)
    ambiguous[read] = tied
    owner[read] = np.where(within & ~tied, members[first], -1)
    return owner, ambiguous


def attribute_by_tree(peaks: np.ndarray, centroids: np.ndarray, radius: np.ndarray, footprint: float,
                      tie: float) -> tuple[np.ndarray, np.ndarray]:
    """``(owner, ambiguous)`` of every read, spaCR's answer bit for bit: its tree, its ball query,
    its gaps, its verdict, with the loop over the reads done in arrays.

    :param peaks: finite float64 ``(N, 2)``.
    :param centroids: finite float64 ``(M, 2)``, ``M >= 1``.
    :param radius: float64 ``(M,)``, ``sqrt(max(area, 0) / pi)``.
    :param footprint: how far past a boundary a read may lie.
    :param tie: how close the two nearest boundaries may be.
    :returns: ``(owner, ambiguous)``, int64 and bool ``(N,)``.
    """
    from scipy.spatial import cKDTree

    count = peaks.shape[0]
    if count == 0:
        return np.full(0, -1, dtype=np.int64), np.zeros(0, dtype=bool)
    reach = float(radius.max()) + float(footprint)
    found = cKDTree(centroids).query_ball_point(peaks.reshape(-1, 2), r=reach)
    lengths = np.fromiter((len(each) for each in found), dtype=np.int64, count=count)
    members = np.fromiter(itertools.chain.from_iterable(found), dtype=np.int64, count=int(lengths.sum()))
    rows = np.repeat(np.arange(count, dtype=np.int64), lengths)
    gaps = np.hypot(centroids[members, 0] - peaks[rows, 0], centroids[members, 1] - peaks[rows, 1]) - radius[members]
    return decide_attribution(count, rows, members, gaps, footprint, tie)


def padded_reach(bound: float, largest: float) -> float:
    """A reach that holds every point whose float64 sum ``dy * dy + dx * dx`` can be within
    ``bound``, coordinates up to ``largest`` in magnitude: ``2**-30`` over the root and ``2**-45`` of
    the coordinates, far above the rounding of a coordinate difference and of the root.

    :param bound: the limit on the squared sum.
    :param largest: the largest coordinate magnitude a point within the bound can have.
    :returns: the padded reach.
    """
    return math.sqrt(bound) * (1.0 + 2.0**-30) + (largest + 1.0) * 2.0**-45


@dataclass(frozen=True)
class Neighbourhoods:
    """Fixed points listed by cell of a uniform grid grown by one cell all round, each cell's list
    holding the points of its own and its eight neighbouring cells: ``near_y[starts[c]:starts[c +
    1]]`` (and ``near_x``) for cell ``c = (floor((y - low_y) / cell) + 1) * (columns + 2) +
    floor((x - low_x) / cell) + 1``; a point with ``(y - low_y) / cell`` outside ``[-1, rows + 1)``
    (or ``x``'s outside ``[-1, columns + 1)``) has none within the reach.

    :param near_y: float64, the listed points' rows, cell after cell.
    :param near_x: float64, their columns.
    :param starts: int64 ``((rows + 2) * (columns + 2) + 1,)``, each cell's first slot.
    :param low_y: the grid's first row coordinate.
    :param low_x: its first column coordinate.
    :param cell: the cells' width, wider than the reach asked for.
    :param rows: the grid's rows of cells holding points.
    :param columns: its columns of cells.
    """

    near_y: np.ndarray
    near_x: np.ndarray
    starts: np.ndarray
    low_y: float
    low_x: float
    cell: float
    rows: int
    columns: int


def neighbourhoods(fixed: np.ndarray, reach: float) -> Neighbourhoods:
    """The grid of :class:`Neighbourhoods` over ``fixed`` (finite float64 ``(M, 2)``, ``M >= 1``) for
    cells wider than ``reach`` (with a pad over the rounding of the placement, and no more than
    about four cells per point along an axis): a point's one cell lists every fixed point within
    ``reach`` of it, because ``floor((v - low) / cell)`` is monotonic in ``v`` and a point within
    the reach of another is less than a cell from it along each axis.

    :param fixed: the points to list.
    :param reach: the distance within which a point's cell must list every fixed point.
    :returns: the grid, its lists and the arithmetic that places a point in it.
    """
    largest = float(np.abs(fixed).max())
    cell = max(reach * (1.0 + 2.0**-20) + (largest + 1.0) * 2.0**-40,
               float(np.ptp(fixed, axis=0).max()) / min(1024, 4 * math.isqrt(fixed.shape[0]) + 4))
    low_y, low_x = float(fixed[:, 0].min()), float(fixed[:, 1].min())
    down = ((fixed[:, 0] - low_y) / cell).astype(np.int64)
    across = ((fixed[:, 1] - low_x) / cell).astype(np.int64)
    rows, columns = int(down.max()) + 1, int(across.max()) + 1
    shifts = np.array([(a, b) for a in range(3) for b in range(3)])
    cells = ((down[:, None] + shifts[:, 0]) * (columns + 2) + across[:, None] + shifts[:, 1]).reshape(-1)
    chosen = np.repeat(np.arange(fixed.shape[0]), 9)[np.argsort(cells, kind="stable")]
    starts = np.zeros((rows + 2) * (columns + 2) + 1, dtype=np.int64)
    np.cumsum(np.bincount(cells, minlength=(rows + 2) * (columns + 2)), out=starts[1:])
    return Neighbourhoods(np.ascontiguousarray(fixed[chosen, 0]), np.ascontiguousarray(fixed[chosen, 1]), starts,
                          low_y, low_x, cell, rows, columns)
