"""The levels family on numba: a float32 field's order statistics by radix selection on its bits,
and the level set's divide and clip in threaded bands.

The compiled loops and their drivers live in :mod:`._levels_kernels` (it imports numba), loaded by
each hook once the kernel is ready: the plugin imports this module, and its import stays as cheap
as the hooks alone. Until the kernel is ready its calls decline (:mod:`._warm`) and the NumPy floor
answers them with the same bits.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from . import _warm


@hookimpl
def spacr_accel_percentiles(stack: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    _warm.require("science:levels")  # declines while the warm-up compiles it
    from ._levels_kernels import order_statistics

    return order_statistics(stack, ranks)


@hookimpl
def spacr_accel_rescale_fields(stack: np.ndarray, scale: np.ndarray, low: np.ndarray,
                               high: np.ndarray) -> np.ndarray:
    _warm.require("science:levels")
    from ._levels_kernels import rescale_fields

    return rescale_fields(stack, scale, low, high)
