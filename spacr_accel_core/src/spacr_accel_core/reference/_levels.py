"""The levels family's references: NumPy's own ``np.percentile`` on each field of a stack, one call
per field, and NumPy's own divide and ``np.clip`` of each field by its own scalars.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_WIDE = frozenset(np.dtype(kind) for kind in (np.float64, np.int32, np.uint32, np.int64, np.uint64))
"""The dtypes whose values float32 cannot hold exactly: a stack of them, or a NumPy scale or bound of
them, makes NumPy divide and clip in float64."""


def percentiles(stack: object, q: Any) -> object:
    """NumPy's own ``np.percentile(field, q)`` on each 2-D field of a stack, one call per field: the
    definition (``(..., len(q))`` for a sequence, ``(...)`` for one percentile, a NumPy scalar for
    one 2-D field and one percentile)."""
    data = np.asarray(stack)
    if data.ndim == 2:
        return np.percentile(data, q)
    rows = [np.asarray(np.percentile(data[index], q)) for index in np.ndindex(*data.shape[:-2])]
    probe = np.asarray(np.percentile(np.zeros(1, data.dtype), q))  # the shape and dtype of one field's answer
    out = np.stack(rows) if rows else np.empty((0, *probe.shape), probe.dtype)
    return out.reshape(*data.shape[:-2], *probe.shape)


def rescale_fields(stack: object, scale: object, low: object, high: object) -> np.ndarray:
    """``np.clip(field / scale, low, high)`` field by field, each field with its own NumPy scalars:
    in float64 where the stack, or a NumPy value among ``scale``, ``low`` and ``high``, is float64 or
    an integer of 32 or 64 bits, and in float32 otherwise (a Python number is weak, NEP 50: it takes
    the field's dtype)."""
    data = np.asarray(stack)
    strong = (np.asarray(value).dtype for value in (scale, low, high) if type(value) not in (int, float))
    wide = data.dtype in _WIDE or any(dtype in _WIDE for dtype in strong)
    kind: type[np.floating[Any]] = np.float64 if wide else np.float32
    scales, lows, highs = (np.broadcast_to(np.asarray(value), data.shape[:-2]) for value in (scale, low, high))
    out = np.empty(data.shape, dtype=kind)
    for index in np.ndindex(*data.shape[:-2]):
        with np.errstate(all="ignore"):
            out[index] = np.clip(np.asarray(data[index], dtype=kind) / kind(scales[index]), kind(lows[index]),
                                 kind(highs[index]))
    return out
