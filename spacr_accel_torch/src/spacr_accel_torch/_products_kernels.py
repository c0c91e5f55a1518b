"""The products family's torch code: the matrix product, tiled over the rows, on any device torch
drives. Imported by the hook of :mod:`._products` at its first call (the plugin imports that module,
and its import stays as cheap as the hook alone).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from spacr_accel_core.toolkit import EXACT_IN_FLOAT32

from ._runtime import Device, budget, ieee_float32, tensor, tiled

if TYPE_CHECKING:
    import torch

__all__ = ["matmul"]

_F32 = np.dtype(np.float32)


def _compute_dtype(first: np.ndarray, second: np.ndarray, device: Device) -> np.dtype:
    """float32 where float32 holds the inputs exactly or the device refuses doubles, else float64.

    Wider inputs (int32, int64, float64) are multiplied in float64 and rounded once, like the
    NumPy backend, on a device that accepts doubles; Metal never receives one: they are rounded
    to float32 on the host first, the best that device can do.
    """
    if first.dtype in EXACT_IN_FLOAT32 and second.dtype in EXACT_IN_FLOAT32:
        return _F32
    return np.dtype(np.float64) if device.float64 else _F32


def _product(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.matmul(first, second)


def matmul(first: np.ndarray, second: np.ndarray, device: Device) -> np.ndarray:
    """``first @ second`` with NumPy's shape rules, as float32, tiled over the rows of ``first``.

    THE UNMIXING SHAPE: a tall matrix times a tiny one is a copy to the card, a trivial kernel
    and a copy back; tiles bound the device memory, and on the CPU the tensors alias the arrays.

    :param first: non-empty real array, at least 1-D.
    :param second: the same, shape-compatible.
    :param device: where to compute.
    :returns: the float32 product (0-d for two vectors), from IEEE float32 (or float64) products
        even where the process allowed TF32 or bfloat16 (see :func:`._runtime.ieee_float32`).
    """
    with ieee_float32():
        return _matmul(first, second, device)


def _matmul(first: np.ndarray, second: np.ndarray, device: Device) -> np.ndarray:
    import torch

    dtype = _compute_dtype(first, second, device)
    left = np.ascontiguousarray(first, dtype=dtype)
    right = np.ascontiguousarray(second, dtype=dtype)
    right_t = tensor(right, device.torch)
    if left.ndim == 1:
        result = _product(tensor(left, device.torch), right_t)
        # A fresh tensor (never a view of the operands), so handing out its memory is safe.
        return result.to("cpu", torch.float32).numpy()
    batch_shape = np.broadcast_shapes(left.shape[:-2], right.shape[:-2])
    shape = (*batch_shape, left.shape[-2], right.shape[-1]) if right.ndim >= 2 else (*batch_shape, left.shape[-2])
    out = np.empty(shape, dtype=_F32)
    rows = left.shape[-2]
    batch = int(np.prod(shape[:-2] if right.ndim >= 2 else shape[:-1]))
    per_row = (left.shape[-1] + 2 * (right.shape[-1] if right.ndim >= 2 else 1)) * dtype.itemsize * batch
    tile = rows if device.is_cpu else max(1, budget(device) // max(1, per_row))

    def step(start: int, stop: int) -> None:
        part = tensor(left[..., start:stop, :], device.torch)
        product = _product(part, right_t)
        rows_out = out[..., start:stop, :] if right.ndim >= 2 else out[..., start:stop]
        torch.from_numpy(rows_out).copy_(product)  # device to host straight into the result

    tiled(rows, tile, 1, step, device, "matmul")
    return out
