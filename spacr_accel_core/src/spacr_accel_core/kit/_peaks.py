"""Local maxima as scikit-image's ``peak_local_max`` lists them: brightest first, spaced apart.

``peak_local_max(image, min_distance=d, threshold_abs=t)`` (its defaults otherwise) keeps the pixels
equal to their ``(2d + 1)``-square window's maximum (edges repeated) and above ``t``, drops those
within ``d`` rows or columns of the border, orders them by ``argsort(-value, kind="stable")`` (ties
in row-major order), and then, for ``d > 1``, walks them in that order keeping a peak only when no
peak already kept lies nearer than ``d`` in the Chebyshev norm (``ensure_spacing``: its batches
and its tree change how the walk is computed, never which peaks it keeps). Finding the maxima is the
registry's (``local_maxima``); this is the rest, on the few hundred peaks a field has.

WHY THE WALK IS SHORT. Two maxima of ``(2d + 1)``-square windows nearer than ``d`` lie in each
other's window, so they hold the same value: only plateaus and exact ties ever meet. The walk is
therefore taken only over the peaks that have an earlier neighbour nearer than ``d``, found by
binning the peaks into ``d``-square cells; every other peak is kept as the walk would keep it. A
wide plateau above the threshold makes many such pairs: they are found and walked a part at a time
(at most :data:`PAIRS_AT_ONCE` held), in the walk's order, so memory stays bounded and the answer
is the same.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PAIRS_AT_ONCE", "high_order_statistics", "spaced_peaks"]

PAIRS_AT_ONCE = 1 << 21
"""The most candidate pairs (peaks in adjacent cells) held at once: a field with more (a large flat
plateau above the threshold) is walked in parts of the walk's order, each holding about this many."""


_STRIDE = 61
"""Every 61st pixel is the sample a bound on a high rank is read from (a stride no row length of a
field is likely to align with)."""


