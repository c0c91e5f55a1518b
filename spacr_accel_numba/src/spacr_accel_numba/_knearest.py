"""Exact ``k`` nearest neighbours within an optional distance on a uniform grid, for 1 to 3 coordinates.

WHY THE GRID AGAIN. The cell list of :mod:`._grid` answers one neighbour from a source's own ring
of cells; ``k`` neighbours need only the ``k``-th best in place of the best as the pruning bound
(:func:`._science_kernels.grid_k_query`). A ``max_distance`` is that bound from the start: a source
whose nearest target is farther than it visits the cells within it and stops, so the half of a
shifted second field that has no partner costs almost nothing.

WHY FAR SOURCES GO TO A TREE. A source many cells outside the targets' bounding box would walk
ring after ring of cells that are all farther than its answer; the floor's KD-tree
(:func:`~spacr_accel_core.toolkit.exact_search`) answers those few exactly, and a source
farther from the box than ``max_distance`` is answered at once, without any search.

WHY THE SOURCES ARE BUCKETED FIRST. Visited in the order given, neighbouring sources of a random
list touch cells far apart; bucketed by the same grid (one counting sort), consecutive sources
read the same cells from cache. Each answer is written straight to its row in the caller's order.

WHAT IT SHARES WITH THE FLOOR. Targets repeated so often that they crowd a cell are searched
again through the floor's :func:`~spacr_accel_core.toolkit.search_distinct` (once per distinct
point), and the answer's float32 form is the floor's :func:`~spacr_accel_core.toolkit.finish`
(through that path; the grid's own answer takes the same steps compiled, in one pass, and the
tests hold the two to the same bits): the same answer bit for bit, whichever ran. Targets crowded
into few cells otherwise (tight clusters) are declined, as :mod:`._grid` declines them: a tree
answers those faster.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from spacr_accel_core import BackendDeclined
from spacr_accel_core.toolkit import cpu_threads, exact_search, finish, padded_bound, run_parts, search_distinct

from ._grid import DIMENSIONS, grid_cells

_log = logging.getLogger(__name__)

_CROWD = 64  # targets in one cell (per two neighbours asked) beyond which the data is clustered
_MOST_CELLS = 4096  # cells a source may visit before it is settled by brute force instead
_SLACK = 2.0 ** -40  # relative to the coordinates' magnitude: far above every rounding, far below any distance
_FAR_CELLS = 8.0
"""Cells beyond the targets' bounding box from which a source goes to the KD-tree: the rings of
cells around a source that far out are mostly empty, and walking them costs more than a tree."""
_BRUTE_PAIRS = 1 << 26  # comparisons the brute force may make for unsettled sources in one call
_MIN_THREADED = 1 << 13  # sources below which one thread answers
_SMALL_PAIRS = 1 << 16  # pairs few enough to compare outright when the grid is crowded


class _Crowded(BackendDeclined):
    """The targets crowd into few cells: repeated points (searched again as distinct ones) or a
    tight cluster (declined)."""


def kernels() -> ModuleType:
    """The compiled loops (imports numba and loads or compiles them on first use)."""
    from . import _science_kernels

    return _science_kernels


def _per_cell(k: int) -> float:
    """Targets per cell: 2 for one neighbour (measured by :mod:`._grid`); about ``k`` for more, so a
    source's ``k`` nearest mostly lie in its own ring of cells."""
    return max(2.0, float(k))


def _call(work: Callable[..., Any], *arguments: Any) -> Any:
    """``work(*arguments)``: two different kernels handed to :func:`run_parts` as one work."""
    return work(*arguments)


def _far_out(edge: np.ndarray, inverse: np.ndarray, dims: int) -> float:
    """The squared distance from the targets' box beyond which a source goes to the KD-tree (see
    :data:`_FAR_CELLS`): ``inf`` for targets that are one point (no axis to measure cells along)."""
    live = inverse[:dims] > 0
    return (_FAR_CELLS * float(edge[:dims][live].max())) ** 2 if live.any() else np.inf


