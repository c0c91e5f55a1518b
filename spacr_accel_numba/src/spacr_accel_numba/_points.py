"""The points family on numba: read attribution and the merge's inlier counts on a uniform grid,
threaded.

The compiled loops and their drivers live in :mod:`._points_kernels` (it imports numba), loaded by
each hook once the kernel is ready: the plugin imports this module, and its import stays as cheap
as the hooks alone. Until the kernel is ready its calls decline (:mod:`._warm`) and the NumPy floor
answers them with the same answers.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from . import _warm


@hookimpl
def spacr_accel_attribute_reads(peaks: np.ndarray, centroids: np.ndarray, radius: np.ndarray, footprint: float,
                                tie: float) -> tuple[np.ndarray, np.ndarray]:
    _warm.require("science:points")
    from ._points_kernels import attribute_reads

    return attribute_reads(peaks, centroids, radius, footprint, tie)


@hookimpl
def spacr_accel_count_within(moved: np.ndarray, target: np.ndarray, limit: float) -> np.ndarray:
    _warm.require("science:points")
    from ._points_kernels import count_within

    return count_within(moved, target, limit)
