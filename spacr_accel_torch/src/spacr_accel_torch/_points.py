"""The points family on torch: read attribution's candidate pairs in float64 on the device, and the
inlier counts on the toolkit's grid.

The torch code lives in :mod:`._points_kernels`, imported by each hook at its first call: the plugin
imports this module, and its import stays as cheap as the hooks alone.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from ._on_device import run


@hookimpl
def spacr_accel_attribute_reads(peaks: np.ndarray, centroids: np.ndarray, radius: np.ndarray, footprint: float,
                                tie: float) -> tuple[np.ndarray, np.ndarray]:
    from ._points_kernels import attribute_reads

    return run("attribute_reads", attribute_reads, peaks, centroids, radius, footprint, tie)


@hookimpl
def spacr_accel_count_within(moved: np.ndarray, target: np.ndarray, limit: float) -> np.ndarray:
    from ._points_kernels import count_within

    return run("count_within", count_within, moved, target, limit)
