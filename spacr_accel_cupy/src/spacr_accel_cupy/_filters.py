"""The filters family on the card: the window maximum and minimum of a field or of every field of a
stack in one call, and SciPy's Gaussian and its Laplacian as float64 elementwise passes.

The primitives live in :mod:`._filters_kernels` (written against the kit), imported by each hook at
its first call: the plugin imports this module, and its import stays as cheap as the hooks alone.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from ._runtime import run


@hookimpl
def spacr_accel_maximum_filter(field: np.ndarray, size: int) -> np.ndarray:
    from ._filters_kernels import maximum_filter_stack

    return run("maximum_filter", maximum_filter_stack, field, size)


@hookimpl
def spacr_accel_minimum_filter(field: np.ndarray, size: int) -> np.ndarray:
    from ._filters_kernels import minimum_filter

    return run("minimum_filter", minimum_filter, field, size)


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
