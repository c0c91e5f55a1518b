"""The NumPy backend's hookimpls: the floor that always runs, fast and exact."""

from __future__ import annotations

import numpy as np

from spacr_accel_core import Declaration, hookimpl
from spacr_accel_core.toolkit import EXACT_IN_FLOAT32, integer_matmul, k_nearest

from ._filter import window_maximum
from ._hamming import hamming_nearest
from ._nearest import nearest
from ._peaks import local_maxima, maximum_filter_stack
from ._smooth import gaussian_stack

PRIORITY = 100.0
"""Lowest of the shipped backends; and ``try_last``: everything else is tried first, this always answers."""

_F32 = np.dtype(np.float32)

SPACR_ACCEL_PLUGIN = Declaration(
    name="numpy", priority=PRIORITY, accelerated=False, try_last=True,
    # Camera fields the filter takes in their own dtype (:data:`._filter.NARROW`).
    field_dtypes=("uint8", "int8", "uint16", "int16"),
    # A stack is filtered field by field in one threaded pass (:func:`._peaks.maximum_filter_stack`).
    stacks=True,
)
"""What this plugin is, read by the core without a call. It needs no usability answer: NumPy and
SciPy are its own dependencies, so it always runs."""


@hookimpl
def spacr_accel_maximum_filter(field: np.ndarray, size: int, out: np.ndarray | None) -> np.ndarray:
    if field.ndim == 2 and out is None:
        return window_maximum(field, size)
    return maximum_filter_stack(field, size, out)


@hookimpl
def spacr_accel_local_maxima(field: np.ndarray, size: int, threshold: np.float32 | None) -> np.ndarray:
    return local_maxima(field, size, None if threshold is None else float(threshold))


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
def spacr_accel_nearest_neighbours(source: np.ndarray, target: np.ndarray, chunk: int, k: int,
                                   max_distance: float | None, metric: str) -> tuple[np.ndarray, np.ndarray]:
    if metric == "hamming":
        index, distance = hamming_nearest(source, target, k, max_distance)
    elif k == 1 and max_distance is None:
        return nearest(source, target, chunk)  # the per-tile case: the floor's own k=1 search
    else:
        index, distance = k_nearest(source, target, k, max_distance, chunk)
    return (index[:, 0].copy(), distance[:, 0].copy()) if k == 1 else (index, distance)


# ---- the decode chain's filters -------------------------------------------------------------------


@hookimpl
def spacr_accel_minimum_filter(field: np.ndarray, size: int, out: np.ndarray | None) -> np.ndarray:
    return maximum_filter_stack(field, size, out, np.minimum)


@hookimpl
def spacr_accel_gaussian_filter(field: np.ndarray, sigma: tuple[float, float], out: np.ndarray | None,
                                truncate: float, mode: str) -> np.ndarray:
    return gaussian_stack(field, sigma, out, truncate, mode, laplace=False)


@hookimpl
def spacr_accel_gaussian_laplace(field: np.ndarray, sigma: tuple[float, float], out: np.ndarray | None,
                                 truncate: float, mode: str) -> np.ndarray:
    return gaussian_stack(field, sigma, out, truncate, mode, laplace=True)


@hookimpl
def spacr_accel_window_maxima(stack: np.ndarray, points: np.ndarray, size: int) -> np.ndarray:
    from ._decode import window_maxima

    return window_maxima(stack, points, size)


@hookimpl
def spacr_accel_phase_correlate(first: np.ndarray, second: np.ndarray,
                                pairing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from ._decode import phase_correlate

    return phase_correlate(first, second, pairing)


@hookimpl
def spacr_accel_translate(stack: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    from ._planes import translate

    return translate(stack, shifts)


@hookimpl
def spacr_accel_spot_score(stack: np.ndarray) -> np.ndarray:
    from ._planes import spot_score

    return spot_score(stack)


@hookimpl
def spacr_accel_attribute_reads(peaks: np.ndarray, centroids: np.ndarray, radius: np.ndarray, footprint: float,
                                tie: float) -> tuple[np.ndarray, np.ndarray]:
    from ._points import attribute_reads

    return attribute_reads(peaks, centroids, radius, footprint, tie)


@hookimpl
def spacr_accel_count_within(moved: np.ndarray, target: np.ndarray, limit: float) -> np.ndarray:
    from ._points import count_within

    return count_within(moved, target, limit)


# ---- the levels family (percentiles, clip and scale) -------------------------------------------


@hookimpl
def spacr_accel_percentiles(stack: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    from ._levels import order_statistics

    return order_statistics(stack, ranks)


@hookimpl
def spacr_accel_rescale_fields(stack: np.ndarray, scale: np.ndarray, low: np.ndarray,
                               high: np.ndarray) -> np.ndarray:
    from ._levels import rescale_fields

    return rescale_fields(stack, scale, low, high)
