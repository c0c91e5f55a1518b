"""Exact ``k`` nearest neighbours within an optional distance, in torch: the block search of
:mod:`._nearest` asked for ``k`` places instead of one.

PRUNING. For a pass of source blocks, the targets of the blocks nearest at their farthest give
every source an upper bound on its ``k``-th nearest (the ``k``-th smallest of those distances);
with ``max_distance`` the bound is also capped by the (padded) limit, so on a card a tight limit
prunes every target block beyond it before a distance is computed. A block survives if its box
is within that bound (with the rounding margin of :func:`._nearest._bounds`).

NOMINATION AND VERDICT. In a pass every target within the rounding margin of the row's ``k``-th
smallest rounded distance is a candidate (ties at the ``k``-th place included); the candidates are
settled by the contract's arithmetic (:func:`spacr_accel_core.exact.exact_squared`) and ordered by
(distance, index), on the device where it takes float64, else on the host. Neighbours whose
float32 distance exceeds ``max_distance`` are dropped there, before the answer is copied back.

COPIES. Identical targets are searched once; each chosen distinct target then stands for its
first ``k`` copies (a later copy can never make the first ``k``: ``k`` copies before it are as
near and lower), and the copies are ordered by (distance, index) on the host.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from spacr_accel_core.toolkit import distances, distinct_rows, exact_squared

from ._grid import grid_search
from ._nearest import (
    BLOCK,
    _blocked,
    _bounds,
    _float32_fits,
    _lower_bounds,
    _squared,
    _tile_order,
    _upper_bounds,
    sub_passes,
)
from ._runtime import Device, budget, tensor, tiled

if TYPE_CHECKING:
    import torch

__all__ = ["k_nearest", "search_bound"]

_BOUND_SLACK = 2.0 ** -20
"""Relative padding of ``max_distance`` for pruning: far above float32's rounding of a distance."""


def search_bound(max_distance: float | None) -> float:
    """A squared float64 radius holding every target whose float32 distance can be ``<= max_distance``.

    Squared by a product, not ``** 2``: Python's power raises ``OverflowError`` where the square of
    a valid bound (``1e300``) is beyond float64, while the product rounds it to ``inf``, which is
    the right answer (such a bound is above every distance, so it prunes nothing).
    """
    if max_distance is None or math.isinf(max_distance):
        return math.inf
    padded = float(max_distance) * (1.0 + _BOUND_SLACK) + 2.0 ** -140
    return padded * padded


class _KVerdict:
    """Candidate pairs settled per source row: the first ``k`` by (exact distance, index)."""

    def __init__(self, source: np.ndarray, target: np.ndarray, k: int, device: Device) -> None:
        import torch

        n = source.shape[0]
        self.k = k
        self.on_device = device.float64
        where = device.torch if self.on_device else torch.device("cpu")
        self.s64 = tensor(source, where).to(torch.float64)
        self.t64 = tensor(target, where).to(torch.float64)
        self.index = torch.full((n, k), -1, dtype=torch.int64, device=where)
        self.best = torch.full((n, k), math.inf, dtype=torch.float64, device=where)

    def settle(self, row_ids: torch.Tensor, local: torch.Tensor, cols: torch.Tensor) -> None:
        """Decide every row of a pass from its candidate pairs (``local`` row, ``cols`` target)."""
        import torch

        where = self.s64.device
        row_ids, local, cols = row_ids.to(where), local.to(where), cols.to(where)
        count = row_ids.shape[0]
        exact = exact_squared(self.s64, self.t64, row_ids[local], cols)
        # (row, distance, index) order by three stable sorts, least significant key first.
        order = torch.argsort(cols, stable=True)
        order = order[torch.argsort(exact[order], stable=True)]
        order = order[torch.argsort(local[order], stable=True)]
        local, cols, exact = local[order], cols[order], exact[order]
        starts = torch.searchsorted(local, torch.arange(count, device=where))
        rank = torch.arange(local.shape[0], device=where) - starts[local]
        kept = rank < self.k
        index = torch.full((count, self.k), -1, dtype=torch.int64, device=where)
        best = torch.full((count, self.k), math.inf, dtype=torch.float64, device=where)
        index[local[kept], rank[kept]] = cols[kept]
        best[local[kept], rank[kept]] = exact[kept]
        self.index[row_ids] = index
        self.best[row_ids] = best

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """``(indices, squared)`` on the host: ``(N, k)`` int64 and float64, ``-1``/``inf`` missing."""
        return self.index.cpu().numpy(), self.best.cpu().numpy()


