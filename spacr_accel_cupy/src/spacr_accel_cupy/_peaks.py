"""Stacks and peaks against a :class:`~._kit.Kit`: ``maximum_filter`` of ``(..., H, W)`` in one call,
and ``local_maxima`` with only the coordinates copied back from the card.

Every field of a stack travels in each tile of rows (one transfer in and one out per tile, a
single tile when the stack fits the pass budget); the window is ``(1, size, size)``, so it never
crosses from one field into another. A peak is a pixel equal to its window's maximum (the NaN rule
of :func:`._ops._filter_tile`: a NaN equals nothing, so it is never a peak) and above the threshold,
a float32 compared exactly. Coordinates are found per tile on the card (``nonzero``), then ordered
by field on the host with a stable sort: rows are already in order within each field.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._kit import Kit
from ._ops import _FILTER_BYTES_PER_PIXEL, _FLOOR_ROWS, _filter_tile, tiled

__all__ = ["local_maxima", "maximum_filter_stack"]

_F32 = np.dtype(np.float32)


def _fields(field: np.ndarray, size: int) -> tuple[np.ndarray, tuple[int, int, int], int]:
    """``(fields, window, radius)``: the stack as float32 ``(F, H, W)``, the window of each axis
    capped by that axis's own length (the answer is the same), and the halo of a tile of rows."""
    fields = np.ascontiguousarray(field, dtype=_F32).reshape(-1, *field.shape[-2:])
    height, width = fields.shape[1:]
    radius = min(size // 2, height - 1)
    return fields, (1, 2 * radius + 1, 2 * min(size // 2, width - 1) + 1), radius


def _tile_rows(kit: Kit, fields: np.ndarray, window: tuple[int, int, int]) -> int:
    count, _height, width = fields.shape
    return max(1, kit.budget() // (_FILTER_BYTES_PER_PIXEL * int(width) * int(count)) - (window[1] - 1))


def maximum_filter_stack(kit: Kit, field: np.ndarray, size: int) -> np.ndarray:
    """The window maximum of every 2-D field of ``(..., H, W)``, edges repeated, NaN winning.

    :param kit: the library to run on.
    :param field: non-empty, at least 2-D (never modified).
    :param size: odd window edge, at least 3.
    :returns: a new float32 array of the stack's shape.
    """
    fields, window, radius = _fields(field, size)
    height = fields.shape[1]
    out = np.empty(fields.shape, dtype=_F32)

    def step(start: int, stop: int) -> None:
        lo, hi = max(0, start - radius), min(height, stop + radius)
        filtered = _filter_tile(kit, kit.to_device(np.ascontiguousarray(fields[:, lo:hi])), window)
        out[:, start:stop] = kit.to_host(filtered[:, start - lo:stop - lo])

    tiled(height, _tile_rows(kit, fields, window), _FLOOR_ROWS, step, kit, "maximum_filter")
    return out.reshape(field.shape)


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
