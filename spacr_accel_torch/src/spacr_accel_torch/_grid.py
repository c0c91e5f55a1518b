"""The ``k`` nearest of low-dimensional points on the CPU by a uniform grid, exactly, in float64.

WHY. On a CPU the batched block search (:mod:`._knearest`) computes hundreds of distances per
source to keep its passes large. A grid of cells holding about two targets each answers most
sources from the ``3^D`` cells around their own: a few dozen candidates, whose distances are
computed directly by the contract's arithmetic (:func:`spacr_accel_core.exact.exact_squared`),
so no nomination and no margin are needed.

WHEN IT IS EXACT. Every target outside the ``3^D`` block of cells is farther from the source than
the block's nearest wall. A source is answered here only if its ``k``-th distance (or the padded
``max_distance``, if smaller) lies strictly inside that wall, with a relative allowance for the
rounding of the cell arithmetic; every other source (near a sparse region, beside a crowded cell,
with fewer than ``k`` candidates) is left to the block search. A cell is sized to hold ``k / 2 + 2``
targets on average; points crowded into one cell (more than :data:`MOST_PER_CELL` times that, plus
8) send the whole call to the block search.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["MOST_PER_CELL", "SLACK", "WIDEST", "grid_search"]

WIDEST = 3
"""Coordinates a grid serves (3^D cells per source: 27 at D = 3)."""
MOST_PER_CELL = 4
"""A cell holding more than this many times the mean (plus 8) means clustered points, where the
block search's boxes do better."""
_ROWS = 1 << 14
_SLACK = 1e-9
SLACK = 8
"""Candidates asked of ``topk`` beyond ``k``: ties at the ``k``-th place up to this many are settled
here, a row with more is left to the block search."""


