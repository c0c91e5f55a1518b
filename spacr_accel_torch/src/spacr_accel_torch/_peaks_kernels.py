"""The peaks family's torch code: local maxima (a stack in one call; on a card only the coordinates
leave the device) and window maxima gathered on the device. Imported by the hooks of :mod:`._peaks`
at their first call (the plugin imports that module, and its import stays as cheap as the hooks
alone).

LOCAL MAXIMA. A pixel is a peak where it equals its window's maximum (the filters family's
windowed maximum, :mod:`._filters_kernels`, the NaN rule included: NaN equals nothing) and exceeds
the threshold. On a card the field is filtered and compared tile by tile on the device, every field
of a stack in each tile of rows, and only the coordinates cross the bus; on the CPU the filtered
field is compared where it lies, field by field.

WINDOW MAXIMA: ONLY THE ANSWERS CROSS THE BUS. The window maxima of 10,000 reads in 44 fields are
440,000 floats; the stack goes to the device in groups of fields sized to the free memory, and each
group's windows are gathered and reduced there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._filters_kernels import _FLOOR_ROWS, _GPU_BYTES_PER_PIXEL, _capped, _filter_in_stripes, _pool, _pool_fields, _rows
from ._runtime import Device, budget, tensor, tiled

if TYPE_CHECKING:
    import torch

__all__ = ["local_maxima", "local_maxima_stack", "window_maxima"]


# ---- local maxima: one field ---------------------------------------------------------------------


def _peaks(values: torch.Tensor, filtered: torch.Tensor, threshold: np.float32 | None) -> torch.Tensor:
    """Where a pixel equals its window's maximum (never a NaN: NaN equals nothing), above ``threshold``."""
    peak = values == filtered
    if threshold is not None:
        peak &= values > float(threshold)  # ``threshold`` is a float32, so the comparison is exact
    return peak


def _peaks_in_tiles(field: np.ndarray, size: int, threshold: np.float32 | None, device: Device) -> np.ndarray:
    """Peaks found on the device, tile by tile: only each tile's coordinates come back to the host."""
    import torch

    height, width = field.shape
    sizes = _capped(size, field.shape)
    rows = max(1, budget(device) // (_GPU_BYTES_PER_PIXEL * width) - (sizes[0] - 1))
    found: dict[int, np.ndarray] = {}

    def step(start: int, stop: int) -> None:
        lo, hi = max(0, start - sizes[0] // 2), min(height, stop + sizes[0] // 2)
        tile = tensor(field[lo:hi], device.torch)
        result = _pool(tile, sizes)
        if bool(torch.isnan(tile).any()):
            seen = _pool(torch.isnan(tile).to(torch.float32), sizes) > 0
            result = result.masked_fill(seen, float("nan"))
        inner = slice(start - lo, stop - lo)
        where = torch.nonzero(_peaks(tile[inner], result[inner], threshold)).cpu().numpy()
        where[:, 0] += start
        found[start] = where  # a retried (smaller) tile replaces nothing: starts are unique per range

    tiled(height, rows, _FLOOR_ROWS, step, device, "local_maxima")
    parts = [found[start] for start in sorted(found)]
    return np.concatenate(parts).astype(np.int64, copy=False) if parts else np.empty((0, 2), np.int64)


def local_maxima(field: np.ndarray, size: int, threshold: np.float32 | None, device: Device) -> np.ndarray:
    """The coordinates of a 2-D float32 field's peaks (see :func:`spacr_accel_core.ops.local_maxima`).

    On a card the field is filtered and compared tile by tile on the device, and only the
    coordinates cross the bus; on the CPU the filtered field is compared where it lies.

    :returns: int64 ``(P, 2)`` coordinates in row-major order.
    """
    import torch

    source = np.ascontiguousarray(field)
    if not device.is_cpu:
        return _peaks_in_tiles(source, size, threshold, device)
    filtered = torch.from_numpy(_filter_in_stripes(source, size, device))
    peak = _peaks(tensor(source), filtered, threshold)
    return torch.nonzero(peak).numpy().astype(np.int64, copy=False)


# ---- local maxima: a stack in one call -----------------------------------------------------------


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
        where = torch.nonzero(_peaks(tiles[:, inner], _pool_fields(tiles, sizes)[:, inner], threshold)).cpu().numpy()
        where[:, 1] += start
        found[start] = where

    tiled(height, _rows(fields, sizes, device), _FLOOR_ROWS, step, device, "local_maxima")
    every = np.concatenate([found[start] for start in sorted(found)])
    every = every[np.argsort(every[:, 0], kind="stable")]  # field first; rows already in order within it
    return _with_leading(every[:, 1:], every[:, 0], lead)


# ---- window maxima ----------------------------------------------------------------------------------


def _window_index(points: np.ndarray, size: int, height: int, width: int) -> np.ndarray:
    """Flat indices ``(window pixels, N)`` of each point's window, clipped at the field's edges."""
    down, across = min(size // 2, height - 1), min(size // 2, width - 1)
    rows, columns = np.meshgrid(np.arange(-down, down + 1), np.arange(-across, across + 1), indexing="ij")
    ys = np.clip(points[:, 0] + rows.reshape(-1, 1), 0, height - 1)
    xs = np.clip(points[:, 1] + columns.reshape(-1, 1), 0, width - 1)
    index: np.ndarray = ys * width + xs
    return index


def window_maxima(stack: np.ndarray, points: np.ndarray, size: int, device: Device) -> np.ndarray:
    """float32 ``(N, F)``: the window maximum at each point of every field of an ``(F, H, W)`` stack."""
    import torch

    count, height, width = stack.shape
    source = np.ascontiguousarray(stack, dtype=np.float32).reshape(count, height * width)
    index = tensor(_window_index(points, size, height, width), device.torch)
    out = np.empty((count, points.shape[0]), dtype=np.float32)
    per_field = 4 * (height * width + 2 * index.numel())
    fields = max(1, budget(device) // per_field)

    def step(start: int, stop: int) -> None:
        part = tensor(source[start:stop], device.torch)
        gathered = part[:, index]  # (fields, window pixels, N)
        best = gathered.amax(dim=1)
        nan = torch.isnan(gathered).any(dim=1)  # the NaN rule, whatever this device's max does
        best = best.masked_fill(nan, float("nan")) + 0.0  # and +0.0 for a maximum of zero
        torch.from_numpy(out[start:stop]).copy_(best)

    tiled(count, fields, 1, step, device, "window_maxima")
    return np.ascontiguousarray(out.T)
