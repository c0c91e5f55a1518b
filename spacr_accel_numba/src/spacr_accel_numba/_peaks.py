"""The peaks family on numba: local maxima as coordinates in one compiled pass, and each point's
window maximum in every field of a stack.

The compiled loops and their drivers live in :mod:`._peaks_kernels` (it imports numba), loaded by
each hook once the kernel it needs is ready: the plugin imports this module, and its import stays
as cheap as the hooks alone. Until a kernel is ready its calls decline (:mod:`._warm`) and the
NumPy floor answers them with the same bits.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from . import _warm


@hookimpl
def spacr_accel_local_maxima(field: np.ndarray, size: int, threshold: np.float32 | None) -> np.ndarray:
    _warm.require("science:peaks")
    from ._peaks_kernels import local_maxima

    return local_maxima(field, size, threshold)


@hookimpl
def spacr_accel_window_maxima(stack: np.ndarray, points: np.ndarray, size: int) -> np.ndarray:
    _warm.require("science:decode")  # declines while the warm-up compiles it (with registration's loops)
    from ._peaks_kernels import window_maxima

    return window_maxima(stack, points, size)
