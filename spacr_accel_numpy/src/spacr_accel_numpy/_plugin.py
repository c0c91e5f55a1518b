"""The NumPy backend's hookimpls: the floor that always runs, fast and exact."""

from __future__ import annotations

import numpy as np

from spacr_accel_core import Declaration, hookimpl
from spacr_accel_core.exact import EXACT_IN_FLOAT32, integer_matmul

from ._filter import window_maximum
from ._nearest import nearest

PRIORITY = 100.0
"""Lowest of the shipped backends; and ``try_last``: everything else is tried first, this always answers."""

_F32 = np.dtype(np.float32)

SPACR_ACCEL_PLUGIN = Declaration(
    name="numpy", priority=PRIORITY, accelerated=False, try_last=True,
    # Camera fields the filter takes in their own dtype (:data:`._filter.NARROW`).
    field_dtypes=("uint8", "int8", "uint16", "int16"),
)
"""What this plugin is, read by the core without a call. It needs no usability answer: NumPy and
SciPy are its own dependencies, so it always runs."""


@hookimpl
def spacr_accel_maximum_filter(field: np.ndarray, size: int) -> np.ndarray:
    return window_maximum(field, size)


@hookimpl
def spacr_accel_matmul(first: np.ndarray, second: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    if first.dtype is _F32 and second.dtype is _F32:  # the per-tile case, first and cheap
        if out is not None:  # into the caller's buffer: no fresh result's page faults
            return np.matmul(first, second, out=out)
        product = np.matmul(first, second)
    elif first.dtype in EXACT_IN_FLOAT32 and second.dtype in EXACT_IN_FLOAT32:
        product = np.matmul(first if first.dtype == _F32 else first.astype(_F32),
                            second if second.dtype == _F32 else second.astype(_F32))
    elif first.dtype.kind in "biu" and second.dtype.kind in "biu":
        product = integer_matmul(first, second)  # the exact integer product, rounded once
    else:
        product = np.matmul(first.astype(np.float64, copy=False),
                            second.astype(np.float64, copy=False)).astype(_F32)
    # Two vectors give a NumPy scalar; the contract is always an array.
    product = product if type(product) is np.ndarray else np.asarray(product, dtype=_F32)
    if out is not None:
        out[...] = product
        return out
    return product


@hookimpl
def spacr_accel_nearest_neighbours(source: np.ndarray, target: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    return nearest(source, target, chunk)