def grid_search(source: np.ndarray, target: np.ndarray, k: int,
                bound: float) -> tuple[np.ndarray, np.ndarray]:
    """The exact first ``min(k, M)`` targets within ``bound`` of every source, by the grid.

    :param source: float32 ``(N, D)``, ``1 <= D <= 3``, finite.
    :param target: float32 ``(M, D)``, ``M >= 1``, finite.
    :param bound: the padded search radius (:func:`~spacr_accel_core.toolkit.padded_bound`).
    :returns: int64 indices and float64 exact squared distances, ``(N, min(k, M))``, ``-1``/``inf``
        where no target lies within ``bound``.
    :raises BackendDeclined: crowded targets, or too many sources far from every target.
    """
    compiled = kernels()
    from . import _kernels

    s64 = np.ascontiguousarray(source, dtype=np.float64)
    t64 = np.ascontiguousarray(target, dtype=np.float64)
    n, m = s64.shape[0], t64.shape[0]
    have = min(k, m)
    low, high, edge, inverse, cells = grid_cells(t64, _per_cell(have))
    limit = bound * bound if np.isfinite(bound) else np.inf
    # WHY ONE COMPILED PASS CHOOSES THE SOURCES. A bounded search is worth having only if the
    # sources beyond the bound cost almost nothing. Chosen in NumPy (a distance to the box, masks,
    # a gather), with the walked ones' answers scattered back and the rest filled after, they took
    # as long as walking the others (100,000 sources, half beyond the bound: 7 ms of 14, and the
    # bounded call 0.63 to 0.86 of the unbounded one from run to run). One pass now chooses and
    # buckets them (:func:`._science_kernels.grid_sources`), and the walk writes each answer in its
    # row. It and the targets' grid are built side by side where the points are enough to pay for
    # the hand-off (20 sources and 30 targets: 187 us a call side by side, 91 one after the other).
    reach = limit * (1.0 + 1e-9)  # the partition's slack over the bound's square: far above its rounding
    far_out = _far_out(edge, inverse, s64.shape[1])
    builds: list[tuple[Any, ...]] = [(_kernels.grid_build, t64, low, inverse, cells),
                                     (compiled.grid_sources, s64, low, high, inverse, cells, reach, far_out)]
    (starts, order, ordered, crowd), (rows, bucketed, elsewhere, largest) = (
        run_parts(_call, builds) if n + m >= _MIN_THREADED else [_call(*build) for build in builds])
    if crowd > _CROWD * max(1, have // 2):
        raise _Crowded(f"the targets crowd {crowd} into one grid cell (clustered or repeated points): "
                       "a tree answers them faster")
    index = np.full((n, have), -1, dtype=np.int64)  # the rows not walked: the tree's, and those with
    best = np.full((n, have), np.inf)  # no neighbour within the bound
    count = rows.shape[0]
    scale = max(-float(low.min()), float(high.max()), largest, 1e-300)
    threads = 1 if count < _MIN_THREADED else cpu_threads()
    edges = np.linspace(0, count, threads + 1).astype(np.int64)
    parts = [(bucketed, rows, low, edge, inverse, cells, starts, order, ordered, scale * _SLACK, _MOST_CELLS,
              limit, m, index, best, int(edges[i]), int(edges[i + 1])) for i in range(threads)]
    unsettled = sum(run_parts(compiled.grid_k_query, parts))
    if unsettled:
        if unsettled * m > _BRUTE_PAIRS:
            raise BackendDeclined(f"{unsettled} sources lie far from every target: a tree answers them faster")
        _settle(compiled, s64, t64, limit, index, best)
    if elsewhere.size:
        index[elsewhere], best[elsewhere] = exact_search(np.ascontiguousarray(source[elsewhere]), target, k, bound)
    return index, best


def _settle(compiled: ModuleType, s64: np.ndarray, t64: np.ndarray, limit: float, index: np.ndarray,
            best: np.ndarray) -> None:
    """Settle the rows the walk left unsettled (``-2``) by comparing them with every target, in place."""
    left = np.flatnonzero(index[:, 0] == -2)
    found = np.empty((left.size, index.shape[1]), dtype=np.int64)
    squared = np.empty((left.size, index.shape[1]), dtype=np.float64)
    compiled.brute_k_rows(np.ascontiguousarray(s64[left]), t64, np.arange(left.size, dtype=np.int64), limit,
                          t64.shape[0], found, squared)
    missing = found >= t64.shape[0]  # places no target within the bound filled
    found[missing] = -1
    squared[missing] = np.inf
    index[left] = found
    best[left] = squared


def k_nearest(source: np.ndarray, target: np.ndarray, k: int,
              max_distance: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each source's ``k`` nearest targets within ``max_distance``, exactly, lowest index among equals.

    :param source: float32 ``(N, D)`` C-contiguous, finite, ``D <= 3`` (as the core hands a plugin).
    :param target: float32 ``(M, D)``, likewise; ``M`` may be below ``k`` or 0.
    :param k: neighbours per source, at least 1.
    :param max_distance: neighbours whose float32 distance exceeds it are ``-1``/``inf``; it also
        prunes the search.
    :returns: int64 ``(N, k)`` and float32 ``(N, k)``, nearest first: the NumPy floor's answer.
    :raises BackendDeclined: more than 3 coordinates, crowded targets, or too many sources far
        from every target (the floor answers those).
    """
    if source.shape[1] > DIMENSIONS:
        raise BackendDeclined(f"the grid takes at most {DIMENSIONS} coordinates, not {source.shape[1]}")
    n, m = source.shape[0], target.shape[0]
    if n == 0 or m == 0:
        return finish(np.full((n, 0), -1, np.int64), np.zeros((n, 0)), k, max_distance)
    bound = padded_bound(max_distance)
    try:
        # Straight to the grid: looking for repeated points first would cost two sorts a call.
        index, squared = grid_search(source, target, k, bound)
    except _Crowded:
        pass
    else:
        return _finish(index, squared, k, max_distance)

    def search(points: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        try:
            return grid_search(points, targets, k, bound)
        except _Crowded:
            if points.shape[0] * targets.shape[0] > _SMALL_PAIRS:
                raise
            return exact_search(points, targets, k, bound)  # a few pairs: compared outright

    return search_distinct(search, source, target, k, max_distance)


def _finish(index: np.ndarray, squared: np.ndarray, k: int,
            max_distance: float | None) -> tuple[np.ndarray, np.ndarray]:
    """The floor's :func:`~spacr_accel_core.toolkit.finish`, bit for bit, in one compiled pass
    (:func:`._science_kernels.finish_places`); the places past ``index``'s columns (fewer targets
    than ``k``) are ``-1``/``inf``."""
    rows, have = index.shape
    limit = np.inf if max_distance is None else float(max_distance)
    out_index = np.empty((rows, have), dtype=np.int64)
    out_found = np.empty((rows, have), dtype=np.float32)
    kernels().finish_places(np.ascontiguousarray(index).ravel(), np.ascontiguousarray(squared).ravel(), limit,
                            out_index.ravel(), out_found.ravel())
    if have == k:
        return out_index, out_found
    wide_index = np.full((rows, k), -1, dtype=np.int64)
    wide_found = np.full((rows, k), np.inf, dtype=np.float32)
    wide_index[:, :have] = out_index
    wide_found[:, :have] = out_found
    return wide_index, wide_found


def warm_job() -> object:
    """Compile (or load) the kernels on inputs of exactly the driver's types: for a warm-up."""
    points = np.arange(12, dtype=np.float32).reshape(4, 3)
    wide = points.astype(np.float64)
    found = np.empty((4, 2), dtype=np.int64)
    # The brute force of sources the walk leaves unsettled runs rarely: compiled here, not then.
    kernels().brute_k_rows(wide, wide, np.arange(4, dtype=np.int64), np.inf, 4, found, np.empty((4, 2)))
    return k_nearest(points, points[::-1].copy(), 2, 5.0)
