"""Exact ``k`` nearest neighbours within an optional distance, lowest index among equals: the
machinery the NumPy floor answers with and a compiled backend falls back on (numba's grid sends it
the sources far outside the targets' box and the crowded few), public through
:mod:`spacr_accel_core.toolkit` (:func:`k_nearest`, :func:`exact_search`, :func:`search_distinct`,
:func:`padded_bound`, :func:`finish`, :func:`first_k`) so both answer bit for bit alike without one
backend importing another. The KD-tree is SciPy's, imported on first use: a backend that calls
:func:`exact_search` declares ``scipy`` (the core itself does not need it).

WHY A KD-TREE NOMINATES AND ``exact_squared`` DECIDES. As for one neighbour (the floor's search),
the tree's float64 distances are rounded differently from the contract's sum and its order among
equals is its own; so it only nominates. Asked for ``k + 1`` neighbours, it shows for every source
whether the ``k``-th place is contested: when the ``(k + 1)``-th is within rounding of the ``k``-th
(a lattice, a ring of equidistant cells), every target that close is gathered by a ball query and
the places are settled by the float64 sum of squared differences, then the lower index.

WHY ``max_distance`` IS PADDED. The answer compares the returned float32 distance with the limit;
a float64 distance a hair above the limit may round down to it. The tree is asked for everything
within ``limit (1 + 2**-20)``, far above both roundings, and the exact distances then decide.

WHY DUPLICATES ARE SEARCHED ONCE. Copies of one point tie with each other for every source: 30,000
copies of one centroid would put 30,000 targets in every contested place. The distinct points are
searched instead, and each chosen distinct point gives its first ``k`` copies as candidates (a
copy beyond those can never make the first ``k``: ``k`` copies before it are as near and lower).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import numpy as np

from ._exact import distances, distinct_rows, exact_squared
from ._tiling import cpu_threads

_log = logging.getLogger(__name__)

_BRUTE_PAIRS = 1 << 16  # below this many pairs, exact brute force is the fastest thing
_BLOCK_BYTES = 48 << 20  # working set of one block of the brute force
_KD_SLACK = 1e-9  # relative; float64 KD-tree distances differ from the reference by ~D * 1e-16
_BOUND_SLACK = 2.0 ** -20  # relative: far above float32's rounding of a distance (2**-24)
_BOUND_FLOOR = 2.0 ** -140  # absolute: above float32's smallest subnormal (2**-149), so a limit of 0 admits 0
DEFAULT_CHUNK = 1 << 16
"""Sources answered per pass of the tree: bounds the candidate arrays (``chunk x (k + 1)``)."""


def padded_bound(max_distance: float | None) -> float:
    """A float64 search radius that holds every target whose float32 distance can be ``<= max_distance``.

    :param max_distance: the caller's limit (``None`` or ``inf``: none).
    """
    if max_distance is None or math.isinf(max_distance):
        return math.inf
    return float(max_distance) * (1.0 + _BOUND_SLACK) + _BOUND_FLOOR


def first_k(values: np.ndarray, k: int) -> np.ndarray:
    """Per row, the columns of the ``k`` smallest ``values`` in (value, column) order.

    WHY NOT A STABLE SORT OF THE ROW: ``k`` is small and the rows are long. One partition finds the
    ``k``-th value; every smaller value is in, and of the values equal to it the first columns until
    ``k`` are reached (the tie rule); only those ``k`` are then sorted, stably.

    :param values: ``(R, C)`` with no NaN, ``C >= k >= 1``.
    :returns: int64 ``(R, k)``.
    """
    rows, columns = values.shape
    if k >= columns:
        return np.argsort(values, axis=1, kind="stable").astype(np.int64, copy=False)
    kth = np.partition(values, k - 1, axis=1)[:, k - 1:k]
    less = values < kth
    equal = values == kth
    need = k - np.count_nonzero(less, axis=1)
    take = less | (equal & (np.cumsum(equal, axis=1, dtype=np.int64) <= need[:, None]))
    chosen = np.nonzero(take)[1].reshape(rows, k)
    order = np.argsort(np.take_along_axis(values, chosen, axis=1), axis=1, kind="stable")
    return np.take_along_axis(chosen, order, axis=1).astype(np.int64, copy=False)


def _float32_at_most(limit: float) -> np.float32:
    """The largest float32 not above ``limit``: a float32 ``x`` exceeds ``limit`` exactly when it
    exceeds this, so the answer's distances are compared in float32, with no float64 copy."""
    with np.errstate(over="ignore"):  # a limit beyond float32's range: inf, stepped down below
        nearest = np.float32(limit)
    if float(nearest) > limit:
        nearest = np.nextafter(nearest, np.float32(-np.inf))
    return nearest


