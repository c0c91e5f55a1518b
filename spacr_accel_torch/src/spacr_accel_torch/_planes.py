"""The planes family on torch: the translation as byte copies on the device, the spot score in NumPy's
float32 order.

The torch code lives in :mod:`._planes_kernels`, imported by each hook at its first call: the plugin
imports this module, and its import stays as cheap as the hooks alone.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from ._on_device import run


@hookimpl
def spacr_accel_translate(stack: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    from ._planes_kernels import translate

    return run("translate", translate, stack, shifts)


@hookimpl
def spacr_accel_spot_score(stack: np.ndarray) -> np.ndarray:
    from ._planes_kernels import spot_score

    return run("spot_score", spot_score, stack)
