"""Two whole-plane steps of aligning and scoring a field: the integer translation with zero fill, and
the spot score (std over cycles, mean over channels). Their input checks (shared by ``ops`` and the
Dask layer, so both fail with the same words), the result checks, the agreements, the adapter and
the inputs the table tries them on.

WHY THE CHECKS ARE STRICT ABOUT SHIFTS. A registration measured to the pixel is applied to the pixel:
a fractional shift would have to be rounded one way or the other, and the caller's registration is
the one place that knows which; so ``2.5`` is refused, ``2.0`` is 2. A shift at or past the field's
edge moves every pixel out (spaCR's rule: zeros), so it is clipped to the field's extent before a
backend sees it, which keeps every backend's arithmetic inside int64 whatever the caller passed.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..contract._errors import describe
from ._checks import _F32, _I64, _numeric, _shown
from ._results import Example

__all__ = ["agree_translated", "check_translated", "score_shape", "score_stack", "translation_shifts"]


def translation_shifts(shifts: Any, lead: tuple[int, ...], height: int, width: int) -> np.ndarray:
    """``shifts`` as int64 ``(*lead, 2)`` rows ``(dy, dx)``, each clipped to the field's extent.

    The rule: one ``(dy, dx)`` pair, or pairs shaped ``(..., 2)`` that broadcast against the stack's
    leading axes (``(C, 1, 2)`` moves each cycle's channels together). Integers, or floats holding
    whole numbers.

    :param shifts: the caller's shifts.
    :param lead: the stack's leading shape (``stack.shape[:-2]``).
    :param height: the field's rows (a shift of this many or more moves every row out).
    :param width: the field's columns.
    :returns: a C-contiguous int64 array of shape ``(*lead, 2)``, ``|dy| <= height``, ``|dx| <= width``.
    :raises ValueError: not ``(..., 2)``, not broadcastable to the stack, fractional, NaN or infinite.
    :raises TypeError: not numbers (a bool, a string, a masked array).
    """
    if "numpy.ma" in sys.modules and isinstance(shifts, np.ma.MaskedArray):
        raise TypeError("shifts is a masked array; pass shifts.filled(0) or shifts.data (a mask would be ignored)")
    try:
        array = np.asarray(shifts)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise ValueError(f"shifts cannot be read as (dy, dx) pairs: {describe(exc)}") from None
    if array.ndim == 0 or array.shape[-1] != 2:
        raise ValueError(f"shifts must be one (dy, dx) pair or pairs shaped (..., 2), got shape {array.shape}")
    try:
        fits = np.broadcast_shapes(array.shape[:-1], lead) == lead
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"shifts of shape {array.shape} do not broadcast against the stack's leading axes {lead} "
                         "(one (dy, dx) pair, or pairs shaped (..., 2) that broadcast to them)")
    limits = np.array([height, width], dtype=np.float64)
    if array.dtype == object:
        array = _whole_objects(array, limits)
    elif array.dtype.kind == "b" or array.dtype.kind not in "iuf":
        raise TypeError(f"shifts must hold whole numbers of pixels, got dtype {array.dtype}")
    if array.dtype.kind == "f":
        if not np.isfinite(array).all():
            raise ValueError("shifts must be whole numbers of pixels; got NaN or infinity")
        if not (array == np.floor(array)).all():
            raise ValueError(f"shifts must be whole numbers of pixels; got a fractional one "
                             f"({_shown(array[array != np.floor(array)].flat[0])}): round the registration first")
        array = np.clip(array, -limits, limits)
    elif array.dtype.kind == "u":
        array = np.minimum(array, np.array([height, width], dtype=array.dtype))
    clipped = np.clip(array.astype(_I64), -limits.astype(_I64), limits.astype(_I64))
    return np.ascontiguousarray(np.broadcast_to(clipped, (*lead, 2)))


def _whole_objects(array: np.ndarray, limits: np.ndarray) -> np.ndarray:
    """An object array of shifts (Python integers past int64 among them) as float64 within the field's
    extent, every value an integer (Python's or NumPy's) or a whole float; anything else refused."""
    values = []
    for value, limit in zip(array.reshape(-1).tolist(), np.resize(limits, array.size).tolist(), strict=True):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"shifts must hold whole numbers of pixels, got {type(value).__name__} ({value!r})")
        number = float(max(-limit, min(limit, value))) if isinstance(value, (int, np.integer)) else float(value)
        values.append(number)
    return np.asarray(values, dtype=np.float64).reshape(array.shape)


def score_stack(stack: Any) -> np.ndarray:
    """``stack`` as spaCR scores it: a ``(cycles, channels, Y, X)`` float32 array in C order.

    float32 as spaCR's ``np.asarray(stack, dtype=np.float32)`` makes it (a float64 value beyond
    float32's range becomes inf, quietly), then C order: NumPy's float32 reductions add a C-ordered
    stack's cycles in order, pixel by pixel, and that order is the answer every backend repeats.

    :raises ValueError: not four-dimensional.
    :raises TypeError: not real numbers.
    """
    array = _numeric(stack, "stack")
    score_shape(array.shape)
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(array, dtype=_F32)


def score_shape(shape: tuple[int, ...]) -> None:
    """The score's stack is ``(cycles, channels, Y, X)``: the one shape rule, in memory and on Dask.

    :raises ValueError: not four-dimensional.
    """
    if len(shape) != 4:
        raise ValueError(f"stack must be (cycles, channels, Y, X); got {len(shape)}-D with shape {shape}")


def check_translated(result: Any, expected: tuple[tuple[int, ...], np.dtype]) -> str | None:
    """An array of the stack's shape and dtype (a translation moves pixels; it never converts them)."""
    shape, dtype = expected
    if not isinstance(result, np.ndarray):
        return f"returned {type(result).__name__}, not a NumPy array"
    if result.shape != shape or result.dtype != dtype:
        return f"returned {result.dtype}{list(result.shape)}, expected {dtype}{list(shape)}"
    return None


def agree_translated(expected: Any, got: Any) -> tuple[bool, str]:
    """The same bytes: a translation copies pixels, so every bit (a NaN's payload, a zero's sign) is kept."""
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return False, f"got {got.dtype}{list(got.shape)}, the reference gave {expected.dtype}{list(expected.shape)}"
    bytes_got = np.ascontiguousarray(got).view(np.uint8)
    bytes_expected = np.ascontiguousarray(expected).view(np.uint8)
    wrong = int(np.count_nonzero(bytes_got != bytes_expected))
    return wrong == 0, "bit-identical" if wrong == 0 else f"{wrong} of {bytes_got.size} bytes differ"


# ---- the inputs the table tries them on -------------------------------------------------------


def small_translation() -> Example:
    stack = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    return Example("2 fields of 3x4, one moved (1, -2), one past the edge", (stack, [[1, -2], [3, 0]]))


def bench_translation(quick: bool, rng: np.random.Generator) -> Example:
    side = 512 if quick else 1480
    stack = rng.normal(100.0, 10.0, size=(4, side, side)).astype(np.float32)
    corner = stack[:, :64, :64].copy()
    corner[0, 3, 5] = np.nan
    return Example(f"4 x {side}x{side} float32, one shift per channel", (stack, [[3, -5], [-2, 7], [0, 1], [14, -9]]),
                   checks=(("a NaN in a 64x64 corner, moved past the edge", (corner, [70, 0])),))


def small_score() -> Example:
    return Example("3 cycles x 2 channels of 2x3", (np.arange(36, dtype=np.float32).reshape(3, 2, 2, 3) ** 1.5,))


def bench_score(quick: bool, rng: np.random.Generator) -> Example:
    cycles, side = (3, 512) if quick else (11, 1480)
    stack = rng.normal(100.0, 10.0, size=(cycles, 4, side, side)).astype(np.float32)
    corner = stack[:, :, :64, :64].copy()
    corner[1, 2, 3, 4] = np.nan
    return Example(f"({cycles}, 4, {side}, {side}) float32", (stack,),
                   checks=(("a NaN in a 64x64 corner", (corner,)), ("one cycle", (stack[:1, :, :64, :64],))))
