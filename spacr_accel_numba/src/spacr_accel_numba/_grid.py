"""Exact nearest neighbours of cell centroids on a uniform grid (a cell list), for 1 to 3 coordinates.

WHY A GRID. spaCR's centroids cover a field about evenly; a grid of ~2 targets per cell answers
a source from its own ring of cells (9 in 2-D, 27 in 3-D, fewer after skipping those already
farther than the best), with no tree to walk. Built by one counting sort, it answered 100,000 x
100,000 in 2-D in about half pykdtree's time, exactly (``benchmarks/bench_peers.py``).

WHERE IT DECLINES (the next backend, the NumPy floor's KD-tree, answers exactly): more than 3
coordinates, and targets crowded into few cells (tight clusters, many copies of a point), where a
uniform grid degrades and a tree does not. A source the rings cannot settle within
:data:`_MOST_CELLS` cells (far outside the targets) is compared with every target instead, as
long as those comparisons stay within :data:`_BRUTE_PAIRS`.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from spacr_accel_core import BackendDeclined
from spacr_accel_core.tiling import cpu_threads, run_parts

DIMENSIONS = 3
"""Most coordinates the grid takes."""

_PER_CELL = 2.0  # targets per cell: measured best of 1, 2 and 4 in 2-D and 3-D
_CROWD = 64  # a cell holding more than this many targets: the data is clustered, let a tree answer
_MOST_CELLS = 4096  # cells a source may visit before it is settled by brute force instead
_BRUTE_PAIRS = 1 << 26  # comparisons the brute force may make for unsettled sources in one call
_MIN_THREADED = 1 << 14  # sources below which one thread answers
_SLACK = 2.0 ** -40  # relative to the coordinates' magnitude: far above every rounding, far below any distance


def _grid(target: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(low, edge, inverse, cells)`` of a grid over ``target``'s bounding box, ~:data:`_PER_CELL` per cell."""
    count, dims = target.shape
    low = np.zeros(3)
    high = np.zeros(3)
    low[:dims] = target.min(axis=0)
    high[:dims] = target.max(axis=0)
    extent = high - low
    live = [k for k in range(dims) if extent[k] > 0]
    cells = np.ones(3, dtype=np.int64)
    wanted = max(1.0, count / _PER_CELL)
    if live:
        side = float(np.prod(extent[live]) / wanted) ** (1.0 / len(live))
        while True:  # a thin, long cloud must not make the grid far larger than the targets
            for k in live:
                cells[k] = max(1, min(int(np.ceil(extent[k] / side)), count))
            if int(np.prod(cells)) <= 4 * wanted:
                break
            side *= 1.25
    edge = np.ones(3)
    inverse = np.zeros(3)
    for k in live:
        edge[k] = extent[k] / cells[k]
        inverse[k] = cells[k] / extent[k]
    return low, edge, inverse, cells


def search(kernels: ModuleType, source: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each source's exact nearest target (lowest index on ties) and the float64 squared distance.

    :param kernels: the compiled :mod:`._kernels`.
    :param source: float64 ``(N, D)`` C-contiguous, ``1 <= D <= 3``, finite.
    :param target: float64 ``(M, D)`` C-contiguous, ``M >= 1``, finite.
    :raises BackendDeclined: the targets are clustered, or too many sources lie far from them.
    """
    low, edge, inverse, cells = _grid(target)
    starts, order, ordered, crowd = kernels.grid_build(target, low, inverse, cells)
    if crowd > _CROWD:
        raise BackendDeclined(f"the targets crowd {crowd} into one grid cell (clustered or repeated "
                              "points): a tree answers them faster")
    count = source.shape[0]
    found = np.empty(count, dtype=np.int64)
    squared = np.empty(count, dtype=np.float64)
    if count == 0:
        return found, squared
    scale = max(float(np.abs(target).max()), float(np.abs(source).max()), 1e-300)
    threads = 1 if count < _MIN_THREADED else cpu_threads()
    bounds = np.linspace(0, count, threads + 1).astype(np.int64)
    parts = [(source, low, edge, inverse, cells, starts, order, ordered, scale * _SLACK, _MOST_CELLS,
              found, squared, int(bounds[i]), int(bounds[i + 1])) for i in range(threads)]
    unsettled = sum(run_parts(kernels.grid_query, parts))
    if unsettled:
        if unsettled * target.shape[0] > _BRUTE_PAIRS:
            raise BackendDeclined(f"{unsettled} sources lie far from every target: a tree answers them faster")
        kernels.brute_rows(source, target, np.flatnonzero(found < 0), found, squared)
    return found, squared
