"""The products family against a :class:`~._kit.Kit` (CuPy on the card, NumPy in the tests).

``matmul``: float32 where float32 holds the inputs exactly (like the NumPy backend), float64 on the
card otherwise (every CUDA device takes doubles), rounded once; tiled over the rows of ``first``
from the memory free now (:func:`._runtime.tiled`). Run with CuPy's default (IEEE) compute type even
where ``CUPY_TF32=1`` made float32 products TF32. Imported by the hook of :mod:`._products` at its
first call.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core.toolkit import EXACT_IN_FLOAT32

from ._kit import Kit
from ._runtime import tiled

__all__ = ["matmul"]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def matmul(kit: Kit, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """``first @ second`` with NumPy's shape rules, as float32, tiled over the rows of ``first``.

    :param kit: the library to run on.
    :param first: non-empty real array, at least 1-D.
    :param second: the same, shape-compatible.
    :returns: the float32 product (0-d for two vectors).
    """
    with kit.ieee():
        return _matmul(kit, first, second)


def _matmul(kit: Kit, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    xp = kit.xp
    exact = first.dtype in EXACT_IN_FLOAT32 and second.dtype in EXACT_IN_FLOAT32
    dtype = _F32 if exact else _F64
    left = np.ascontiguousarray(first, dtype=dtype)
    right = kit.to_device(np.ascontiguousarray(second, dtype=dtype))
    if left.ndim == 1:
        product = xp.matmul(kit.to_device(left), right).astype(xp.float32)
        return np.asarray(kit.to_host(product), dtype=_F32)
    batch = np.broadcast_shapes(left.shape[:-2], second.shape[:-2])
    matrix_right = second.ndim >= 2
    shape = (*batch, left.shape[-2], second.shape[-1]) if matrix_right else (*batch, left.shape[-2])
    out = np.empty(shape, dtype=_F32)
    rows = left.shape[-2]
    per_row = (left.shape[-1] + 2 * (second.shape[-1] if matrix_right else 1)) * dtype.itemsize
    per_row *= max(1, int(np.prod(batch)))
    tile = max(1, kit.budget() // max(1, per_row))

    def step(start: int, stop: int) -> None:
        part = kit.to_device(np.ascontiguousarray(left[..., start:stop, :]))
        product = kit.to_host(xp.matmul(part, right).astype(xp.float32))
        if matrix_right:
            out[..., start:stop, :] = product
        else:
            out[..., start:stop] = product

    tiled(rows, tile, 1, step, kit, "matmul")
    return out
