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

import numpy as np

__all__ = ["attribute_by_tree", "decide_attribution"]


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
