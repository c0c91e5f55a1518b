"""The windowed maximum and the matrix product in torch, tiled, on any device torch drives.

WHY TWO FILTER ALGORITHMS. The maximum over a k x k window is separable: the max over k columns,
then over k rows. On a GPU each 1-D pass is one ``max_pool2d`` kernel with a (1, k) or (k, 1)
window, reading the field once and writing it once. On the CPU torch's max-pool is slow (2.1 s
for the two passes on a 4096 x 4096 field, size 15, on this project's 2-core machine), while the
same passes built by doubling from ``torch.maximum`` (the max over 2w is the max of two
overlapping w-maxima, so width 15 takes four elementwise passes per axis), in cache-sized stripes,
take ~50 ms. Both are exact, so both equal the NumPy backend bit for bit.

EDGES. The contract pads the field by repeating its border (scipy's ``mode="nearest"``). For a
MAXIMUM that is the same as ignoring the outside: a window that crosses an edge already holds the
border pixel the padding would repeat. So the GPU passes use max-pool's own implicit padding
(which never wins) and no padded copy of the field is made; the CPU passes pad explicitly.

NaN. ``torch.maximum`` propagates NaN, which IS the contract's rule. ``max_pool2d`` does not
promise to on every device (Metal), so where a field holds a NaN the GPU path pools a NaN mask the
same way and writes NaN wherever a window saw one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from spacr_accel_core.toolkit import EXACT_IN_FLOAT32

from ._runtime import Device, budget, ieee_float32, tensor, tiled

if TYPE_CHECKING:
    import torch

__all__ = ["matmul", "maximum_filter"]

_F32 = np.dtype(np.float32)

_CPU_STRIPE_BYTES = 1 << 22
"""One CPU stripe with its halo and scratch (85 rows of a 4096-wide field): the fastest of 0.5 to
32 MiB measured on the project's 2-core machine; smaller stripes multiply per-op overhead (and
torch's thread hand-offs), bigger ones fall out of the cache."""
_GPU_BYTES_PER_PIXEL = 4 * 6
"""A GPU tile holds its input rows, two pooled copies and (with NaN) two mask copies."""
_FLOOR_ROWS = 8
"""The smallest tile of output rows worth sending to a device after out-of-memory retries."""


# ---- maximum_filter ------------------------------------------------------------------------------


def _running_max(buffer: torch.Tensor, spare: torch.Tensor, length: int, size: int, dim: int,
                 out: torch.Tensor) -> None:
    """Write into ``out`` the max over ``size`` consecutive entries along ``dim`` of the first
    ``length`` entries of ``buffer`` (``out`` has ``length - size + 1`` there), by doubling.

    ``buffer`` and ``spare`` (same shape) are overwritten.
    """
    import torch

    if size == 1:  # a window of one entry along this axis (its radius capped at 0): a copy
        out.copy_(buffer.narrow(dim, 0, length))
        return
    src, dst = buffer, spare
    width = 1
    while True:
        step = min(width, size - width)  # the last step overlaps two width-maxima to reach size
        valid = length - step
        into = out if width + step == size else dst.narrow(dim, 0, valid)
        torch.maximum(src.narrow(dim, 0, valid), src.narrow(dim, step, valid), out=into)
        width += step
        if width == size:
            return
        length = valid
        src, dst = dst, src


def _capped(size: int, shape: tuple[int, ...]) -> tuple[int, int]:
    """The window edge along rows and along columns, each capped by that axis's own length.

    Past a radius of ``n - 1`` a window already holds every pixel of its axis from anywhere (the
    border repeated), so a wider one changes only the padding: a ``(1, 70000)`` field with size
    1001 would otherwise pad its one row to 1001 rows. The answer is the same bit for bit.
    """
    radius = size // 2
    return 2 * min(radius, shape[0] - 1) + 1, 2 * min(radius, shape[1] - 1) + 1


