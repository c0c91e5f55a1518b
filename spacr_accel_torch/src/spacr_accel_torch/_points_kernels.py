"""The point operations on torch: the pairs found on the device in float64, the verdicts spaCR's.

READ ATTRIBUTION. Which objects are a read's candidates is decided by the float64 sum ``dy * dy +
dx * dx`` against the squared reach, as SciPy's tree decides it point by point: on the device, as
separate multiplications and an addition (eager torch fuses nothing, so each is rounded once, as
SciPy's are). The gaps are NOT computed there: spaCR's gap is ``np.hypot(dy, dx) - radius``, C's
``hypot`` to the last bit, and torch's ``hypot`` (SLEEF's on the CPU, CUDA's on a card) differs
from it in about one pair in 160 (measured over a million), which would change an owner wherever
two gaps tie. So only the candidate pairs come back, and the host takes their gaps with
``np.hypot`` and spaCR's verdict (``toolkit.decide_attribution``). A read with a centre within
rounding of the reach is answered by SciPy's tree itself (``toolkit.attribute_by_tree``), as on
numba.

THE MERGE'S INLIER COUNTS. The same sum against the squared limit, for each point against the
targets its cell of the toolkit's grid lists (every target within the limit's padded reach:
``toolkit.neighbourhoods``), gathered on the device as one padded table; only a flag per point
comes back. A device without float64 (Metal) declines both.

Imported by the hooks of :mod:`._points` at their first call (the plugin imports that module,
and its import stays as cheap as the hooks alone).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from spacr_accel_core import BackendDeclined
from spacr_accel_core.toolkit import Neighbourhoods, attribute_by_tree, decide_attribution, neighbourhoods, padded_reach

from ._runtime import Device, budget, tensor, tiled

if TYPE_CHECKING:
    import torch

__all__ = ["attribute_reads", "count_within"]

_PER_PAIR = 8 * 4
"""Bytes of the device's tiles per (point, fixed point) pair: the differences, the squares, the sum."""


def _float64(device: Device, what: str) -> None:
    if not device.float64:
        raise BackendDeclined(f"{what} compares float64 sums, which {device.torch.type} cannot hold")


def _squared(points: torch.Tensor, fixed_y: torch.Tensor, fixed_x: torch.Tensor) -> torch.Tensor:
    """``fl(dy * dy) + fl(dx * dx)`` of every point of a tile against every fixed point."""
    import torch

    down = torch.sub(fixed_y[None, :], points[:, 0:1])
    across = torch.sub(fixed_x[None, :], points[:, 1:2])
    return torch.add(torch.mul(down, down), torch.mul(across, across))


