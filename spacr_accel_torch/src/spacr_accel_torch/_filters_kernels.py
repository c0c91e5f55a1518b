"""The filters family's torch code: the windowed maximum, tiled, on any device torch drives (a stack
in one call), the windowed minimum from it, and SciPy's Gaussian passes as float64 elementwise tensor
operations. Imported by the hooks of :mod:`._filters` at their first call (the plugin imports that
module, and its import stays as cheap as the hooks alone).

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

STACKS ``(..., H, W)`` IN ONE CALL (spaCR's 11 cycles x 4 channels of a sequencing field). ON A CARD
every field of the stack travels in one tile of rows (a batch of ``max_pool2d`` windows, one
transfer in and one out per tile, a single tile when the stack fits the pass budget). Windows never
cross from one field into another: each field is one image of the batch. ON THE CPU the fields are
filtered one after another by the cache-sized stripes, in the same call.

THE GAUSSIAN PASSES: WHY NOT ``conv1d``. A convolution sums its products in whatever order its
kernel chooses (and in float32, or TF32, on a card); SciPy's answer is one float64 sum in one order
(see :mod:`spacr_accel_core.separable`). Each pass here is that sum written out: the centre times its
weight, then each mirrored pair from the outermost in, each step one elementwise kernel over the
whole field (one rounding per operation: a separate multiply and add are never fused), rounded to
float32 after the pass. A device without float64 (Metal) declines. One field at a time on the
device, in float64 (about five copies of one field): a stack costs its input, its output and that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from spacr_accel_core import BackendDeclined
from spacr_accel_core.toolkit import Pass, gaussian_passes, laplace_terms, source_index

from ._runtime import Device, budget, tensor, tiled

if TYPE_CHECKING:
    import torch

__all__ = ["gaussian", "maximum_filter", "maximum_filter_stack", "minimum"]

_F32 = np.dtype(np.float32)

_CPU_STRIPE_BYTES = 1 << 22
"""One CPU stripe with its halo and scratch (85 rows of a 4096-wide field): the fastest of 0.5 to
32 MiB measured on the project's 2-core machine; smaller stripes multiply per-op overhead (and
torch's thread hand-offs), bigger ones fall out of the cache."""
_GPU_BYTES_PER_PIXEL = 4 * 6
"""A GPU tile holds its input rows, two pooled copies and (with NaN) two mask copies."""
_FLOOR_ROWS = 8
"""The smallest tile of output rows worth sending to a device after out-of-memory retries."""


# ---- maximum_filter: one field ----------------------------------------------------------------------


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


# ---- maximum_filter: a stack in one call ---------------------------------------------------------


def _pool_fields(tiles: torch.Tensor, sizes: tuple[int, int]) -> torch.Tensor:
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
        result = _pool_fields(tensor(np.ascontiguousarray(fields[:, lo:hi]), device.torch), sizes)
        torch.from_numpy(out[:, start:stop]).copy_(result[:, start - lo:stop - lo])

    tiled(height, _rows(fields, sizes, device), _FLOOR_ROWS, step, device, "maximum_filter")


# ---- the decode chain's filters: the Gaussian passes and the window minimum ----------------------


def _pass(values: torch.Tensor, step: Pass, mode: str) -> torch.Tensor:
    """One 1-D correlation of a float64 field along ``step.axis``, in SciPy's order, rounded to float32
    (returned as float64 holding the float32 values, as SciPy's next pass reads them)."""
    import torch

    dim = values.dim() + step.axis
    length, radius = values.shape[dim], step.radius
    where = torch.as_tensor(source_index(length, radius, mode), device=values.device)
    line = values.index_select(dim, where)
    acc = line.narrow(dim, radius, length) * step.weights[0]
    for j in range(radius, 0, -1):
        left, right = line.narrow(dim, radius - j, length), line.narrow(dim, radius + j, length)
        pair = left + right if step.sign > 0 else left - right
        acc = acc + pair * step.weights[j]
    return acc.to(torch.float32).to(torch.float64)


def _term(field: torch.Tensor, passes: tuple[Pass, ...], mode: str) -> torch.Tensor:
    import torch

    values = field
    for step in passes:
        values = _pass(values, step, mode)
    return values.to(torch.float32)


def gaussian(field: np.ndarray, sigma: tuple[float, float], truncate: float, mode: str, laplace: bool,
             device: Device) -> np.ndarray:
    """``gaussian_filter`` (or ``gaussian_laplace``) of one 2-D float32 field, SciPy's bits.

    :param field: non-empty 2-D float32 (never modified).
    :param sigma: ``(rows, columns)``, not both skipped.
    :param truncate: the reach in standard deviations.
    :param mode: ``"reflect"`` or ``"nearest"``.
    :param laplace: the Laplacian of the Gaussian rather than the Gaussian.
    :param device: where to compute.
    :raises BackendDeclined: the device has no float64.
    """
    import torch

    if not device.float64:
        raise BackendDeclined(f"{device.torch} has no float64, and SciPy's answer is summed in float64")
    terms = laplace_terms(sigma, truncate) if laplace else (gaussian_passes(sigma, truncate),)
    values = tensor(np.ascontiguousarray(field, dtype=_F32), device.torch).to(torch.float64)
    result = _term(values, terms[0], mode)
    for passes in terms[1:]:
        result = result + _term(values, passes, mode)  # float32 + float32, as SciPy adds the terms
    out = np.empty(field.shape, dtype=_F32)
    torch.from_numpy(out).copy_(result)
    return out


def minimum(field: np.ndarray, size: int, device: Device) -> np.ndarray:
    """The window minimum of every 2-D float32 field of ``(..., H, W)`` (a stack in one call): the
    negated field's window maximum, negated
    (exact: negation only flips the sign; a NaN stays a NaN), its zeros made ``+0.0``."""
    negated = np.negative(np.asarray(field, dtype=_F32))
    result = maximum_filter_stack(negated, size, device)
    np.negative(result, out=result)
    result += np.float32(0.0)
    return result