def _cpu_stripe(field: torch.Tensor, out: torch.Tensor, start: int, stop: int, sizes: tuple[int, int]) -> None:
    """Rows ``start:stop`` of the filtered field, from the rows they see (edges repeated).

    :param sizes: the window edge along rows and columns (:func:`_capped`).
    """
    import torch

    height, width = field.shape
    down, across = sizes[0] // 2, sizes[1] // 2
    lo, hi = max(0, start - down), min(height, stop + down)
    top = lo - (start - down)  # rows of edge repetition above the field
    rows = stop - start + 2 * down
    padded = torch.empty((hi - lo, width + 2 * across), dtype=torch.float32)
    padded[:, across:across + width] = field[lo:hi]
    padded[:, :across] = field[lo:hi, :1]
    padded[:, across + width:] = field[lo:hi, width - 1:]
    vertical = torch.empty((rows, width), dtype=torch.float32)
    _running_max(padded, torch.empty_like(padded), width + 2 * across, sizes[1], 1,
                 vertical[top:top + hi - lo])
    vertical[:top] = vertical[top]
    vertical[top + hi - lo:] = vertical[top + hi - lo - 1]
    _running_max(vertical, torch.empty_like(vertical), rows, sizes[0], 0, out[start:stop])


def _pool(tile: torch.Tensor, size: int | tuple[int, int]) -> torch.Tensor:
    """The separable window maximum of a 2-D tile, windows clipped at the tile's edges.

    :param size: the window edge, or its edges along rows and columns (:func:`_capped`).
    """
    from torch.nn import functional

    down, across = (size, size) if isinstance(size, int) else size
    wide = functional.max_pool2d(tile[None, None], (1, across), stride=1, padding=(0, across // 2))
    return functional.max_pool2d(wide, (down, 1), stride=1, padding=(down // 2, 0))[0, 0]


def _device_tile(field: np.ndarray, out: np.ndarray, start: int, stop: int, size: tuple[int, int],
                 device: Device) -> None:
    """Rows ``start:stop`` of the filtered field, computed on ``device`` from the rows they see."""
    import torch

    height = field.shape[0]
    radius = size[0] // 2
    lo, hi = max(0, start - radius), min(height, stop + radius)
    tile = tensor(field[lo:hi], device.torch)
    result = _pool(tile, size)
    if bool(torch.isnan(tile).any()):
        # The NaN rule, independent of how this device's max-pool treats NaN.
        seen = _pool(torch.isnan(tile).to(torch.float32), size) > 0
        result = result.masked_fill(seen, float("nan"))
    # Device to host straight into the result rows (contiguous), with no staging copy.
    torch.from_numpy(out[start:stop]).copy_(result[start - lo:stop - lo])


def _filter_in_stripes(field: np.ndarray, size: int, device: Device) -> np.ndarray:
    """The CPU algorithm: doubling ``torch.maximum`` passes over cache-sized stripes."""
    import torch

    height, width = field.shape
    # The host array IS the device array: no copy in, and the result is written in place.
    out = np.empty((height, width), dtype=_F32)
    host_field = tensor(field)  # shared, unless the caller's array is read-only
    host_out = torch.from_numpy(out)
    sizes = _capped(size, field.shape)
    stripe = max(sizes[0], _CPU_STRIPE_BYTES // (4 * 3 * (width + sizes[1])))

    def step(start: int, stop: int) -> None:
        _cpu_stripe(host_field, host_out, start, stop, sizes)

    tiled(height, stripe, 1, step, device, "maximum_filter")
    return out


def _filter_in_tiles(field: np.ndarray, size: int, device: Device) -> np.ndarray:
    """The GPU algorithm: two max-pool kernels per tile of rows, tiles sized from free memory."""
    height, width = field.shape
    out = np.empty((height, width), dtype=_F32)
    sizes = _capped(size, field.shape)
    rows = max(1, budget(device) // (_GPU_BYTES_PER_PIXEL * width) - (sizes[0] - 1))

    def step(start: int, stop: int) -> None:
        _device_tile(field, out, start, stop, sizes, device)

    tiled(height, rows, _FLOOR_ROWS, step, device, "maximum_filter")
    return out


def maximum_filter(field: np.ndarray, size: int, device: Device) -> np.ndarray:
    """The ``size`` x ``size`` window maximum of a 2-D float32 field, edges repeated, NaN winning.

    :param field: non-empty 2-D float32 (any strides; never modified).
    :param size: odd window edge, at least 3.
    :param device: where to compute.
    :returns: a new float32 array of the field's shape, equal bit for bit to the NumPy backend's.
    """
    source = np.ascontiguousarray(field)
    if device.is_cpu:
        return _filter_in_stripes(source, size, device)
    return _filter_in_tiles(source, size, device)


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


# ---- matmul --------------------------------------------------------------------------------------


def _compute_dtype(first: np.ndarray, second: np.ndarray, device: Device) -> np.dtype:
    """float32 where float32 holds the inputs exactly or the device refuses doubles, else float64.

    Wider inputs (int32, int64, float64) are multiplied in float64 and rounded once, like the
    NumPy backend, on a device that accepts doubles; Metal never receives one: they are rounded
    to float32 on the host first, the best that device can do.
    """
    if first.dtype in EXACT_IN_FLOAT32 and second.dtype in EXACT_IN_FLOAT32:
        return _F32
    return np.dtype(np.float64) if device.float64 else _F32


def _product(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.matmul(first, second)


def matmul(first: np.ndarray, second: np.ndarray, device: Device) -> np.ndarray:
    """``first @ second`` with NumPy's shape rules, as float32, tiled over the rows of ``first``.

    THE UNMIXING SHAPE: a tall matrix times a tiny one is a copy to the card, a trivial kernel
    and a copy back; tiles bound the device memory, and on the CPU the tensors alias the arrays.

    :param first: non-empty real array, at least 1-D.
    :param second: the same, shape-compatible.
    :param device: where to compute.
    :returns: the float32 product (0-d for two vectors), from IEEE float32 (or float64) products
        even where the process allowed TF32 or bfloat16 (see :func:`._runtime.ieee_float32`).
    """
    with ieee_float32():
        return _matmul(first, second, device)


def _matmul(first: np.ndarray, second: np.ndarray, device: Device) -> np.ndarray:
    import torch

    dtype = _compute_dtype(first, second, device)
    left = np.ascontiguousarray(first, dtype=dtype)
    right = np.ascontiguousarray(second, dtype=dtype)
    right_t = tensor(right, device.torch)
    if left.ndim == 1:
        result = _product(tensor(left, device.torch), right_t)
        # A fresh tensor (never a view of the operands), so handing out its memory is safe.
        return result.to("cpu", torch.float32).numpy()
    batch_shape = np.broadcast_shapes(left.shape[:-2], right.shape[:-2])
    shape = (*batch_shape, left.shape[-2], right.shape[-1]) if right.ndim >= 2 else (*batch_shape, left.shape[-2])
    out = np.empty(shape, dtype=_F32)
    rows = left.shape[-2]
    batch = int(np.prod(shape[:-2] if right.ndim >= 2 else shape[:-1]))
    per_row = (left.shape[-1] + 2 * (right.shape[-1] if right.ndim >= 2 else 1)) * dtype.itemsize * batch
    tile = rows if device.is_cpu else max(1, budget(device) // max(1, per_row))

    def step(start: int, stop: int) -> None:
        part = tensor(left[..., start:stop, :], device.torch)
        product = _product(part, right_t)
        rows_out = out[..., start:stop, :] if right.ndim >= 2 else out[..., start:stop]
        torch.from_numpy(rows_out).copy_(product)  # device to host straight into the result

    tiled(rows, tile, 1, step, device, "matmul")
    return out