def _ceilings(s_blocks: torch.Tensor, t_blocks: torch.Tensor, upper: torch.Tensor, k: int) -> tuple[
        torch.Tensor, torch.Tensor]:
    """``(ceiling, probed)``: per source block an upper bound on every source's ``k``-th nearest
    squared distance (rounded), from the target blocks nearest at their farthest (``probed``)."""
    import torch

    probes = min(upper.shape[1], -(-k // BLOCK))
    probed = torch.topk(upper, probes, dim=1, largest=False).indices
    distance = _squared(s_blocks, t_blocks[probed])  # (G, S, probes, BLOCK)
    flat = distance.flatten(2)
    if flat.shape[2] < k:
        return torch.full((s_blocks.shape[0],), math.inf, dtype=flat.dtype, device=flat.device), probed
    kth = torch.topk(flat, k, dim=2, largest=False).values[:, :, -1]
    return kth.amax(1), probed


def _pass(sources: torch.Tensor, source_ids: torch.Tensor, t_blocks: torch.Tensor, t_ids: torch.Tensor,
          chosen: torch.Tensor, valid: torch.Tensor, margin: tuple[float, float, float], k: int,
          verdict: _KVerdict) -> None:
    """Nominate and settle the sources of a few blocks against their surviving target blocks."""
    import torch

    relative, absolute, limit = margin
    groups, per_block, _dims = sources.shape
    width = chosen.shape[1]
    squared = _squared(sources, t_blocks[chosen])  # (G, S, K, T)
    squared.masked_fill_(~valid[:, None, :, None], math.inf)
    flat = squared.view(groups * per_block, width * BLOCK)
    if flat.shape[1] >= k:
        kth = torch.topk(flat, k, dim=1, largest=False).values[:, -1]
    else:
        kth = torch.full((flat.shape[0],), math.inf, dtype=flat.dtype, device=flat.device)
    # Capped below infinity: the masked entries (inf) are never nominated, with no isfinite pass.
    cap = min(limit * (1.0 + relative) + absolute, float(torch.finfo(flat.dtype).max))
    threshold = torch.clamp(kth * (1.0 + relative) + absolute, max=cap)
    nominated = flat <= threshold[:, None]
    local, position = torch.nonzero(nominated, as_tuple=True)
    block = chosen.reshape(-1)[(local // per_block) * width + position // BLOCK]
    cols = t_ids[block, position % BLOCK]
    verdict.settle(source_ids.reshape(-1), local, cols)


def _blocks(source: np.ndarray, target: np.ndarray, chunk: int, k: int, limit: float, device: Device,
            dtype: torch.dtype, verdict: _KVerdict) -> None:
    """The block search of every source for its ``k`` nearest within the squared ``limit``."""
    import torch

    where = device.torch
    relative, absolute = _bounds(source.shape[1], dtype)
    src, tgt = tensor(source, where).to(dtype), tensor(target, where).to(dtype)
    per_source_block = min(BLOCK, chunk)
    s_blocks, s_ids = _blocked(src, _tile_order(src, per_source_block), per_source_block)
    t_blocks, t_ids = _blocked(tgt, _tile_order(tgt, BLOCK), BLOCK)
    del src, tgt
    s_low, s_high = s_blocks.amin(1), s_blocks.amax(1)
    t_low, t_high = t_blocks.amin(1), t_blocks.amax(1)
    padding = t_blocks.shape[0] * BLOCK - target.shape[0]
    if padding:  # copies of the last point, moved to infinity once the boxes are taken
        t_blocks[-1, BLOCK - padding:] = math.inf
    room = budget(device)
    itemsize = torch.finfo(dtype).bits // 8
    first_tile = max(1, min(chunk // per_source_block, room // max(1, t_blocks.shape[0] * (3 * itemsize + 2))))
    if limit * (1.0 + 2.0 * relative) + 2.0 * absolute > torch.finfo(dtype).max:
        limit = math.inf  # a bound beyond the search's own range prunes nothing
    margin = (relative, absolute, limit)

    def step(start: int, stop: int) -> None:
        bounds = _lower_bounds(s_low[start:stop], s_high[start:stop], t_low, t_high)
        upper = _upper_bounds(s_low[start:stop], s_high[start:stop], t_low, t_high)
        ceiling, probed = _ceilings(s_blocks[start:stop], t_blocks, upper, k)
        ceiling = torch.clamp(ceiling, max=limit)
        keep = bounds <= ceiling[:, None] * (1.0 + 2.0 * relative) + 2.0 * absolute
        keep.scatter_(1, probed, True)
        for picked, chosen, valid in sub_passes(keep, room, per_source_block * BLOCK * (2 * itemsize + 2)):
            _pass(s_blocks[start + picked], s_ids[start + picked], t_blocks, t_ids, chosen, valid, margin, k,
                  verdict)

    tiled(s_blocks.shape[0], first_tile, 1, step, device, "nearest_neighbours")


def _copies(owner: np.ndarray, distinct: int, k: int) -> np.ndarray:
    """``(distinct, k)``: each distinct target's first ``k`` copies (ascending indices), ``-1`` beyond."""
    grouped = np.argsort(owner, kind="stable")
    starts = np.searchsorted(owner[grouped], np.arange(distinct))
    sizes = np.bincount(owner, minlength=distinct)
    slot = np.arange(k)
    where = np.minimum(starts[:, None] + slot[None, :], owner.shape[0] - 1)
    return np.where(slot[None, :] < sizes[:, None], grouped[where], -1)


def _expand(found: np.ndarray, squared: np.ndarray, copies: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct answers turned into the first ``k`` copies by (distance, index)."""
    n = found.shape[0]
    candidates = np.where((found >= 0)[:, :, None], copies[np.maximum(found, 0)], -1).reshape(n, -1)
    near = np.where(candidates >= 0, np.repeat(squared, k, axis=1), np.inf)
    key = np.where(candidates >= 0, candidates, np.iinfo(np.int64).max)
    order = np.argsort(key, axis=1, kind="stable")
    order = np.take_along_axis(order, np.argsort(np.take_along_axis(near, order, axis=1), axis=1,
                                                 kind="stable"), axis=1)[:, :k]
    return np.take_along_axis(candidates, order, axis=1), np.take_along_axis(near, order, axis=1)


def k_nearest(source: np.ndarray, target: np.ndarray, chunk: int, k: int, max_distance: float | None,
              device: Device) -> tuple[np.ndarray, np.ndarray]:
    """Each source's ``k`` nearest targets within ``max_distance``, equal to the NumPy backend's.

    :param source: ``(N, D)`` float32, C-contiguous, finite, N >= 1.
    :param target: ``(M, D)`` float32, C-contiguous, finite, M >= 1.
    :param chunk: at most this many source rows per pass.
    :param k: neighbours per source (1 serves ``max_distance`` with one neighbour).
    :param max_distance: neighbours whose float32 distance exceeds it are ``-1``/``inf``.
    :param device: where to search.
    :returns: int64 and float32 ``(N, k)``, nearest first, equal distances in index order.
    """
    import torch

    targets, sources = distinct_rows(target), distinct_rows(source)
    searched_source = source if sources is None else np.ascontiguousarray(source[sources[0]])
    searched_target = target if targets is None else np.ascontiguousarray(target[targets[0]])
    have = min(k, searched_target.shape[0])
    dtype = torch.float32
    if not _float32_fits(searched_source, searched_target):
        dtype = torch.float64
        if not device.float64:
            device = Device(torch.device("cpu"), True)  # squares beyond float32 on a device without doubles
    limit = search_bound(max_distance)
    gridded = grid_search(searched_source, searched_target, chunk, have, limit) if device.is_cpu else None
    if gridded is None:
        verdict = _KVerdict(searched_source, searched_target, have, device)
        _blocks(searched_source, searched_target, chunk, have, limit, device, dtype, verdict)
        found, squared = verdict.result()
    else:
        found, squared, settled = gridded
        rest = np.flatnonzero(~settled)
        if rest.size:  # the sources the grid could not settle: the block search
            verdict = _KVerdict(np.ascontiguousarray(searched_source[rest]), searched_target, have, device)
            _blocks(np.ascontiguousarray(searched_source[rest]), searched_target, chunk, have, limit, device,
                    dtype, verdict)
            found[rest], squared[rest] = verdict.result()
    if targets is not None:
        keep, owner = targets
        found, squared = _expand(found, squared, _copies(owner, keep.shape[0], k), k)
    if sources is not None:
        found, squared = found[sources[1]], squared[sources[1]]
    return _finish(found, squared, k, max_distance)


def _finish(found: np.ndarray, squared: np.ndarray, k: int,
            max_distance: float | None) -> tuple[np.ndarray, np.ndarray]:
    """``(N, k)`` int64 and float32: padded with ``-1``/``inf``, neighbours beyond ``max_distance``
    (compared on the float32 distance, in float64) made ``-1``/``inf``."""
    n, have = found.shape
    index = np.full((n, k), -1, dtype=np.int64)
    index[:, :have] = found
    near = np.full((n, k), np.inf, dtype=np.float32)
    near[:, :have] = distances(squared)
    missing = index < 0
    if max_distance is not None:
        missing |= near.astype(np.float64) > max_distance
    index[missing] = -1
    near[missing] = np.inf
    return index, near
