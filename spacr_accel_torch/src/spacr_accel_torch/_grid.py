"""The ``k`` nearest of low-dimensional points on the CPU by a uniform grid, exactly, in float64.

WHY. On a CPU the batched block search (:mod:`._knearest`) computes hundreds of distances per
source to keep its passes large. A grid of cells holding a few targets each answers most sources
from the block of cells around their own: a few dozen candidates, whose distances are computed
directly by the contract's arithmetic (:func:`spacr_accel_core.exact.exact_squared`), so no
nomination and no margin are needed.

THE CELLS. A square (cube) of side ``s`` would hold ``k / 4 + 1.25`` targets on average; cells are
that side along every coordinate but the last, and ``s / FINE`` along the last. A source's block
of radius ``r`` reaches ``r`` cells along the first coordinates and ``FINE r`` along the last, so it
reaches at least ``r s`` beyond the source's own cell either way.

HOW, WITH LITTLE PADDING. The targets are sorted by cell (cells numbered along the last
coordinate fastest), so the cells of a block that share every coordinate but the last are ONE run
of consecutive sorted targets: ``(2r + 1)^(D - 1)`` runs per source (3 in 2-D). The sources are
ordered by their longest run (then by cell, for the caches), and each pass reads every run of its
sources as long as its longest: a dense ``(rows, runs x span)`` block with little padding.

WHEN IT IS EXACT. Every target outside a source's block is farther from it than the block's
nearest wall. A source is answered here only if its ``k``-th distance (or the padded
``max_distance``, if smaller) lies strictly inside that wall, with a relative allowance for the
rounding of the cell arithmetic; a source not settled by its block of radius 1 is tried again with
the blocks of :data:`RADII`, and every source none settles (near a sparse region, beside a crowded
cell, with more ties than :data:`SLACK`) is left to the block search. Points crowded into one cell
(more than :data:`MOST_PER_CELL` times ``k / 4 + 1.25``, plus 8) send the whole call to the block
search.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["FINE", "MOST_PER_CELL", "RADII", "SLACK", "WIDEST", "grid_search"]

WIDEST = 3
"""Coordinates a grid serves (a block of 3 x 3 x 5 cells per source at D = 3)."""
MOST_PER_CELL = 4
"""A cell holding more than this many times the mean (plus 8) means clustered points, where the
block search's boxes do better."""
RADII = (1, 2, 3)
"""Blocks of radius ``r`` tried in turn, each for the sources the smaller left unsettled."""
FINE = 2
"""Cells are this many times narrower along the last coordinate, and a block reaches this many
times as many of them along it (``2 FINE r + 1``): the same reach with a run of ``2.5 s`` where
square cells read ``3 s``, so fewer candidates per settled row (measured about a third faster)."""
_ELEMENTS = 1 << 18
"""Candidate pairs per pass (about 15 MB of gathered points and distances; measured a little
faster than twice as many, whose passes spill further out of the caches)."""
_SLACK = 1e-9
SLACK = 8
"""Candidates asked of ``topk`` beyond ``k``: ties at the ``k``-th place up to this many are settled
here, a row with more is left to the block search."""


