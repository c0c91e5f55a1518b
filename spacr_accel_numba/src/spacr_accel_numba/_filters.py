"""The filters family on numba: the window maximum and minimum, the Gaussian and its Laplacian.

The compiled loops and the drivers that share them between threads live in :mod:`._filters_kernels`
(it imports numba), loaded by each hook once the kernel it needs is ready: the plugin imports this
module, and its import stays as cheap as the hooks alone. Until a kernel is ready its calls decline
(:mod:`._warm`) and the NumPy floor answers them with the same bits.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from spacr_accel_core import BackendDeclined, hookimpl

from . import _warm

_FILTERED = frozenset(np.dtype(name) for name in _warm.FIELD_DTYPES)


@hookimpl
def spacr_accel_maximum_filter(field: np.ndarray, size: int) -> np.ndarray:
    return filtered(field, size, _warm.require)


def filtered(field: np.ndarray, size: int, require: Callable[[str], None]) -> np.ndarray:
    """The filter on the kernel compiled for ``field``'s dtype (``require`` gets it ready: declining
    while it compiles, for dispatch; waiting, for :func:`spacr_accel_numba.window_maximum`)."""
    dtype = field.dtype
    if dtype not in _FILTERED:
        raise BackendDeclined(f"the filter is compiled for {', '.join(_warm.FIELD_DTYPES)}, not {dtype}")
    require(f"filter:{dtype}")
    return _window_maximum()(field, size)


@functools.cache
def _window_maximum() -> Callable[[np.ndarray, int], np.ndarray]:
    """The compiled window maximum's driver, imported once its kernel is ready: the filter is the
    family's most frequent call, and an import statement would cost each call half a microsecond."""
    from ._filters_kernels import window_maximum

    return window_maximum


@hookimpl
def spacr_accel_minimum_filter(field: np.ndarray, size: int, out: np.ndarray | None) -> np.ndarray:
    _warm.require("science:smooth")
    from ._filters_kernels import minimum

    return minimum(field, size, out)


@hookimpl
def spacr_accel_gaussian_filter(field: np.ndarray, sigma: tuple[float, float], out: np.ndarray | None,
                                truncate: float, mode: str) -> np.ndarray:
    _warm.require("science:smooth")
    from ._filters_kernels import gaussian

    return gaussian(field, sigma, out, truncate, mode, laplace=False)


@hookimpl
def spacr_accel_gaussian_laplace(field: np.ndarray, sigma: tuple[float, float], out: np.ndarray | None,
                                 truncate: float, mode: str) -> np.ndarray:
    _warm.require("science:smooth")
    from ._filters_kernels import gaussian

    return gaussian(field, sigma, out, truncate, mode, laplace=True)
