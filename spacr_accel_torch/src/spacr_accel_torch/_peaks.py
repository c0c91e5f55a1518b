"""The peaks family on torch: local maxima (only the coordinates leave the device) and window
maxima gathered on the device.

The torch code lives in :mod:`._peaks_kernels`, imported by each hook at its first call: the plugin
imports this module, and its import stays as cheap as the hooks alone.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from ._on_device import run


@hookimpl
def spacr_accel_local_maxima(field: np.ndarray, size: int, threshold: np.float32 | None) -> np.ndarray:
    from ._peaks_kernels import local_maxima_stack

    return run("local_maxima", local_maxima_stack, field, size, threshold)


@hookimpl
def spacr_accel_window_maxima(stack: np.ndarray, points: np.ndarray, size: int) -> np.ndarray:
    from ._peaks_kernels import window_maxima

    return run("window_maxima", window_maxima, stack, points, size)
