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
therefore taken only over the peaks that have a neighbour nearer than ``d``, found by binning the
peaks into ``d``-square cells; every other peak is kept as the walk would keep it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CROWDED", "high_order_statistics", "spaced_peaks"]

CROWDED = 1 << 21
"""The most neighbouring pairs (peaks nearer than the spacing, across adjacent cells) the walk
examines; a field with more (a large flat plateau above the threshold) is answered as ``None``."""


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


def _near_pairs(coords: np.ndarray, spacing: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Every pair ``(i, j)``, ``i != j``, of peaks nearer than ``spacing`` in both axes, each pair once
    in each direction, or ``None`` past :data:`CROWDED` candidate pairs."""
    cells = coords // spacing
    width = int(cells[:, 1].max()) + 3
    key = (cells[:, 0] + 1) * width + (cells[:, 1] + 1)
    order = np.argsort(key, kind="stable")
    sorted_keys = key[order]
    firsts, seconds = [], []
    total = 0
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            wanted = key + dy * width + dx
            start = np.searchsorted(sorted_keys, wanted, "left")
            stop = np.searchsorted(sorted_keys, wanted, "right")
            counts = stop - start
            total += int(counts.sum())
            if total > CROWDED:
                return None
            if not counts.any():
                continue
            first = np.repeat(np.arange(coords.shape[0]), counts)
            offsets = np.arange(first.size) - np.repeat(np.cumsum(counts) - counts, counts)
            second = order[np.repeat(start, counts) + offsets]
            firsts.append(first)
            seconds.append(second)
    first = np.concatenate(firsts)
    second = np.concatenate(seconds)
    gap = np.abs(coords[first] - coords[second]).max(axis=1)
    near = (gap < spacing) & (first != second)
    return first[near], second[near]


def spaced_peaks(coords: np.ndarray, values: np.ndarray, shape: tuple[int, int],
                 min_distance: int) -> np.ndarray | None:
    """``peak_local_max``'s answer from the maxima above its threshold.

    :param coords: int64 ``(P, 2)`` maxima above the threshold, in row-major order (the registry's
        ``local_maxima``), not yet cut at the border.
    :param values: the field's values at ``coords``, in the field's dtype.
    :param shape: the field's shape, for the border.
    :param min_distance: ``peak_local_max``'s ``min_distance`` (at least 1): the border's width and
        the spacing.
    :returns: int64 ``(N, 2)`` peaks in ``peak_local_max``'s order and memory layout, or ``None``
        when more than :data:`CROWDED` neighbouring pairs would have to be walked.
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
    if min_distance <= 1 or ordered.shape[0] == 0:
        return ordered
    pairs = _near_pairs(ordered, min_distance) if ordered.shape[0] > 1 else (np.zeros(0, np.intp),) * 2
    if pairs is None:
        return None
    first, second = pairs
    keep = np.ones(ordered.shape[0], dtype=bool)
    if first.size:
        # ``ordered`` is in walk order, so an index is a rank: a crowded peak is kept when no
        # neighbour before it was kept (one after it cannot have been, yet).
        by_first = np.argsort(first, kind="stable")
        first, second = first[by_first], second[by_first]
        crowded = np.unique(first)
        starts = np.searchsorted(first, crowded, "left")
        stops = np.searchsorted(first, crowded, "right")
        for peak, start, stop in zip(crowded.tolist(), starts.tolist(), stops.tolist(), strict=True):
            neighbours = second[start:stop]
            keep[peak] = not keep[neighbours[neighbours < peak]].any()
    return np.ascontiguousarray(ordered[keep])