class _Grid:
    """Targets sorted by cell (one contiguous ``planes`` tensor per coordinate, their positions
    ``order``), each cell's first position."""

    def __init__(self, target: torch.Tensor, per_cell: float) -> None:
        import torch

        count, dims = target.shape
        self.low = target.amin(0)
        span = target.amax(0) - self.low
        spread = span[span > 0]
        volume = float(torch.prod(spread)) if spread.numel() else 0.0
        side = (volume * per_cell / count) ** (1.0 / max(1, spread.numel())) if volume > 0 else 1.0
        self.size = torch.full((dims,), side, dtype=torch.float64)
        self.size[-1] = side / FINE
        self.cells = torch.floor(span / self.size).to(torch.int64) + 1
        self.strides = torch.ones(dims, dtype=torch.int64)
        for axis in range(dims - 2, -1, -1):
            self.strides[axis] = self.strides[axis + 1] * self.cells[axis + 1]
        self.total = int(torch.prod(self.cells.to(torch.float64)))
        self.usable = 0 < self.total <= 4 * count + 1024  # an elongated or degenerate set: no grid
        if not self.usable:
            return
        ids = self.ids(self.cell_of(target))
        order = torch.argsort(ids, stable=True)  # within a cell, ascending target index
        # One sentinel past the last target, at infinity along every coordinate: a padded slot reads
        # it, so its distance is ``inf`` by the arithmetic itself (no mask pass over the distances).
        self.order = torch.cat([order, order.new_zeros(1)])
        self.planes = [torch.cat([target[:, axis].index_select(0, order), target.new_full((1,), math.inf)])
                       for axis in range(dims)]
        self.starts = torch.zeros(self.total + 1, dtype=torch.int64)  # targets in the cells before each
        torch.cumsum(torch.bincount(ids, minlength=self.total), 0, out=self.starts[1:])
        self.most = int((self.starts[1:] - self.starts[:-1]).max())

    def cell_of(self, points: torch.Tensor) -> torch.Tensor:
        import torch

        position = torch.floor((points - self.low) / self.size).to(torch.int64)
        return torch.minimum(position.clamp(min=0), self.cells - 1)

    def ids(self, cells: torch.Tensor) -> torch.Tensor:
        return (cells * self.strides).sum(1)

    def runs(self, cells: torch.Tensor, radius: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(first, length)``, each ``(n, (2 radius + 1)^(D - 1))``: the runs of sorted targets
        whose cells lie within ``radius`` cells of each source's cell (empty beyond the grid)."""
        import torch

        head, last = cells[:, :-1], cells[:, -1]
        lowest = (last - FINE * radius).clamp(min=0)
        highest = torch.clamp(last + FINE * radius, max=int(self.cells[-1]) - 1)
        firsts, lengths = [], []
        for offset in itertools.product(range(-radius, radius + 1), repeat=cells.shape[1] - 1):
            row = head + torch.tensor(offset, dtype=torch.int64)
            inside = ((row >= 0) & (row < self.cells[:-1])).all(1)
            base = (torch.minimum(row.clamp(min=0), self.cells[:-1] - 1) * self.strides[:-1]).sum(1)
            first = self.starts.index_select(0, base + lowest)
            firsts.append(torch.where(inside, first, 0))
            lengths.append(torch.where(inside, self.starts.index_select(0, base + highest + 1) - first, 0))
        return torch.stack(firsts, 1), torch.stack(lengths, 1)

    def reach(self, points: torch.Tensor, cells: torch.Tensor, radius: int) -> torch.Tensor:
        """Per point the distance to the nearest wall of its block of cells beyond which targets lie
        (``inf`` along a side with no cell beyond), less a rounding allowance."""
        import torch

        across = torch.full((cells.shape[1],), radius, dtype=torch.int64)
        across[-1] = FINE * radius
        below, above = cells - across, cells + across
        lower = points - (self.low + below.to(points.dtype) * self.size)
        upper = (self.low + (above + 1).to(points.dtype) * self.size) - points
        lower.masked_fill_(below <= 0, math.inf)
        upper.masked_fill_(above >= self.cells - 1, math.inf)
        # Minima and maxima across the few coordinates pairwise: exact, and cheaper than a
        # reduction along a dimension of two or three.
        nearest = functools.reduce(torch.minimum, torch.minimum(lower, upper).unbind(1))
        scale = functools.reduce(torch.maximum, points.abs().unbind(1)) + float(self.low.abs().max()) \
            + float((self.size * self.cells).max())
        return nearest - _SLACK * scale


def _exact(rows: torch.Tensor, axes: list[torch.Tensor]) -> torch.Tensor:
    """The contract's squared distances (:func:`spacr_accel_core.exact.exact_squared`'s arithmetic:
    ``d0*d0``, then ``+= dk*dk`` in coordinate order, float64) of each row to its gathered points,
    given one ``(n, w)`` tensor per coordinate (contiguous: every step one vectorised pass), which
    it overwrites: ``(target - source)^2`` is ``(source - target)^2`` bit for bit (a negation is
    exact), so no pass allocates."""
    total = axes[0].sub_(rows[:, :1])
    total.mul_(total)
    for axis in range(1, rows.shape[1]):
        step = axes[axis].sub_(rows[:, axis:axis + 1])
        step.mul_(step)
        total.add_(step)
    return total


def _first(exact: torch.Tensor, columns: Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor],
           k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(chosen, distance, crowded)``: per row the first ``k`` by (distance, column) among
    ``topk``'s nearest (``columns(where, rows)`` gives the target index of entries ``where`` of the
    ``rows``, all rows for ``None``), and the rows whose ties at the ``k``-th place may go beyond
    those (left unsettled). ``topk`` is asked for ``k + 1``, and again for ``k + SLACK`` by the rows
    whose ``k + 1``-th ties with their ``k``-th. Only the rows with two equal finite distances are
    ordered by index (two stable sorts); ``topk`` ordered the rest."""
    import torch

    values, where = _nearest_of(exact, k + 1)
    crowded = torch.zeros(exact.shape[0], dtype=torch.bool)
    again = torch.nonzero(values[:, k] == values[:, k - 1], as_tuple=True)[0] if values.shape[1] > k else None
    values, where = values[:, :k], where[:, :k]
    near = columns(where, None)
    values, near = _by_index(values, near)
    if again is not None and again.numel():
        more, at = _nearest_of(exact.index_select(0, again), k + SLACK)
        if more.shape[1] < exact.shape[1]:
            crowded[again] = (more[:, -1] == more[:, k - 1]) & torch.isfinite(more[:, k - 1])
        more, them = _by_index(more, columns(at, again))
        values[again], near[again] = more[:, :k], them[:, :k]
    return near, values, crowded


def _by_index(values: torch.Tensor, near: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows sorted by distance ordered by (distance, index): only the rows with two equal finite
    distances are sorted again."""
    import torch

    tied = torch.nonzero(((values[:, 1:] == values[:, :-1]) & torch.isfinite(values[:, 1:])).any(1),
                         as_tuple=True)[0]
    if tied.numel():
        some, them = values[tied], near[tied]
        order = torch.argsort(them, dim=1, stable=True)
        order = order.gather(1, torch.argsort(some.gather(1, order), dim=1, stable=True))
        values[tied], near[tied] = some.gather(1, order), them.gather(1, order)
    return values, near


