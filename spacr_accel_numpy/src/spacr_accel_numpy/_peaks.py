"""The peaks family on the floor: local maxima on the floor's windowed maximum, and the window
maxima at given points by gathering.

WHY COORDINATES. A caller of a peak finder wants the few thousand peaks, not the 64 MiB filtered
field it would compare and search itself; :func:`local_maxima` compares each field with its
filtered copy (:func:`._filters.maximum_filter_stack`) as soon as it is made and keeps only the
coordinates.

The window maxima's gathering lives in :mod:`._peaks_kernels`, imported by its hook at the first
call: the plugin imports this module, and its import stays as cheap as the hooks alone.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from spacr_accel_core import hookimpl

from ._filters import NARROW, maximum_filter_stack


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


def local_maxima(field: np.ndarray, size: int, threshold: float | np.floating[Any] | None = None) -> np.ndarray:
    """The coordinates of the pixels equal to their window's maximum and above ``threshold``.

    :param field: ``(..., H, W)`` as :func:`._filters.maximum_filter_stack` takes.
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


# ---- the family's hooks ---------------------------------------------------------------------------


@hookimpl
def spacr_accel_local_maxima(field: np.ndarray, size: int, threshold: np.float32 | None) -> np.ndarray:
    return local_maxima(field, size, None if threshold is None else float(threshold))


@hookimpl
def spacr_accel_window_maxima(stack: np.ndarray, points: np.ndarray, size: int) -> np.ndarray:
    from ._peaks_kernels import window_maxima

    return window_maxima(stack, points, size)
