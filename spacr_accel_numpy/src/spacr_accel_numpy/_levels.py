"""The levels family on the floor: order statistics by ``np.partition``, level sets by NumPy's own
division and clip.

The arithmetic lives in :mod:`._levels_kernels`, imported by each hook at its first call: the plugin
imports this module, and its import stays as cheap as the hooks alone.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl


@hookimpl
def spacr_accel_percentiles(stack: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    from ._levels_kernels import order_statistics

    return order_statistics(stack, ranks)


@hookimpl
def spacr_accel_rescale_fields(stack: np.ndarray, scale: np.ndarray, low: np.ndarray,
                               high: np.ndarray) -> np.ndarray:
    from ._levels_kernels import rescale_fields

    return rescale_fields(stack, scale, low, high)
