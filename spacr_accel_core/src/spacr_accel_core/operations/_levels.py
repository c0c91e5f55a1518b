"""The levels family's parts of the operation table: what a backend's order statistics and level sets
must look like, when two answers agree, how each plugin is called, and the inputs they are tried on.

Both answers are exact on every backend (an order statistic is an element of the field; a level set
is one division and two comparisons per pixel), so agreement is bit for bit, the sign of zero
included, NaN where the reference has NaN.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._results import Example


def check_order_statistics(result: Any, expected: tuple[int, int, np.dtype[Any]]) -> str | None:
    """``(F, R)`` values in the stack's dtype."""
    fields, ranks, dtype = expected
    if type(result) is np.ndarray and result.dtype == dtype and result.shape == (fields, ranks):
        return None
    return (f"returned {getattr(result, 'dtype', type(result).__name__)}{list(getattr(result, 'shape', ()))}, "
            f"expected {dtype}{[fields, ranks]}")


def check_rescaled(result: Any, expected: tuple[tuple[int, ...], np.dtype[Any]]) -> str | None:
    """A new array of the stack's shape in the bounds' dtype."""
    shape, dtype = expected
    if type(result) is np.ndarray and result.dtype == dtype and result.shape == shape:
        return None
    return (f"returned {getattr(result, 'dtype', type(result).__name__)}{list(getattr(result, 'shape', ()))}, "
            f"expected {dtype}{list(shape)}")


def agree_levels(expected: Any, got: Any) -> tuple[bool, str]:
    """The same dtype and shape, and the same bits (NaN where the reference has NaN, of any payload)."""
    want, have = np.asarray(expected), np.asarray(got)
    if want.shape != have.shape or want.dtype != have.dtype:
        return False, f"got {have.dtype}{list(have.shape)}, the reference gave {want.dtype}{list(want.shape)}"
    if want.dtype.kind != "f":
        wrong = int(np.count_nonzero(want != have))
    else:
        bits = np.dtype(f"u{want.dtype.itemsize}")
        same = (want.view(bits) == have.view(bits)) | (np.isnan(want) & np.isnan(have))
        wrong = int(same.size - np.count_nonzero(same))
    return wrong == 0, "bit-identical" if wrong == 0 else f"{wrong} of {want.size} values differ"


def _camera_stack(quick: bool, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """spaCR's channel stack: 11 cycles x 4 channels of 1480 x 1480 float32 (quick: 4 of 512 x 512),
    a noisy background with bright spots and a saturated corner (ties)."""
    planes, side = (4, 512) if quick else (44, 1480)
    stack = (100.0 + 10.0 * rng.standard_normal((planes, side, side), dtype=np.float32)).astype(np.float32)
    spots = rng.integers(0, side, size=(planes, side * 2, 2))
    for plane in range(planes):
        stack[plane, spots[plane, :, 0], spots[plane, :, 1]] += np.float32(1500.0)
    stack[:, : side // 16, : side // 16] = np.float32(4095.0)
    return stack, f"{planes} x {side}x{side} float32"


def small_percentiles() -> Example:
    return Example("a 3x4 ramp, q 0, 30, 90", (np.arange(12, dtype=np.float32).reshape(3, 4), [0.0, 30.0, 90.0]))


def bench_percentiles(quick: bool, rng: np.random.Generator) -> Example:
    stack, words = _camera_stack(quick, rng)
    corner = stack[0, :64, :64].copy()
    corner[3, 5] = np.nan
    return Example(f"{words}, q 0 and 90", (stack, [0.0, 90.0]),
                   checks=(("a 64x64 corner holding NaN", (corner, [0.0, 90.0])),))


def small_rescale() -> Example:
    stack = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    return Example("2 fields of 3x4, scaled by 2 and 1, clipped to [1, 4] and [3, 30]",
                   (stack, np.array([2, 1], np.float32), np.array([1, 3], np.float32), np.array([4, 30], np.float32)))


def bench_rescale(quick: bool, rng: np.random.Generator) -> Example:
    stack, words = _camera_stack(quick, rng)
    low, high = stack.min(axis=(1, 2)).astype(np.float64), np.full(stack.shape[0], 140.0)
    return Example(f"{words} clipped to float64 bounds", (stack, 1.0, low, high))
