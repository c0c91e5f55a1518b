"""Stacks of fields ``(..., H, W)`` in one call: spaCR's 11 cycles x 4 channels of a sequencing field.

ON A CARD every field of the stack travels in one tile of rows (a batch of ``max_pool2d`` windows,
one transfer in and one out per tile, a single tile when the stack fits the pass budget); for
``local_maxima`` only the coordinates come back. Windows never cross from one field into another:
each field is one image of the batch. ON THE CPU the fields are filtered one after another by the
cache-sized stripes of :mod:`._ops`, in the same call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._ops import _capped, _filter_in_stripes, _peaks, local_maxima, maximum_filter
from ._runtime import Device, budget, tensor, tiled

if TYPE_CHECKING:
    import torch

__all__ = ["local_maxima_stack", "maximum_filter_stack"]

_F32 = np.dtype(np.float32)
_GPU_BYTES_PER_PIXEL = 4 * 6
"""A tile holds its input rows, two pooled copies and (with NaN) two mask copies."""
_FLOOR_ROWS = 8


def _pool(tiles: torch.Tensor, sizes: tuple[int, int]) -> torch.Tensor:
    """The separable window maximum of ``(F, rows, W)``, each field its own image, NaN winning."""
    import torch
    from torch.nn import functional

    down, across = sizes
    batch = tiles[:, None]
    wide = functional.max_pool2d(batch, (1, across), stride=1, padding=(0, across // 2))
    result = functional.max_pool2d(wide, (down, 1), stride=1, padding=(down // 2, 0))[:, 0]
    nan = torch.isnan(tiles)
    if bool(nan.any()):
        seen = functional.max_pool2d(nan.to(torch.float32)[:, None], (1, across), stride=1, padding=(0, across // 2))
        seen = functional.max_pool2d(seen, (down, 1), stride=1, padding=(down // 2, 0))[:, 0] > 0
        result = result.masked_fill(seen, float("nan"))
    return result


def _rows(fields: np.ndarray, sizes: tuple[int, int], device: Device) -> int:
    """Output rows of every field per tile, from the pass budget."""
    count, _height, width = fields.shape
    return max(1, budget(device) // (_GPU_BYTES_PER_PIXEL * int(width) * int(count)) - (sizes[0] - 1))


def maximum_filter_stack(field: np.ndarray, size: int, device: Device) -> np.ndarray:
    """The window maximum of every 2-D field of ``(..., H, W)`` float32, edges repeated, NaN winning.

    :param field: non-empty float32, at least 2-D (never modified).
    :param size: odd window edge, at least 3.
    :param device: where to compute.
    :returns: a new float32 array of the stack's shape, equal bit for bit to the NumPy backend's.
    """
    if field.ndim == 2:
        return maximum_filter(field, size, device)
    fields = np.ascontiguousarray(field).reshape(-1, *field.shape[-2:])
    out = np.empty(fields.shape, dtype=_F32)
    if device.is_cpu:
        for number in range(fields.shape[0]):
            out[number] = _filter_in_stripes(fields[number], size, device)
    else:
        filter_in_tiles(fields, size, device, out)
    return out.reshape(field.shape)


def filter_in_tiles(fields: np.ndarray, size: int, device: Device, out: np.ndarray) -> None:
    """The card's algorithm: ``(F, H, W)`` fields into ``out``, every field in each tile of rows."""
    import torch

    height = fields.shape[1]
    sizes = _capped(size, fields.shape[1:])
    radius = sizes[0] // 2

    def step(start: int, stop: int) -> None:
        lo, hi = max(0, start - radius), min(height, stop + radius)
        result = _pool(tensor(np.ascontiguousarray(fields[:, lo:hi]), device.torch), sizes)
        torch.from_numpy(out[:, start:stop]).copy_(result[:, start - lo:stop - lo])

    tiled(height, _rows(fields, sizes, device), _FLOOR_ROWS, step, device, "maximum_filter")


def _with_leading(peaks: np.ndarray, numbers: np.ndarray, lead: tuple[int, ...]) -> np.ndarray:
    """``(P, 2)`` in-field coordinates of fields ``numbers`` as ``(P, len(lead) + 2)`` stack coordinates."""
    where = np.asarray(np.unravel_index(numbers, lead), dtype=np.int64).T.reshape(-1, len(lead))
    return np.hstack([where, peaks]).astype(np.int64, copy=False)


def local_maxima_stack(field: np.ndarray, size: int, threshold: np.float32 | None, device: Device) -> np.ndarray:
    """The peaks of every field of ``(..., H, W)`` float32 as int64 coordinates in row-major order.

    :param field: non-empty float32, at least 2-D (never modified).
    :param size: odd window edge, at least 3.
    :param threshold: peaks must exceed it (a float32, so the comparison is exact), or ``None``.
    :param device: where to compute; on a card only the coordinates come back.
    """
    if field.ndim == 2:
        return local_maxima(field, size, threshold, device)
    lead = field.shape[:-2]
    fields = np.ascontiguousarray(field).reshape(-1, *field.shape[-2:])
    if device.is_cpu:
        parts = []
        for number in range(fields.shape[0]):
            peaks = local_maxima(fields[number], size, threshold, device)
            parts.append(_with_leading(peaks, np.full(len(peaks), number), lead))
        return np.concatenate(parts) if parts else np.empty((0, field.ndim), np.int64)
    return peaks_in_tiles(fields, size, threshold, device, lead)


def peaks_in_tiles(fields: np.ndarray, size: int, threshold: np.float32 | None, device: Device,
                   lead: tuple[int, ...]) -> np.ndarray:
    """The card's algorithm: peaks of ``(F, H, W)`` fields, only coordinates copied back."""
    import torch

    height = fields.shape[1]
    sizes = _capped(size, fields.shape[1:])
    radius = sizes[0] // 2
    found: dict[int, np.ndarray] = {}

    def step(start: int, stop: int) -> None:
        lo, hi = max(0, start - radius), min(height, stop + radius)
        tiles = tensor(np.ascontiguousarray(fields[:, lo:hi]), device.torch)
        inner = slice(start - lo, stop - lo)
        where = torch.nonzero(_peaks(tiles[:, inner], _pool(tiles, sizes)[:, inner], threshold)).cpu().numpy()
        where[:, 1] += start
        found[start] = where

    tiled(height, _rows(fields, sizes, device), _FLOOR_ROWS, step, device, "local_maxima")
    every = np.concatenate([found[start] for start in sorted(found)])
    every = every[np.argsort(every[:, 0], kind="stable")]  # field first; rows already in order within it
    return _with_leading(every[:, 1:], every[:, 0], lead)
