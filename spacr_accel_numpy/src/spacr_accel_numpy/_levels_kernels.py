"""The levels family's arithmetic on the floor: order statistics by ``np.partition``, level sets by
NumPy's own division and clip, field by field into one result.

Imported by the hooks of :mod:`._levels` at their first call.
"""

from __future__ import annotations

import numpy as np


def order_statistics(stack: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """``(F, R)``: the ``ranks``-th smallest pixels of each field of an ``(F, H, W)`` stack.

    One copy of the stack partitioned along its pixels (the partition is destructive, and the
    caller's stack is read-only), the last rank asked for too: after the partition a field that
    holds NaN has one at its end, and its whole row is that NaN.
    """
    count = stack.shape[1] * stack.shape[2]
    work = stack.reshape(stack.shape[0], count).copy()
    work.partition(np.unique(np.append(ranks, count - 1)), axis=1)
    values: np.ndarray = work[:, ranks]
    if stack.dtype.kind == "f":
        holding = np.isnan(work[:, -1])
        values[holding] = work[holding, -1:]
    return values


def rescale_fields(stack: np.ndarray, scale: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Each field divided by its scale (in the bounds' dtype) and clipped by ``np.clip`` itself."""
    out = np.empty(stack.shape, dtype=low.dtype)
    with np.errstate(all="ignore"):
        for field in range(stack.shape[0]):
            if scale[field] == 1:
                np.copyto(out[field], stack[field])  # x / 1 is x: the division is skipped, exactly
            else:
                np.divide(stack[field], scale[field], out=out[field], dtype=low.dtype)
            np.clip(out[field], low[field], high[field], out=out[field])
    return out