def high_order_statistics(values: np.ndarray, ranks: np.ndarray) -> np.ndarray | None:
    """The values at ``ranks`` of ``sorted(values)``, where every rank lies in the top sixteenth.

    A floor for the nuclear peaks is a high percentile (the 99th): its order statistics lie among
    the few values at or above a bound read off a sample, and every value below the bound ranks
    below all of them, so selecting among those few gives the same values as selecting among all
    (``np.partition``'s), at the cost of one comparison pass instead of a partition of the field.

    :param values: a C-contiguous array of real numbers without NaN.
    :param ranks: int64 0-based ranks, ascending.
    :returns: the order statistics, in ``values``' dtype, or ``None`` where a rank is not in the
        top sixteenth or the sample's bound left too few values above it (select among all then).
    """
    flat = values.reshape(-1)
    count = flat.size
    if ranks.size == 0 or (count - int(ranks[0])) * 16 > count:
        return None
    needed = count - int(ranks[0])
    sample = flat[::_STRIDE]
    kept = min(sample.size, 2 * needed * sample.size // count + 64)
    bound = np.partition(sample, sample.size - kept)[sample.size - kept]
    above = flat >= bound
    found = int(np.count_nonzero(above))
    if found < needed:
        return None
    local = ranks - (count - found)
    selected: np.ndarray = np.partition(flat[above], local)[local]
    return selected


def _cells(coords: np.ndarray, spacing: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The peaks binned into ``spacing``-square cells: for each peak and each of the nine cells
    around its own, where that cell's peaks start and stop in ``order`` (the peaks sorted by cell).

    :returns: ``(order, starts, stops)``, ``starts`` and ``stops`` shaped ``(9, P)``.
    """
    cells = coords // spacing
    width = int(cells[:, 1].max()) + 3
    key = (cells[:, 0] + 1) * width + (cells[:, 1] + 1)
    order = np.argsort(key, kind="stable")
    sorted_keys = key[order]
    around = np.array([dy * width + dx for dy in (-1, 0, 1) for dx in (-1, 0, 1)])
    wanted = key[None, :] + around[:, None]
    return order, np.searchsorted(sorted_keys, wanted, "left"), np.searchsorted(sorted_keys, wanted, "right")


def _earlier_neighbours(coords: np.ndarray, spacing: int, cells: tuple[np.ndarray, np.ndarray, np.ndarray],
                        first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
    """Every pair ``(i, j)`` with ``first <= i < last`` and ``j < i`` of peaks nearer than ``spacing``
    in both axes, sorted by ``i``."""
    order, starts, stops = cells
    counts = stops[:, first:last] - starts[:, first:last]
    total = counts.sum(axis=0)
    peaks = np.repeat(np.arange(first, last), total)
    # each peak's candidates, cell after cell, laid out contiguously per peak
    per_cell = counts.T.reshape(-1)
    cell_starts = starts[:, first:last].T.reshape(-1)
    offsets = np.arange(per_cell.sum()) - np.repeat(np.cumsum(per_cell) - per_cell, per_cell)
    others = order[np.repeat(cell_starts, per_cell) + offsets]
    near = (others < peaks) & (np.abs(coords[peaks] - coords[others]).max(axis=1) < spacing)
    return peaks[near], others[near]


def _walk(coords: np.ndarray, spacing: int) -> np.ndarray:
    """Which peaks the walk keeps: ``coords`` in walk order, so an index is a rank, and a peak is
    kept when no earlier neighbour nearer than ``spacing`` was kept (a later one cannot have been,
    yet). The pairs are found a part of the order at a time, at most about :data:`PAIRS_AT_ONCE`."""
    keep = np.ones(coords.shape[0], dtype=bool)
    cells = _cells(coords, spacing)
    held = np.cumsum((cells[2] - cells[1]).sum(axis=0))
    first = 0
    while first < coords.shape[0]:
        before = int(held[first - 1]) if first else 0
        last = max(first + 1, int(np.searchsorted(held, before + PAIRS_AT_ONCE, "right")))
        peaks, others = _earlier_neighbours(coords, spacing, cells, first, last)
        if peaks.size:
            crowded = np.unique(peaks)
            begins = np.searchsorted(peaks, crowded, "left")
            ends = np.searchsorted(peaks, crowded, "right")
            for peak, begin, end in zip(crowded.tolist(), begins.tolist(), ends.tolist(), strict=True):
                keep[peak] = not keep[others[begin:end]].any()
        first = last
    return keep


def spaced_peaks(coords: np.ndarray, values: np.ndarray, shape: tuple[int, int],
                 min_distance: int) -> np.ndarray:
    """``peak_local_max``'s answer from the maxima above its threshold.

    :param coords: int64 ``(P, 2)`` maxima above the threshold, in row-major order (the registry's
        ``local_maxima``), not yet cut at the border.
    :param values: the field's values at ``coords``, in the field's dtype.
    :param shape: the field's shape, for the border.
    :param min_distance: ``peak_local_max``'s ``min_distance`` (at least 1): the border's width and
        the spacing.
    :returns: int64 ``(N, 2)`` peaks in ``peak_local_max``'s order and memory layout.
    """
    if min_distance < 1:
        raise ValueError(f"min_distance must be at least 1, got {min_distance}")
    rows, cols = coords[:, 0], coords[:, 1]
    height, width = shape
    inside = (rows >= min_distance) & (rows < height - min_distance) & (cols >= min_distance) & (
        cols < width - min_distance)
    rows, cols, kept_values = rows[inside], cols[inside], values[inside]
    ranked = np.argsort(-kept_values, kind="stable")
    ordered = np.transpose((rows, cols))[ranked]  # scikit-image's own layout for its ordered list
    if min_distance <= 1 or ordered.shape[0] < 2:
        return ordered
    return np.ascontiguousarray(ordered[_walk(ordered, min_distance)])
