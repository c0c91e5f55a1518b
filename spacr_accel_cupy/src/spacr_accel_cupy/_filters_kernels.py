"""The filters family against a :class:`~._kit.Kit` (CuPy on the card, NumPy in the tests).

THE WINDOW MAXIMUM: ``cupyx.scipy.ndimage.maximum_filter(mode="nearest")`` on tiles of rows with a
halo. The maximum is exact, so the result equals scipy's (and the NumPy backend's) bit for bit.
The NaN rule is enforced, not hoped for: NaNs are replaced by ``-inf`` before filtering (so no
implementation's handling of an unordered value can disturb a window without one), and a filtered
NaN mask writes NaN back wherever a window held one.

STACKS ``(..., H, W)`` IN ONE CALL: every field of a stack travels in each tile of rows (one
transfer in and one out per tile, a single tile when the stack fits the pass budget); the window is
``(1, size, size)``, so it never crosses from one field into another. The window minimum is the
negated field's window maximum, negated.

THE GAUSSIANS: each pass is SciPy's sum written out (see :mod:`spacr_accel_core.separable`): the
centre times its weight, then each mirrored pair from the outermost in, each step its own
elementwise kernel (one rounding per operation: nothing fuses a multiply into an add), rounded to
float32 after the pass. One field at a time on the device, in float64: a stack costs its input, its
output and a few copies of one field.

Every loop is tiled from the memory free NOW, and a tile that runs out of memory is retried at
half its size, down to a floor, before the primitive gives up with ``BackendOutOfMemory``
(:func:`._runtime.tiled`). Imported by the hooks of :mod:`._filters` at their first call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spacr_accel_core.toolkit import Pass, gaussian_passes, laplace_terms, source_index

from ._kit import Kit
from ._runtime import tiled

__all__ = ["gaussian", "maximum_filter", "maximum_filter_stack", "minimum_filter"]

_F32 = np.dtype(np.float32)
_FILTER_BYTES_PER_PIXEL = 4 * 6  # the tile, its filtered copy, the NaN mask and its filtered copy
_FLOOR_ROWS = 8


def _filter_tile(kit: Kit, tile: Any, size: int | tuple[int, ...]) -> Any:
    xp, ndimage = kit.xp, kit.ndimage
    nan = xp.isnan(tile)
    if not bool(nan.any()):
        return ndimage.maximum_filter(tile, size=size, mode="nearest")
    result = ndimage.maximum_filter(xp.where(nan, xp.float32(-np.inf), tile), size=size, mode="nearest")
    seen = ndimage.maximum_filter(nan.astype(xp.uint8), size=size, mode="nearest")
    return xp.where(seen.astype(bool), xp.float32(np.nan), result)


def maximum_filter(kit: Kit, field: np.ndarray, size: int) -> np.ndarray:
    """The ``size`` x ``size`` window maximum of a 2-D float32 field, edges repeated, NaN winning.

    :param kit: the library to run on.
    :param field: non-empty 2-D float32 (never modified).
    :param size: odd window edge, at least 3.
    :returns: a new float32 array of the field's shape.
    """
    source = np.ascontiguousarray(field, dtype=_F32)
    height, width = source.shape
    # Each axis's window capped by that axis's own length: past a radius of n - 1 it already holds
    # the whole axis from anywhere (border repeated), so the answer is the same and a thin field
    # under a huge window neither shrinks its tiles to the halo nor scans the window's width.
    radius = min(size // 2, height - 1)
    sizes = (2 * radius + 1, 2 * min(size // 2, width - 1) + 1)
    out = np.empty((height, width), dtype=_F32)
    rows = max(1, kit.budget() // (_FILTER_BYTES_PER_PIXEL * width) - (sizes[0] - 1))

    def step(start: int, stop: int) -> None:
        lo, hi = max(0, start - radius), min(height, stop + radius)
        filtered = _filter_tile(kit, kit.to_device(source[lo:hi]), sizes)
        out[start:stop] = kit.to_host(filtered[start - lo:stop - lo])

    tiled(height, rows, _FLOOR_ROWS, step, kit, "maximum_filter")
    return out


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


def _pass(kit: Kit, values: Any, step: Pass, mode: str) -> Any:
    """One 1-D correlation of a float64 field along ``step.axis``, in SciPy's order, rounded to float32
    (returned as float64 holding the float32 values, as SciPy's next pass reads them)."""
    xp = kit.xp
    axis = values.ndim + step.axis
    length, radius = values.shape[axis], step.radius
    line = xp.take(values, kit.to_device(source_index(length, radius, mode)), axis=axis)

    def shifted(offset: int) -> Any:  # along ``axis`` of a field or a stack of fields
        return line[(slice(None),) * axis + (slice(radius + offset, radius + offset + length),)]

    acc = shifted(0) * step.weights[0]
    for j in range(radius, 0, -1):
        pair = shifted(-j) + shifted(j) if step.sign > 0 else shifted(-j) - shifted(j)
        acc = acc + pair * step.weights[j]
    return acc.astype(xp.float32).astype(xp.float64)


def _term(kit: Kit, values: Any, passes: tuple[Pass, ...], mode: str) -> Any:
    for step in passes:
        values = _pass(kit, values, step, mode)
    return values.astype(kit.xp.float32)


def gaussian(kit: Kit, field: np.ndarray, sigma: tuple[float, float], truncate: float, mode: str,
             laplace: bool) -> np.ndarray:
    """``gaussian_filter`` (or ``gaussian_laplace``) of a 2-D float32 field, or of every field of a
    stack ``(..., H, W)`` in one call, SciPy's bits.

    :param kit: the library to run on.
    :param field: non-empty float32, 2-D or a stack (never modified).
    :param sigma: ``(rows, columns)``, not both skipped.
    :param truncate: the reach in standard deviations.
    :param mode: ``"reflect"`` or ``"nearest"``.
    :param laplace: the Laplacian of the Gaussian rather than the Gaussian.
    :returns: a new float32 array of the field's shape.
    """
    terms = laplace_terms(sigma, truncate) if laplace else (gaussian_passes(sigma, truncate),)
    values = kit.to_device(np.ascontiguousarray(field, dtype=_F32)).astype(kit.xp.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN, as in SciPy (the NumPy kit)
        result = _term(kit, values, terms[0], mode)
        for passes in terms[1:]:
            result = result + _term(kit, values, passes, mode)  # float32 + float32, as SciPy adds them
    return np.asarray(kit.to_host(result), dtype=_F32)


def minimum_filter(kit: Kit, field: np.ndarray, size: int) -> np.ndarray:
    """The window minimum of every 2-D float32 field of ``(..., H, W)`` (a stack in one call): the
    negated field's window maximum, negated
    (exact; a NaN stays a NaN), its zeros made ``+0.0``."""
    result = maximum_filter_stack(kit, np.negative(np.asarray(field, dtype=_F32)), size)
    np.negative(result, out=result)
    result += np.float32(0.0)
    return result
