"""The levels family on torch: order statistics by a sort of each field on the device (an exact
permutation: the element at each rank is the field's own), and the level set's divide and clip as
elementwise operations in the bounds' dtype, NumPy's clip rule written out. A device without
float64 (Metal) declines a float64 field or level set.

Imported by the hooks of :mod:`._levels` at their first call (the plugin imports that module,
and its import stays as cheap as the hooks alone).
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import BackendDeclined

from ._runtime import Device, budget, tensor, tiled


def _needs_float64(device: Device, *dtypes: np.dtype) -> None:
    if not device.float64 and any(dtype == np.float64 for dtype in dtypes):
        raise BackendDeclined("this device has no float64, in which these fields or bounds are kept exactly")


def order_statistics(stack: np.ndarray, ranks: np.ndarray, device: Device) -> np.ndarray:
    """``(F, R)`` in the stack's dtype: the ranks of each field, NaN for a field holding NaN (torch's
    sort puts NaN last)."""
    import torch

    _needs_float64(device, stack.dtype)
    count = stack.shape[1] * stack.shape[2]
    flat = np.ascontiguousarray(stack).reshape(stack.shape[0], count)
    out = np.empty((stack.shape[0], ranks.size), dtype=stack.dtype)
    wanted = tensor(ranks, device.torch)
    fields = max(1, budget(device) // (3 * stack.dtype.itemsize * count))

    def step(start: int, stop: int) -> None:
        ordered = torch.sort(tensor(flat[start:stop], device.torch), dim=1).values
        last = ordered[:, -1:]
        values = torch.where(torch.isnan(last), last, ordered[:, wanted])
        torch.from_numpy(out[start:stop]).copy_(values)

    tiled(stack.shape[0], fields, 1, step, device, "percentiles")
    return out


def rescale_fields(stack: np.ndarray, scale: np.ndarray, low: np.ndarray, high: np.ndarray,
                   device: Device) -> np.ndarray:
    """Each field cast to the bounds' dtype, divided by its scale and clipped as NumPy clips."""
    import torch

    _needs_float64(device, stack.dtype, low.dtype)
    out = np.empty(stack.shape, dtype=low.dtype)
    kind = torch.float64 if low.dtype == np.float64 else torch.float32
    fields = max(1, budget(device) // (4 * low.dtype.itemsize * stack.shape[1] * stack.shape[2]))

    def step(start: int, stop: int) -> None:
        y = tensor(stack[start:stop], device.torch).to(kind)
        lo, hi, by = (tensor(value[start:stop], device.torch).reshape(-1, 1, 1) for value in (low, high, scale))
        y = y / by
        y = torch.where(torch.isnan(y) | (y >= lo), y, lo)
        torch.from_numpy(out[start:stop]).copy_(torch.where(torch.isnan(y) | (y <= hi), y, hi))

    tiled(stack.shape[0], fields, 1, step, device, "rescale_fields")
    return out
