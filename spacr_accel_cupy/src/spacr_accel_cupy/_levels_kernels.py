"""The levels family against the array-library kit: order statistics by a sort of each field on the
card (an exact permutation: the element at each rank is the field's own), and the level set's
divide and clip as elementwise operations in the bounds' dtype, NumPy's clip rule written out.

Imported by the hooks of :mod:`._levels` at their first call.
"""

from __future__ import annotations

import numpy as np

from ._kit import Kit
from ._runtime import tiled


def order_statistics(kit: Kit, stack: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """``(F, R)`` in the stack's dtype: the ranks of each field, NaN for a field holding NaN (a sort
    puts NaN last)."""
    xp = kit.xp
    count = stack.shape[1] * stack.shape[2]
    flat = np.ascontiguousarray(stack).reshape(stack.shape[0], count)
    out = np.empty((stack.shape[0], ranks.size), dtype=stack.dtype)
    wanted = kit.to_device(ranks)
    fields = max(1, kit.budget() // (3 * stack.dtype.itemsize * count))

    def step(start: int, stop: int) -> None:
        ordered = xp.sort(kit.to_device(flat[start:stop]), axis=1)
        values = ordered[:, wanted]
        last = ordered[:, -1:]
        out[start:stop] = kit.to_host(xp.where(xp.isnan(last), last, values))

    tiled(stack.shape[0], fields, 1, step, kit, "percentiles")
    return out


def rescale_fields(kit: Kit, stack: np.ndarray, scale: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Each field cast to the bounds' dtype, divided by its scale and clipped: ``y`` kept where it is
    NaN or ``>= low`` (else ``low``), then kept where NaN or ``<= high`` (else ``high``): a NaN bound
    replaces every pixel that is not NaN already, as NumPy's clip gives it."""
    xp = kit.xp
    dtype = low.dtype
    out = np.empty(stack.shape, dtype=dtype)
    fields = max(1, kit.budget() // (4 * dtype.itemsize * stack.shape[1] * stack.shape[2]))

    def step(start: int, stop: int) -> None:
        y = kit.to_device(stack[start:stop]).astype(dtype)
        lo, hi = (kit.to_device(bound[start:stop]).reshape(-1, 1, 1) for bound in (low, high))
        y = y / kit.to_device(scale[start:stop]).reshape(-1, 1, 1)
        y = xp.where(xp.isnan(y) | (y >= lo), y, lo)
        out[start:stop] = kit.to_host(xp.where(xp.isnan(y) | (y <= hi), y, hi))

    tiled(stack.shape[0], fields, 1, step, kit, "rescale_fields")
    return out
