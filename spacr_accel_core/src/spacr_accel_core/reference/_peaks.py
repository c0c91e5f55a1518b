"""The peaks family's references: the local maxima of a field or a stack, and the window maxima of a
stack at points.

A local maximum is a pixel equal to its window's maximum, the window maximum being the filters
family's own (:func:`~spacr_accel_core.reference.maximum_filter`, the edge repeated): one
definition of the windowed maximum, read field by field.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ._filters import maximum_filter


def _size(size: object) -> int:
    """The window edge as an odd int (even raised, as the contract's maximum_filter does)."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise TypeError(f"size must be an integer, not {type(size).__name__}")
    edge = operator.index(size)
    if edge < 1:
        raise ValueError(f"size must be at least 1, not {size}")
    return edge + 1 if edge % 2 == 0 else edge


def local_maxima(field: object, size: int, threshold: float | None = None) -> np.ndarray:
    """The coordinates of the pixels equal to their window's maximum (and above ``threshold``), plainly.

    Each 2-D field of a stack is filtered on its own (edge padding per field), so a window never
    reaches into the neighbouring field; the comparison is ``pixel == window maximum``, which a NaN
    never passes, and ``pixel > threshold``, made exactly in float64.

    :param field: ``(..., H, W)`` numbers, taken as float32 (the contract's maximum_filter casts so).
        A stack of fields (a plate, the cycles of a screen) is answered in one call.
    :param size: the window edge, at least 1 (even raised to the next odd; 1 makes every non-NaN
        pixel a maximum).
    :param threshold: only pixels greater than it; ``None``: every maximum. Rejects the flat
        background, where every pixel of a constant region equals its window's maximum.
    :returns: int64 ``(P, field.ndim)`` coordinates in row-major order.
    :raises ValueError: fewer than 2 dimensions, a NaN threshold.
    :raises TypeError: a non-numeric field or size.
    """
    data = np.asarray(field)
    if data.ndim < 2:
        raise ValueError(f"field must have at least 2 dimensions (..., H, W), not {data.ndim}")
    if data.dtype.kind not in "biuf":
        raise TypeError(f"field must hold numbers, not {data.dtype}")
    edge = _size(size)
    if threshold is not None and math.isnan(float(threshold)):
        raise ValueError("threshold must be a number, not NaN (no pixel would ever pass it)")
    values = data.astype(np.float32)
    flat = values.reshape((-1, *values.shape[-2:]))
    peak = np.empty(flat.shape, dtype=bool)
    for number, plane in enumerate(flat):
        peak[number] = plane == maximum_filter(plane, edge)
    if threshold is not None:
        peak &= values.reshape(flat.shape).astype(np.float64) > float(threshold)
    return np.argwhere(peak.reshape(values.shape)).astype(np.int64, copy=False)


def window_maxima(stack: object, points: object, size: int) -> np.ndarray:
    """float32 ``(N, *stack.shape[:-2])``: each point's window maximum in every field, one window at a time."""
    data = np.asarray(stack).astype(np.float32)
    rows = np.asarray(points, dtype=np.int64).reshape(-1, 2)
    radius = _size(size) // 2
    height, width = data.shape[-2:]
    out = np.empty((rows.shape[0], *data.shape[:-2]), dtype=np.float32)
    for n, (y, x) in enumerate(rows):
        top, bottom = max(0, y - radius), min(height, y + radius + 1)
        window = data[..., top:bottom, max(0, x - radius):min(width, x + radius + 1)]
        best = window.max(axis=(-2, -1))  # NumPy's max propagates NaN: the NaN rule
        out[n] = best + np.float32(0.0)
    return out
