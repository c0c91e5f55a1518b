"""The peaks family on the card: local maxima with only their coordinates copied back, and the
window maxima at given points gathered on the card.

The primitives live in :mod:`._peaks_kernels` (written against the kit), imported by each hook at
its first call: the plugin imports this module, and its import stays as cheap as the hooks alone.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from ._runtime import run


@hookimpl
def spacr_accel_local_maxima(field: np.ndarray, size: int, threshold: np.float32 | None) -> np.ndarray:
    from ._peaks_kernels import local_maxima

    return run("local_maxima", local_maxima, field, size, threshold)


@hookimpl
def spacr_accel_window_maxima(stack: np.ndarray, points: np.ndarray, size: int) -> np.ndarray:
    from ._peaks_kernels import window_maxima

    return run("window_maxima", window_maxima, stack, points, size)
