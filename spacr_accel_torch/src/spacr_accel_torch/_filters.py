"""The filters family on torch: the window maximum (a stack in one call, only on a device's
batch of fields), its minimum by negation, and SciPy's Gaussian passes as float64 elementwise
operations.

The torch code lives in :mod:`._filters_kernels`, imported by each hook at its first call: the plugin
imports this module, and its import stays as cheap as the hooks alone (torch and the runtime load
only when a call runs).
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from ._on_device import run


@hookimpl
def spacr_accel_maximum_filter(field: np.ndarray, size: int) -> np.ndarray:
    from ._filters_kernels import maximum_filter_stack

    return run("maximum_filter", maximum_filter_stack, field, size)


@hookimpl
def spacr_accel_minimum_filter(field: np.ndarray, size: int) -> np.ndarray:
    from ._filters_kernels import minimum

    return run("minimum_filter", minimum, field, size)


@hookimpl
def spacr_accel_gaussian_filter(field: np.ndarray, sigma: tuple[float, float], truncate: float,
                                mode: str) -> np.ndarray:
    from ._filters_kernels import gaussian

    return run("gaussian_filter", gaussian, field, sigma, truncate, mode, False)


@hookimpl
def spacr_accel_gaussian_laplace(field: np.ndarray, sigma: tuple[float, float], truncate: float,
                                 mode: str) -> np.ndarray:
    from ._filters_kernels import gaussian

    return run("gaussian_laplace", gaussian, field, sigma, truncate, mode, True)
