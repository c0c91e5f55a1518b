"""The points family on the floor: read attribution and the inlier counts by SciPy's own tree.

The arithmetic lives in :mod:`._points_kernels`, imported by each hook at its first call: the plugin
imports this module, and its import stays as cheap as the hooks alone.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl


@hookimpl
def spacr_accel_attribute_reads(peaks: np.ndarray, centroids: np.ndarray, radius: np.ndarray, footprint: float,
                                tie: float) -> tuple[np.ndarray, np.ndarray]:
    from ._points_kernels import attribute_reads

    return attribute_reads(peaks, centroids, radius, footprint, tie)


@hookimpl
def spacr_accel_count_within(moved: np.ndarray, target: np.ndarray, limit: float) -> np.ndarray:
    from ._points_kernels import count_within

    return count_within(moved, target, limit)