class _Grid:
    """Targets sorted by cell, with each cell's first position and count."""

    def __init__(self, target: torch.Tensor, per_cell: float) -> None:
        import torch

        count, dims = target.shape
        self.low = target.amin(0)
        span = target.amax(0) - self.low
        spread = span[span > 0]
        volume = float(torch.prod(spread)) if spread.numel() else 0.0
        self.size = (volume * per_cell / count) ** (1.0 / max(1, spread.numel())) if volume > 0 else 1.0
        self.cells = torch.floor(span / self.size).to(torch.int64) + 1
        self.strides = torch.ones(dims, dtype=torch.int64)
        for axis in range(dims - 2, -1, -1):
            self.strides[axis] = self.strides[axis + 1] * self.cells[axis + 1]
        total = int(torch.prod(self.cells.to(torch.float64)))
        self.usable = 0 < total <= 4 * count + 1024  # an elongated or degenerate set: no grid
        if not self.usable:
            return
        ids = (self.cell_of(target) * self.strides).sum(1)
        self.order = torch.argsort(ids, stable=True)
        sorted_ids = ids[self.order]
        every = torch.arange(total, dtype=torch.int64)
        self.starts = torch.searchsorted(sorted_ids, every)
        self.counts = torch.searchsorted(sorted_ids, every, right=True) - self.starts

    def cell_of(self, points: torch.Tensor) -> torch.Tensor:
        import torch

        position = torch.floor((points - self.low) / self.size).to(torch.int64)
        return torch.minimum(position.clamp(min=0), self.cells - 1)

    def reach(self, points: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
        """Per point the distance to the nearest wall of its ``3^D`` block beyond which targets lie
        (``inf`` along a side with no cell beyond), less a rounding allowance."""
        import torch

        lower = points - (self.low + (cells - 1).to(points.dtype) * self.size)
        upper = (self.low + (cells + 2).to(points.dtype) * self.size) - points
        lower = torch.where(cells - 1 <= 0, math.inf, lower)
        upper = torch.where(cells + 1 >= self.cells - 1, math.inf, upper)
        nearest = torch.minimum(lower, upper).amin(1)
        scale = points.abs().amax(1) + float(self.low.abs().max()) + self.size * float(self.cells.max())
        return nearest - _SLACK * scale


def _candidates(grid: _Grid, cells: torch.Tensor, most: int) -> torch.Tensor:
    """``(n, 3^D * most)`` target positions of the cells around each source's cell, ``-1`` padding."""
    import itertools

    import torch

    dims = cells.shape[1]
    parts = []
    slot = torch.arange(most, dtype=torch.int64)
    for offset in itertools.product((-1, 0, 1), repeat=dims):
        around = cells + torch.tensor(offset, dtype=torch.int64)
        inside = ((around >= 0) & (around < grid.cells)).all(1)
        ids = (around.clamp(min=0) * grid.strides).sum(1).clamp(max=grid.starts.shape[0] - 1)
        count = torch.where(inside, grid.counts[ids], 0)
        position = grid.starts[ids][:, None] + slot[None, :]
        parts.append(torch.where(slot[None, :] < count[:, None], position, -1))
    return torch.cat(parts, dim=1)


def _exact(rows: torch.Tensor, target: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    """The contract's squared distances (:func:`spacr_accel_core.exact.exact_squared`'s arithmetic:
    ``d0*d0``, then ``+= dk*dk`` in coordinate order, float64) of each row to its ``columns``;
    each target coordinate gathered with one ``index_select`` (fancy indexing is several times
    slower on the CPU)."""
    flat = columns.reshape(-1)
    total = None
    for axis in range(rows.shape[1]):
        near = target[:, axis].index_select(0, flat).view(columns.shape)
        step = rows[:, axis:axis + 1] - near
        if total is None:
            total = step * step
        else:
            total += step * step
    assert total is not None  # D >= 1 is guaranteed by the core
    return total


def _first(exact: torch.Tensor, columns: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(chosen, distance, crowded)``: per row the first ``k`` by (distance, column) among
    ``topk``'s ``k + SLACK`` nearest, and the rows whose ties at the ``k``-th place may go beyond
    those (left unsettled)."""
    import torch

    ask = min(exact.shape[1], k + SLACK)
    values, where = torch.topk(exact, ask, dim=1, largest=False, sorted=True)
    near = columns.gather(1, where)
    crowded = (values[:, -1] == values[:, k - 1]) & torch.isfinite(values[:, k - 1]) \
        if ask < exact.shape[1] else torch.zeros(exact.shape[0], dtype=torch.bool)
    order = torch.argsort(near, dim=1, stable=True)
    order = order.gather(1, torch.argsort(values.gather(1, order), dim=1, stable=True))[:, :k]
    return near.gather(1, order), values.gather(1, order), crowded


def grid_search(source: np.ndarray, target: np.ndarray, chunk: int, k: int,
                limit: float) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(found, squared, settled)``: each source's ``k`` nearest by the grid where that is provably
    exact (``settled``), or ``None`` where the points do not suit a grid.

    :param source: ``(N, D)`` float32, finite, ``D <= WIDEST``.
    :param target: ``(M, D)`` float32, finite, distinct rows.
    :param chunk: at most this many source rows per pass.
    :param k: places, at most ``M``.
    :param limit: the squared padded ``max_distance`` (``inf`` for none).
    :returns: ``(N, k)`` int64 positions in ``target`` and float64 exact squared distances
        (``-1``/``inf`` missing), and a boolean ``(N,)`` mask of the rows settled here.
    """
    import torch

    if source.shape[1] > WIDEST or target.shape[0] < 64:
        return None
    t64 = torch.from_numpy(target.astype(np.float64))  # a fresh, writable copy: no read-only warning
    s64 = torch.from_numpy(source.astype(np.float64))
    per_cell = 2.0 + k / 2  # the k-th nearest well inside one cell's width: nearly every source settles here
    grid = _Grid(t64, per_cell)
    if not grid.usable:
        return None
    most = int(grid.counts.max())
    if most > MOST_PER_CELL * per_cell + 8:
        return None
    n = source.shape[0]
    found = np.full((n, k), -1, dtype=np.int64)
    squared = np.full((n, k), np.inf, dtype=np.float64)
    settled = np.zeros(n, dtype=bool)
    big = target.shape[0]
    step = max(1, min(chunk, _ROWS))
    for start in range(0, n, step):
        rows = s64[start:start + step]
        cells = grid.cell_of(rows)
        position = _candidates(grid, cells, most)
        valid = position >= 0
        picked = grid.order.index_select(0, position.clamp(min=0).view(-1)).view(position.shape)
        columns = torch.where(valid, picked, big)
        exact = _exact(rows, t64, columns.clamp(max=big - 1)).masked_fill_(~valid, math.inf)
        chosen, distance, crowded = _first(exact, columns, k)
        bound = torch.clamp(distance[:, -1], max=limit)
        reach = grid.reach(rows, cells)
        ok = (reach > 0) & (bound < reach * reach) & ~crowded
        found[start:start + rows.shape[0]] = torch.where(torch.isinf(distance), -1, chosen).numpy()
        squared[start:start + rows.shape[0]] = distance.numpy()
        settled[start:start + rows.shape[0]] = ok.numpy()
    return found, squared, settled