def finish(index: np.ndarray, squared: np.ndarray, k: int,
           max_distance: float | None) -> tuple[np.ndarray, np.ndarray]:
    """The answer's form: ``(N, k)`` int64 and float32, ``-1``/``inf`` for missing or too far neighbours.

    WHY ``np.where`` AND NOT MASKED ASSIGNMENTS. A bounded search of a shifted field leaves every
    other row without a neighbour, in random order; writing through such a mask branches at each
    element and was mispredicted at about every other one (100,000 rows: 2.2 ms, 1.0 ms as one
    selection per array).

    :param index: int64 ``(N, h)``, ``h <= k``, ``-1`` where there is no neighbour.
    :param squared: float64 ``(N, h)``, the exact squared distances (``inf`` where ``index`` is -1).
    :param max_distance: the limit on the returned float32 distance, or ``None``.
    """
    rows, have = index.shape
    found = distances(squared)
    dropped = index < 0
    if max_distance is not None:
        # Against the float32 just below the limit, not the limit rounded to float32: NumPy would
        # round a Python float to the nearest float32 (0.1 becomes 0.100000001, and the float32
        # 0.1 would pass a limit of 0.1 it exceeds).
        dropped |= found > _float32_at_most(float(max_distance))
    kept_index = np.where(dropped, np.int64(-1), index).astype(np.int64, copy=False)
    kept_found = np.where(dropped, np.float32(np.inf), found)
    if have == k:
        return kept_index, kept_found
    out_index = np.full((rows, k), -1, dtype=np.int64)
    out_found = np.full((rows, k), np.inf, dtype=np.float32)
    out_index[:, :have] = kept_index
    out_found[:, :have] = kept_found
    return out_index, out_found


