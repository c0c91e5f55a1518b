"""Stacks of fields and their local maxima on the NumPy floor's windowed maximum.

WHY STACKS. A plate (or the cycles of a screen) is dozens of 512 x 512 fields; one call per field
pays the dispatch each time, and a field that small is filtered by one thread. Here every field of
a stack is filtered on its own (the window never crosses into the next field) by
:mod:`._filter`'s stripes, the fields shared between the threads, into one result.

WHY COORDINATES. A caller of a peak finder wants the few thousand peaks, not the 64 MiB filtered
field it would compare and search itself; :func:`local_maxima` compares each field with its
filtered copy as soon as it is made and keeps only the coordinates.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from spacr_accel_core.toolkit import run_parts

from ._filter import _MIN_THREADED_PIXELS, _STRIPE_BYTES, _WORKERS, NARROW, _stripes

_log = logging.getLogger(__name__)


def odd_size(size: int) -> int:
    """The window edge the contract filters with: an even ``size`` raised to the next odd."""
    return size + 1 if size % 2 == 0 else size


def float32_floor(threshold: float) -> np.float32:
    """The largest float32 at or below ``threshold``: for any float32 ``x``, ``x > threshold``
    exactly when ``x > float32_floor(threshold)``, so a float32 field is compared without a float64
    copy (NumPy would round a Python float threshold to NEAREST, and 0.1f would fail ``> 0.1``).
    """
    with np.errstate(over="ignore"):  # beyond float32's range: inf, then stepped down below
        value = np.float32(threshold)
    if float(value) > threshold:
        value = np.nextafter(value, np.float32(-np.inf))
    return np.float32(value)


def _plan(shape: tuple[int, int], size: int, itemsize: int) -> tuple[tuple[int, int], int]:
    """``(radii, stripe)`` for one field, as :func:`._filter.window_maximum` cuts it."""
    height, width = shape
    radii = (min(size // 2, height - 1), min(size // 2, width - 1))
    stripe = min(height, max(2 * radii[0] + 1, _STRIPE_BYTES // (itemsize * (width + 2 * radii[1] + 1))))
    return radii, stripe


def _filter_fields(fields: np.ndarray, out: np.ndarray, size: int, first: int, step: int,
                   pick: np.ufunc = np.maximum) -> None:
    """Filter fields ``first, first + step, ...`` of a ``(F, H, W)`` stack into ``out``, one thread."""
    radii, stripe = _plan(fields.shape[1:], size, fields.dtype.itemsize)
    for number in range(first, fields.shape[0], step):
        _stripes(fields[number], out[number], radii, stripe, 0, 1, pick)


def _filter_one(field: np.ndarray, out: np.ndarray, size: int, pick: np.ufunc = np.maximum) -> None:
    """Filter one 2-D field into ``out``, its stripes shared between the threads."""
    radii, stripe = _plan(field.shape, size, field.dtype.itemsize)
    count = -(-field.shape[0] // stripe)
    workers = 1 if field.size < _MIN_THREADED_PIXELS else min(count, _WORKERS)
    run_parts(_stripes, [(field, out, radii, stripe, first, workers, pick) for first in range(workers)])


def maximum_filter_stack(fields: np.ndarray, size: int, out: np.ndarray | None = None,
                         pick: np.ufunc = np.maximum) -> np.ndarray:
    """The windowed maximum of every 2-D field of a ``(..., H, W)`` stack, each on its own, as float32.

    :param fields: ``(..., H, W)`` float32 or one of the floor's narrow camera dtypes (filtered in
        their own dtype, cast once on the last pass); other dtypes are cast to float32 first.
    :param size: the window edge, at least 1 (even raised to odd; 1 copies).
    :param out: a float32 C-contiguous array of the stack's shape to write into (a caller filtering
        the same shape again and again skips a fresh result's page faults); checked by the caller.
    :param pick: ``np.maximum``, or ``np.minimum`` for the windowed minimum.
    :returns: ``out``, or a new float32 array. A maximum of zero may be ``-0.0`` where the field
        holds one (as :func:`._filter.window_maximum`: the core adds ``+0.0`` to the result).
    """
    if fields.dtype != np.float32 and fields.dtype not in NARROW:
        fields = fields.astype(np.float32)
    result = np.empty(fields.shape, dtype=np.float32) if out is None else out
    if fields.size == 0:
        return result
    size = odd_size(size)
    if size <= 1:
        np.copyto(result, fields, casting="unsafe")
        result += np.float32(0.0)  # the contract's sign of zero: a maximum of zero is +0.0
        return result
    stack = np.ascontiguousarray(fields).reshape((-1, *fields.shape[-2:]))
    into = result.reshape(stack.shape)
    if stack.shape[0] == 1 or stack[0].size >= _MIN_THREADED_PIXELS:
        for number in range(stack.shape[0]):
            _filter_one(stack[number], into[number], size, pick)
    else:  # small fields: whole fields per thread, no hand-off per stripe
        workers = min(stack.shape[0], _WORKERS)
        run_parts(_filter_fields, [(stack, into, size, first, workers, pick) for first in range(workers)])
    return result


def local_maxima(field: np.ndarray, size: int, threshold: float | np.floating[Any] | None = None) -> np.ndarray:
    """The coordinates of the pixels equal to their window's maximum and above ``threshold``.

    :param field: ``(..., H, W)`` as :func:`maximum_filter_stack` takes.
    :param size: the window edge, at least 1 (even raised to odd).
    :param threshold: only pixels greater than it (compared exactly); ``None``: every maximum. A
        NaN pixel is never a maximum (it equals nothing), nor is a pixel whose window holds one.
    :returns: int64 ``(P, field.ndim)`` coordinates in row-major order.
    """
    if field.dtype != np.float32 and field.dtype not in NARROW:
        field = field.astype(np.float32)
    if field.size == 0:
        return np.empty((0, field.ndim), dtype=np.int64)
    top = maximum_filter_stack(field, size)
    peak = field == top
    if threshold is not None:
        if math.isnan(threshold):
            return np.empty((0, field.ndim), dtype=np.int64)
        peak &= field > float32_floor(float(threshold))
    flat = np.flatnonzero(peak)
    return np.stack(np.unravel_index(flat, field.shape), axis=1).astype(np.int64, copy=False)
