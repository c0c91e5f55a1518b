"""The levels family on torch: order statistics by a sort of each field on the device, the level
set's divide and clip as elementwise operations.

The torch code lives in :mod:`._levels_kernels`, imported by each hook at its first call: the plugin
imports this module, and its import stays as cheap as the hooks alone.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from ._on_device import run


@hookimpl
def spacr_accel_percentiles(stack: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    from ._levels_kernels import order_statistics

    return run("percentiles", order_statistics, stack, ranks)


@hookimpl
def spacr_accel_rescale_fields(stack: np.ndarray, scale: np.ndarray, low: np.ndarray,
                               high: np.ndarray) -> np.ndarray:
    from ._levels_kernels import rescale_fields

    return run("rescale_fields", rescale_fields, stack, scale, low, high)