def _nearest_of(exact: torch.Tensor, ask: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``topk``'s ``ask`` smallest per row (the whole row where it is narrower), nearest first."""
    import torch

    return torch.topk(exact, min(exact.shape[1], ask), dim=1, largest=False, sorted=True)


def _pass(grid: _Grid, rows: torch.Tensor, runs: tuple[torch.Tensor, torch.Tensor],
          k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(found, squared, crowded)`` of a few sources from the ``runs`` (first position, length)
    of their block of cells, each run read as its pass's longest run of targets (``crowded``: the
    rows whose ties at the ``k``-th place may reach beyond the candidates)."""
    import torch

    first, length = runs
    n, count = first.shape
    span = max(-(-k // count), int(length.max()))
    slot = torch.arange(span, dtype=torch.int64)
    sentinel = grid.order.shape[0] - 1  # a slot beyond its run reads the target at infinity
    position = torch.where(slot < length[:, :, None], first[:, :, None] + slot, sentinel).view(n, -1)
    flat = position.view(-1)
    exact = _exact(rows, [plane.index_select(0, flat).view(position.shape) for plane in grid.planes])

    def columns(where: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        at = (position if rows is None else position.index_select(0, rows)).gather(1, where)
        return grid.order.index_select(0, at.view(-1)).view(at.shape)

    chosen, distance, crowded = _first(exact, columns, k)
    return torch.where(torch.isinf(distance), -1, chosen), distance, crowded


def _in_blocks(grid: _Grid, points: torch.Tensor, cells: torch.Tensor, pending: torch.Tensor, radius: int,
               k: int, limit: float, chunk: int, out: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Search the ``pending`` sources in their blocks of ``radius``, shortest longest run first
    (then by cell: each pass is dense and gathers nearby targets), into ``out``; returns the
    sources left unsettled."""
    import torch

    mine = cells.index_select(0, pending)
    first, length = grid.runs(mine, radius)
    longest = length.amax(1)
    order = torch.argsort(longest * (grid.total + 1) + grid.ids(mine))
    pending, first, length, longest, mine = (part.index_select(0, order)
                                             for part in (pending, first, length, longest, mine))
    rows = points.index_select(0, pending)
    total, start, answers = pending.shape[0], 0, []
    while start < total:
        widest = int(longest[min(total, start + chunk) - 1]) * first.shape[1]
        stop = min(total, start + max(1, min(chunk, _ELEMENTS // max(k, widest))))
        answers.append(_pass(grid, rows[start:stop], (first[start:stop], length[start:stop]), k))
        start = stop
    found, squared, crowded = (torch.cat(part) for part in zip(*answers, strict=True))
    reach = grid.reach(rows, mine, radius)  # once for the whole radius: a few vectorised passes
    settled = (reach > 0) & (torch.clamp(squared[:, -1], max=limit) < reach * reach) & ~crowded
    for whole, part in zip(out, (found, squared, settled), strict=True):
        whole.index_copy_(0, pending, part)
    return pending[~settled]


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
    per_cell = 1.25 + k / 4  # the k-th nearest within about s: most sources settle in their first block
    grid = _Grid(torch.from_numpy(target.astype(np.float64)), per_cell)  # a fresh, writable copy
    if not grid.usable or grid.most > MOST_PER_CELL * per_cell + 8:
        return None
    points = torch.from_numpy(source.astype(np.float64))
    n = source.shape[0]
    out = (torch.full((n, k), -1, dtype=torch.int64), torch.full((n, k), math.inf, dtype=torch.float64),
           torch.zeros(n, dtype=torch.bool))
    cells = grid.cell_of(points)
    pending = torch.arange(n)
    for radius in RADII:
        pending = _in_blocks(grid, points, cells, pending, radius, k, limit, chunk, out)
        if not pending.numel():
            break
    return out[0].numpy(), out[1].numpy(), out[2].numpy()
