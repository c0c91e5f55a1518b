"""The NumPy backend's hookimpls: the floor that always runs, fast and exact."""

from __future__ import annotations

import numpy as np

from spacr_accel_core import BackendInfo, hookimpl
from spacr_accel_core.exact import EXACT_IN_FLOAT32, integer_matmul

from ._filter import window_maximum
from ._nearest import nearest

SPACR_ACCEL_API_VERSION = 1
PRIORITY = 100.0
"""Lowest of the three shipped backends: everything else is tried first, this always answers."""

_F32 = np.dtype(np.float32)

SPACR_ACCEL_BACKEND = BackendInfo(name="numpy", priority=PRIORITY, accelerated=False)
"""What this plugin is, read by the core without a call."""

SPACR_ACCEL_FIELD_DTYPES = ("uint8", "int8", "uint16", "int16")
"""Camera fields the filter takes in their own dtype (:data:`._filter.NARROW`): the core passes
them unconverted instead of casting them to float32 first."""


@hookimpl
def spacr_accel_backend_info() -> BackendInfo:
    return BackendInfo(name="numpy", priority=PRIORITY, accelerated=False, usable=True,
                       note="NumPy and SciPy on the CPU")


@hookimpl
def spacr_accel_maximum_filter(field: np.ndarray, size: int) -> np.ndarray:
    return window_maximum(field, size)


@hookimpl
def spacr_accel_matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    if first.dtype is _F32 and second.dtype is _F32:  # the per-tile case, first and cheap
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
    return product if type(product) is np.ndarray else np.asarray(product, dtype=_F32)


@hookimpl
def spacr_accel_nearest_neighbours(source: np.ndarray, target: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    return nearest(source, target, chunk)
