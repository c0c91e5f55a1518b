"""The peaks family against a :class:`~._kit.Kit` (CuPy on the card, NumPy in the tests):
``local_maxima`` with only the coordinates copied back from the card, and the window maxima at given
points gathered on the card.

A peak is a pixel equal to its window's maximum (the NaN rule of :func:`._filters_kernels._filter_tile`:
a NaN equals nothing, so it is never a peak) and above the threshold, a float32 compared exactly.
Coordinates are found per tile on the card (``nonzero``), then ordered by field on the host with a
stable sort: rows are already in order within each field.

The window maxima: only ``N`` values per field come back; the stack's fields go to the card in
groups sized to its free memory (:meth:`Kit.budget`), and a group that still runs out is halved and
retried (:func:`._runtime.tiled`). Imported by the hooks of :mod:`._peaks` at their first call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._filters_kernels import _FLOOR_ROWS, _fields, _filter_tile, _tile_rows
from ._kit import Kit
from ._runtime import tiled

__all__ = ["local_maxima", "window_maxima"]


def _peaks(kit: Kit, tiles: Any, inner: slice, window: tuple[int, int, int], threshold: np.float32 | None) -> Any:
    xp = kit.xp
    values = tiles[:, inner]
    peak = values == _filter_tile(kit, tiles, window)[:, inner]
    if threshold is not None:
        peak &= values > xp.float32(threshold)
    return xp.stack(xp.nonzero(peak), axis=1)


def local_maxima(kit: Kit, field: np.ndarray, size: int, threshold: np.float32 | None) -> np.ndarray:
    """The peaks of a field or of every field of a stack: int64 coordinates in row-major order.

    :param kit: the library to run on.
    :param field: non-empty, at least 2-D (never modified).
    :param size: odd window edge, at least 3.
    :param threshold: peaks must exceed it (a float32, so the comparison is exact), or ``None``.
    """
    fields, window, radius = _fields(field, size)
    height = fields.shape[1]
    found: dict[int, np.ndarray] = {}

    def step(start: int, stop: int) -> None:
        lo, hi = max(0, start - radius), min(height, stop + radius)
        tiles = kit.to_device(np.ascontiguousarray(fields[:, lo:hi]))
        where = np.asarray(kit.to_host(_peaks(kit, tiles, slice(start - lo, stop - lo), window, threshold)),
                           dtype=np.int64).reshape(-1, 3)
        where[:, 1] += start
        found[start] = where

    tiled(height, _tile_rows(kit, fields, window), _FLOOR_ROWS, step, kit, "local_maxima")
    every = np.concatenate([found[start] for start in sorted(found)])
    every = every[np.argsort(every[:, 0], kind="stable")]  # field first; rows already in order within it
    lead = field.shape[:-2]
    if not lead:
        return np.ascontiguousarray(every[:, 1:])
    where = np.asarray(np.unravel_index(every[:, 0], lead), dtype=np.int64).T.reshape(-1, len(lead))
    return np.hstack([where, every[:, 1:]]).astype(np.int64, copy=False)


def window_maxima(kit: Kit, stack: np.ndarray, points: np.ndarray, size: int) -> np.ndarray:
    """float32 ``(N, F)``: the window maximum at each point of every field of an ``(F, H, W)`` stack."""
    xp = kit.xp
    count, height, width = stack.shape
    source = np.ascontiguousarray(stack, dtype=np.float32).reshape(count, height * width)
    down, across = min(size // 2, height - 1), min(size // 2, width - 1)
    rows, columns = np.meshgrid(np.arange(-down, down + 1), np.arange(-across, across + 1), indexing="ij")
    ys = np.clip(points[:, 0] + rows.reshape(-1, 1), 0, height - 1)
    xs = np.clip(points[:, 1] + columns.reshape(-1, 1), 0, width - 1)
    index = kit.to_device(ys * width + xs)  # (window pixels, N)
    out = np.empty((count, points.shape[0]), dtype=np.float32)
    fields = max(1, kit.budget() // (4 * (height * width + 2 * int(index.size))))

    def step(start: int, stop: int) -> None:
        gathered = kit.to_device(source[start:stop])[:, index]  # (fields, window pixels, N)
        best = gathered.max(axis=1)
        best = xp.where(xp.isnan(gathered).any(axis=1), xp.float32(np.nan), best) + xp.float32(0.0)
        out[start:stop] = kit.to_host(best)

    tiled(count, fields, 1, step, kit, "window_maxima")
    return np.ascontiguousarray(out.T)
