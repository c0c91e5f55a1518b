"""Exact nearest neighbours of cell centroids on a uniform grid (a cell list), for 1 to 3 coordinates.

WHY A GRID. spaCR's centroids cover a field about evenly; a grid of ~2 targets per cell answers
a source from its own ring of cells (9 in 2-D, 27 in 3-D, fewer after skipping those already
farther than the best), with no tree to walk. Built by one counting sort, it answered 100,000 x
100,000 in 2-D in about half pykdtree's time, exactly (``benchmarks/bench_peers.py``).

SOURCES FAR AWAY, OR IN AN EMPTY HOLE. A source's walk starts at the ring of the nearest cell
that holds a target, leaps along each ring over empty stretches, and stops once every cell beyond
its rings is provably farther than its best: a bound that counts the distance from the source to
the targets' bounding box, so a source far outside stops after a few rings instead of crossing
the grid (:func:`._kernels.grid_query`; ``benchmarks/bench_numba_edges.py`` measures both against
the floor). Each empty cell's distance to the nearest cell holding a target comes from one
chamfer pass over the grid (:func:`._kernels.grid_empty`).

WHERE IT DECLINES (the next backend, the NumPy floor's KD-tree, answers exactly): more than 3
coordinates, and targets crowded into few cells (tight clusters, many copies of a point), where a
uniform grid degrades and a tree does not. A source whose walk looks at more than
:data:`_STEPS` cells (so far away that rounding hides the rings' progress) is compared with every
target instead, as long as those comparisons stay within :data:`_BRUTE_PAIRS`.
"""

from __future__ import annotations

from types import ModuleType
from typing import NamedTuple

import numpy as np

from spacr_accel_core import BackendDeclined
from spacr_accel_core.toolkit import cpu_threads, run_parts

DIMENSIONS = 3
"""Most coordinates the grid takes."""

_PER_CELL = 2.0  # targets per cell: measured best of 1, 2 and 4 in 2-D and 3-D
_CROWD = 64  # a cell holding more than this many targets: the data is clustered, let a tree answer
_STEPS = 1 << 14  # cells a source's walk may look at before the brute force settles it instead
_BRUTE_PAIRS = 1 << 26  # comparisons the brute force may make for unsettled sources in one call
_MIN_THREADED = 1 << 14  # sources below which one thread answers
_MIN_THREADED_LEFT = 64  # the same for the sources left to the brute force (each costs far more)
_SLACK = 2.0 ** -40  # relative to the coordinates' magnitude: far above every rounding, far below any distance


class _Grid(NamedTuple):
    """One grid over the targets' bounding box ``[low, high]`` (3 axes; unused ones are one cell)."""

    low: np.ndarray
    high: np.ndarray
    edge: np.ndarray
    inverse: np.ndarray
    cells: np.ndarray


def grid_cells(target: np.ndarray, per_cell: float) -> _Grid:
    """A grid over ``target``'s bounding box ``[low, high]`` with about ``per_cell`` targets per cell
    (the one sizing both searches use: one neighbour here, ``k`` in :mod:`._knearest`)."""
    count, dims = target.shape
    low = np.zeros(3)
    high = np.zeros(3)
    for axis in range(dims):  # column by column: NumPy's min(axis=0) of (N, 2) is ~20x slower
        low[axis] = target[:, axis].min()
        high[axis] = target[:, axis].max()
    extent = high - low
    live = [axis for axis in range(dims) if extent[axis] > 0]
    cells = np.ones(3, dtype=np.int64)
    wanted = max(1.0, count / per_cell)
    if live:
        side = float(np.prod(extent[live]) / wanted) ** (1.0 / len(live))
        while True:  # a thin, long cloud must not make the grid far larger than the targets
            for axis in live:
                cells[axis] = max(1, min(int(np.ceil(extent[axis] / side)), count))
            if int(np.prod(cells)) <= 4 * wanted:
                break
            side *= 1.25
    edge = np.ones(3)
    inverse = np.zeros(3)
    for axis in live:
        edge[axis] = extent[axis] / cells[axis]
        inverse[axis] = cells[axis] / extent[axis]
    return _Grid(low, high, edge, inverse, cells)


def search(kernels: ModuleType, source: np.ndarray, target: np.ndarray,
           budget: int = _STEPS) -> tuple[np.ndarray, np.ndarray]:
    """Each source's exact nearest target (lowest index on ties) and the float64 squared distance.

    :param kernels: the compiled :mod:`._kernels`.
    :param source: float64 ``(N, D)`` C-contiguous, ``1 <= D <= 3``, finite.
    :param target: float64 ``(M, D)`` C-contiguous, ``M >= 1``, finite.
    :param budget: cells a source's walk may look at before the brute force settles it
        (:data:`_STEPS`; the tests pass 0 to send every source there).
    :raises BackendDeclined: the targets are clustered, or too many sources lie far from them.
    """
    # numba compiles read-only arrays as other types, and no call may compile (it would wait
    # seconds, and for numba's compiler lock): a read-only input is copied.
    source = source if source.flags.writeable else source.copy()
    target = target if target.flags.writeable else target.copy()
    grid = grid_cells(target, _PER_CELL)
    starts, order, ordered, crowd = kernels.grid_build(target, grid.low, grid.inverse, grid.cells)
    if crowd > _CROWD:
        raise BackendDeclined(f"the targets crowd {crowd} into one grid cell (clustered or repeated "
                              "points): a tree answers them faster")
    count = source.shape[0]
    found = np.empty(count, dtype=np.int64)
    squared = np.empty(count, dtype=np.float64)
    if count == 0:
        return found, squared
    empty = kernels.grid_empty(starts, grid.cells)
    scale = max(float(np.abs(target).max()), float(np.abs(source).max()), 1e-300)
    threads = 1 if count < _MIN_THREADED else cpu_threads()
    bounds = np.linspace(0, count, threads + 1).astype(np.int64)
    parts = [(source, int(bounds[i]), int(bounds[i + 1]), grid.low, grid.high, grid.edge, grid.inverse, grid.cells,
              starts, order, ordered, empty, scale * _SLACK, budget, found, squared) for i in range(threads)]
    if sum(run_parts(kernels.grid_query, parts)):
        left = np.flatnonzero(found < 0)
        if left.size * target.shape[0] > _BRUTE_PAIRS:
            raise BackendDeclined(f"{left.size} sources lie far from every target: a tree answers them faster")
        threads = 1 if left.size < _MIN_THREADED_LEFT else cpu_threads()
        bounds = np.linspace(0, left.size, threads + 1).astype(np.int64)
        run_parts(kernels.brute_rows, [(source, target, left[bounds[i]:bounds[i + 1]], found, squared)
                                       for i in range(threads)])
    return found, squared