def attribute_reads(peaks: np.ndarray, centroids: np.ndarray, radius: np.ndarray, footprint: float,
                    tie: float, device: Device) -> tuple[np.ndarray, np.ndarray]:
    """spaCR's owners and flags: the candidate pairs from the device, the gaps and verdict on the host."""
    import torch

    _float64(device, "read attribution")
    reach = float(radius.max()) + float(footprint)
    bound = reach * reach
    largest = max(float(np.abs(peaks).max()), float(np.abs(centroids).max())) + reach
    band = bound * 2.0**-36 + largest * largest * 2.0**-40
    fixed = tensor(np.ascontiguousarray(centroids), device.torch)
    fixed_y, fixed_x = fixed[:, 0].contiguous(), fixed[:, 1].contiguous()
    points = tensor(np.ascontiguousarray(peaks), device.torch)
    rows: list[np.ndarray] = []
    members: list[np.ndarray] = []
    close = np.zeros(peaks.shape[0], dtype=bool)

    def step(start: int, stop: int) -> None:
        squared = _squared(points[start:stop], fixed_y, fixed_x)
        near = torch.nonzero(squared <= bound).cpu().numpy()
        close[start:stop] = (torch.abs(squared - bound) <= band).any(dim=1).cpu().numpy()
        rows.append(near[:, 0].astype(np.int64) + start)
        members.append(near[:, 1].astype(np.int64))

    per_read = max(1, centroids.shape[0] * _PER_PAIR)
    tiled(peaks.shape[0], max(1, budget(device) // per_read), 1, step, device, "attribute_reads")
    row = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    member = np.concatenate(members) if members else np.zeros(0, np.int64)
    gaps = np.hypot(centroids[member, 0] - peaks[row, 0], centroids[member, 1] - peaks[row, 1]) - radius[member]
    owner, ambiguous = decide_attribution(peaks.shape[0], row, member, gaps, footprint, tie)
    deferred = np.flatnonzero(close)
    if deferred.size:
        owner[deferred], ambiguous[deferred] = attribute_by_tree(np.ascontiguousarray(peaks[deferred]), centroids,
                                                                 radius, footprint, tie)
    return owner, ambiguous


def _padded_lists(grid: Neighbourhoods) -> tuple[np.ndarray, np.ndarray]:
    """The grid's lists as a ``(cells + 1, K)`` table, ``K`` the longest list, holes and the extra
    last row (where a point outside the grid looks) at ``inf``: a sum with it is never within a
    finite limit, so one gather per point replaces the walk of its cell's list."""
    counts = np.diff(grid.starts)
    width = max(1, int(counts.max()))
    table_y = np.full((counts.size + 1, width), np.inf)
    table_x = np.full((counts.size + 1, width), np.inf)
    cell = np.repeat(np.arange(counts.size), counts)
    slot = np.arange(grid.near_y.size) - np.repeat(grid.starts[:-1], counts)
    table_y[cell, slot] = grid.near_y
    table_x[cell, slot] = grid.near_x
    return table_y, table_x


def count_within(moved: np.ndarray, target: np.ndarray, limit: float, device: Device) -> np.ndarray:
    """Per set, the points with a target whose float64 sum is within ``limit``: each point's cell of
    the toolkit's grid (the numba backend's placement, so the same targets are compared) gathered
    on the device, ``K`` sums a point instead of ``M``."""
    import torch

    _float64(device, "the inlier count")
    sets, count = moved.shape[:2]
    if math.isinf(limit):
        return np.full(sets, count, dtype=np.int64)
    grid = neighbourhoods(target, padded_reach(limit, float(np.abs(target).max()) + math.sqrt(limit)))
    table_y, table_x = (tensor(table, device.torch) for table in _padded_lists(grid))
    outside = table_y.shape[0] - 1
    flat = moved.reshape(-1, 2)
    inside = np.zeros(flat.shape[0], dtype=bool)

    def step(start: int, stop: int) -> None:
        part = tensor(np.ascontiguousarray(flat[start:stop]), device.torch)
        down = torch.div(torch.sub(part[:, 0], grid.low_y), grid.cell)
        across = torch.div(torch.sub(part[:, 1], grid.low_x), grid.cell)
        held = (down >= -1) & (down < grid.rows + 1) & (across >= -1) & (across < grid.columns + 1)
        here = (torch.floor(down.clamp(-1, grid.rows)) + 1) * (grid.columns + 2) \
            + torch.floor(across.clamp(-1, grid.columns)) + 1
        here = torch.where(held, here.to(torch.int64), outside)
        dy = torch.sub(table_y[here], part[:, 0:1])
        dx = torch.sub(table_x[here], part[:, 1:2])
        squared = torch.add(torch.mul(dy, dy), torch.mul(dx, dx))
        inside[start:stop] = (squared <= limit).any(dim=1).cpu().numpy()

    per_point = 8 * 6 * table_y.shape[1] + 64
    tiled(flat.shape[0], max(1, budget(device) // per_point), 1, step, device, "count_within")
    counts: np.ndarray = np.count_nonzero(inside.reshape(sets, count), axis=1).astype(np.int64)
    return counts