def _brute(source: np.ndarray, target: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every pair, exactly, in row blocks; ``(N, min(k, M))`` indices and squared distances."""
    s64 = source.astype(np.float64)
    t64 = target.astype(np.float64)
    n, m = source.shape[0], target.shape[0]
    have = min(k, m)
    rows = max(1, _BLOCK_BYTES // (16 * m))
    index = np.empty((n, have), dtype=np.int64)
    squared = np.empty((n, have), dtype=np.float64)
    for start in range(0, n, rows):
        block = exact_squared(s64[start:start + rows, None, :], t64[None, :, :])
        chosen = first_k(block, have)
        index[start:start + rows] = chosen
        squared[start:start + rows] = np.take_along_axis(block, chosen, axis=1)
    return index, squared


def _settle_dense(s64: np.ndarray, t64: np.ndarray, nominee: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``k`` of each row's nominees by (exact squared distance, index); ``-1`` pads."""
    m = t64.shape[0]
    missing = (nominee < 0) | (nominee >= m)
    cols = np.where(missing, 0, nominee).astype(np.int64)
    squared = exact_squared(s64[:, None, :], t64[cols])
    squared[missing] = np.inf
    cols[missing] = np.iinfo(np.int64).max  # sorts after every real target
    order = np.lexsort((cols, squared), axis=-1)[:, :k]
    chosen = np.take_along_axis(cols, order, axis=1)
    best = np.take_along_axis(squared, order, axis=1)
    chosen[np.isinf(best)] = -1
    return chosen, best


def _settle_ragged(s64: np.ndarray, t64: np.ndarray, rows: np.ndarray, cols: np.ndarray, count: int,
                   k: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``k`` of each row's candidates (flat pairs) by (exact squared distance, index)."""
    squared = exact_squared(s64, t64, rows, cols)
    order = np.lexsort((cols, squared, rows))
    rows, cols, squared = rows[order], cols[order], squared[order]
    starts = np.searchsorted(rows, np.arange(count))
    place = np.arange(rows.size) - starts[rows]
    keep = place < k
    index = np.full((count, k), -1, dtype=np.int64)
    best = np.full((count, k), np.inf, dtype=np.float64)
    index[rows[keep], place[keep]] = cols[keep]
    best[rows[keep], place[keep]] = squared[keep]
    return index, best


def _kdtree(source: np.ndarray, target: np.ndarray, k: int, bound: float,
            chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact first ``min(k, M)`` within ``bound`` (``-1``/``inf`` beyond): ``(N, min(k, M))``."""
    from scipy.spatial import cKDTree  # heavy: imported on first use, never at import time

    s64 = source.astype(np.float64)
    t64 = target.astype(np.float64)
    n, m = source.shape[0], target.shape[0]
    have = min(k, m)
    asked = min(k + 1, m)
    tree = cKDTree(t64, balanced_tree=False, compact_nodes=False)
    index = np.empty((n, have), dtype=np.int64)
    squared = np.empty((n, have), dtype=np.float64)
    workers = cpu_threads()
    for start in range(0, n, chunk):
        part = s64[start:start + chunk]
        found, nominee = tree.query(part, k=list(range(1, asked + 1)), distance_upper_bound=bound,
                                    workers=workers)
        chosen, best = _settle_dense(part, t64, nominee, have)
        if asked > have:
            kth = found[:, have - 1]
            contested = np.flatnonzero(np.isfinite(found[:, have]) & (found[:, have] <= kth * (1 + _KD_SLACK)))
            if contested.size:
                # The (k+1)-th is within rounding of the k-th: gather every target that close.
                radius = np.minimum(kth[contested] * (1 + 2 * _KD_SLACK) + _BOUND_FLOOR, bound)
                lists = tree.query_ball_point(part[contested], radius, workers=workers)
                sizes = np.fromiter((len(found_list) for found_list in lists), dtype=np.int64, count=len(lists))
                rows = np.repeat(np.arange(contested.size), sizes)
                cols = np.concatenate([np.asarray(found_list, dtype=np.int64) for found_list in lists])
                chosen[contested], best[contested] = _settle_ragged(part[contested], t64, rows, cols,
                                                                    contested.size, have)
        index[start:start + chunk] = chosen
        squared[start:start + chunk] = best
    return index, squared


def _copies(owner: np.ndarray, k: int) -> np.ndarray:
    """``(distinct, k)``: the first ``k`` indices (ascending) of each distinct point's copies, -1 padded."""
    order = np.argsort(owner, kind="stable")  # stable: copies in ascending index
    grouped = owner[order]
    starts = np.searchsorted(grouped, np.arange(int(owner.max()) + 1))
    place = np.arange(order.size) - starts[grouped]
    keep = place < k
    copies = np.full((starts.size, k), -1, dtype=np.int64)
    copies[grouped[keep], place[keep]] = order[keep]
    return copies


def exact_search(source: np.ndarray, target: np.ndarray, k: int, bound: float,
                 chunk: int = DEFAULT_CHUNK) -> tuple[np.ndarray, np.ndarray]:
    """The exact first ``min(k, M)`` targets of each source within ``bound``, by brute force (small
    sets) or the KD-tree; no de-duplication (see :func:`search_distinct`).

    :param source: float32 ``(N, D)``, ``N >= 1``, finite.
    :param target: float32 ``(M, D)``, ``M >= 1``, finite.
    :param bound: the padded search radius (:func:`padded_bound`); the brute force ignores it
        (:func:`finish` applies the caller's limit).
    :returns: int64 indices and float64 exact squared distances, ``(N, min(k, M))``; ``-1``/``inf``
        where the tree found nothing within ``bound``.
    """
    if source.shape[0] * target.shape[0] <= _BRUTE_PAIRS:
        return _brute(source, target, k)
    return _kdtree(source, target, k, bound, chunk)


Search = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""An exact search of distinct-enough points: ``(source, target) -> (index, squared)``, each
``(N, min(k, M))``, ``-1``/``inf`` where no target lies within the padded bound."""


def search_distinct(search: Search, source: np.ndarray, target: np.ndarray, k: int,
                    max_distance: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Run ``search`` on the distinct sources and targets, and give every point its answer.

    Identical sources share one answer (searched once); identical targets are searched as their
    lowest-indexed copy, which then stands for its first ``k`` copies (see the module docstring).
    Shared by every CPU search of this kind, so that each only has to be exact on distinct points.

    :param search: the exact search (:data:`Search`) for ``k`` neighbours within the padded bound.
    :param source: float32 ``(N, D)``, ``N >= 1``.
    :param target: float32 ``(M, D)``, ``M >= 1``.
    :param k: neighbours per source.
    :param max_distance: the caller's limit, applied to the float32 distances at the end.
    :returns: the answer's form (:func:`finish`).
    """
    m = target.shape[0]
    small = source.shape[0] * m <= _BRUTE_PAIRS  # brute force: ties cost nothing extra
    sources = None if small else distinct_rows(source)
    targets = None if small else distinct_rows(target)
    if sources is not None:
        source = source[sources[0]]
    if targets is None:
        index, squared = search(source, target)
    else:
        keep, owner = targets
        found, best = search(source, target[keep])
        # Each chosen distinct point stands for its first k copies, all at its distance.
        copies = _copies(owner, k)
        nominee = np.where(found[:, :, None] >= 0, copies[np.maximum(found, 0)], -1).reshape(found.shape[0], -1)
        repeated = np.repeat(best, k, axis=1)
        repeated[nominee < 0] = np.inf
        key = np.where(nominee < 0, np.iinfo(np.int64).max, nominee)
        order = np.lexsort((key, repeated), axis=-1)[:, :min(k, m)]
        index = np.take_along_axis(nominee, order, axis=1)
        squared = np.take_along_axis(repeated, order, axis=1)
    if sources is not None:
        index, squared = index[sources[1]], squared[sources[1]]
    return finish(index, squared, k, max_distance)


def k_nearest(source: np.ndarray, target: np.ndarray, k: int, max_distance: float | None = None,
              chunk: int = DEFAULT_CHUNK) -> tuple[np.ndarray, np.ndarray]:
    """Each source's ``k`` nearest targets, exactly (see the module docstring).

    :param source: float32 ``(N, D)`` C-contiguous, finite (as the core hands a plugin).
    :param target: float32 ``(M, D)``, likewise; ``M`` may be below ``k`` or 0.
    :param k: neighbours per source, at least 1.
    :param max_distance: neighbours whose float32 distance exceeds it are ``-1``/``inf``, and the
        tree does not search beyond it (a source with no target that near costs a few nodes).
    :param chunk: sources per pass of the tree, bounding the candidate arrays.
    :returns: int64 ``(N, k)`` and float32 ``(N, k)``, nearest first, equal distances in index order.
    """
    n, m = source.shape[0], target.shape[0]
    if n == 0 or m == 0:
        return finish(np.full((n, 0), -1, np.int64), np.zeros((n, 0)), k, max_distance)
    bound = padded_bound(max_distance)
    rows = max(1, int(chunk))

    def search(points: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return exact_search(points, targets, k, bound, rows)

    return search_distinct(search, source, target, k, max_distance)
