"""The numba backend's hookimpls: the CPU's fastest exact filter and low-dimensional search.

WHAT IT IS, WITHOUT IMPORTING NUMBA. :data:`SPACR_ACCEL_PLUGIN` is read when the plugin loads;
:func:`spacr_accel_backend_info` only looks for numba on the path (``import numba`` costs ~0.5 s,
which discovery must not pay). A kernel numba's cache holds for this code is loaded by the first
call that needs it; the others are compiled in the background from the first call on
(:mod:`._warm`), and until such a kernel is ready its calls decline and the NumPy floor answers them.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from types import ModuleType
from typing import Final

import numpy as np

from spacr_accel_core import BackendDeclined, BackendInfo, Declaration, WarmState, hookimpl
from spacr_accel_core.toolkit import distances, install_command

from . import _compiler, _warm
from ._filter import window_maximum
from ._grid import DIMENSIONS, search
from ._wide import WIDE
from ._wide import search as search_wide

NAME: Final = "numba"
PRIORITY: Final = 120.0
"""Above the NumPy floor (100), whose answers it repeats bit for bit, faster; below every
accelerated backend (CuPy 200, torch 300): a usable GPU still wins."""

SPACR_ACCEL_PLUGIN: Final = Declaration(
    name=NAME, priority=PRIORITY, accelerated=False,
    # Camera fields filtered in their own dtype (the ones the filter is compiled for: uint8,
    # uint16); the core casts an int8 or int16 field to float32 for this plugin.
    field_dtypes=tuple(name for name in _warm.FIELD_DTYPES if name != "float32"),
    # The kernel writes ``maximum + 0.0`` (a float field) or the exact cast of an integer, so a
    # maximum of zero is ``+0.0`` already, and the core skips its own ``+0.0`` pass.
    positive_zeros=True,
    # local_maxima and the decode filters take a stack (..., H, W) in one threaded pass; the core
    # hands maximum_filter one field at a time.
    stacks=frozenset({"local_maxima", "minimum_filter", "gaussian_filter", "gaussian_laplace"}),
    settings=(_compiler.COMPILE, _compiler.KERNELS),
)
"""What this plugin is, read by the core without a call."""

_FILTERED = frozenset(np.dtype(name) for name in _warm.FIELD_DTYPES)


@hookimpl
def spacr_accel_backend_info() -> BackendInfo:
    """Usable where numba is installed; looked for, not imported (that is the warm-up's to do)."""
    if importlib.util.find_spec("numba") is None:
        return BackendInfo(usable=False,
                           note=f"numba is not installed; `{install_command('numba')}`")
    if _warm.failure() is not None:
        return BackendInfo(usable=False, note=f"numba could not compile here ({_warm.failure()})")
    return BackendInfo(usable=True, note="numba-compiled loops on the CPU (compiled in the background on first use)")


@hookimpl
def spacr_accel_warm_up(timeout: float) -> bool:
    """Compile (or load from numba's cache) every kernel now, waiting at most ``timeout`` seconds."""
    return _warm.warm(timeout)


@hookimpl
def spacr_accel_warm_state() -> WarmState:
    """Kernels cached of all, and whether a compiler runs now (read from the cache folder alone)."""
    return _warm.state()


@hookimpl
def spacr_accel_maximum_filter(field: np.ndarray, size: int) -> np.ndarray:
    return filtered(field, size, _warm.kernels_for)


@hookimpl
def spacr_accel_nearest_neighbours(source: np.ndarray, target: np.ndarray, chunk: int, k: int,
                                   max_distance: float | None, metric: str) -> tuple[np.ndarray, np.ndarray]:
    if metric == "hamming":
        from ._hamming import hamming_nearest

        _warm.kernels_for("science:hamming")  # declines while the warm-up compiles it
        index, distance = hamming_nearest(source, target, k, max_distance)
    elif k == 1 and max_distance is None:  # the per-tile case: the k = 1 grid and the wide search
        index, squared = nearest_squared(source, target, _warm.kernels_for)
        return index, distances(squared)
    else:
        from ._knearest import k_nearest

        _warm.kernels_for("science:knearest")
        index, distance = k_nearest(source, target, k, max_distance)
    return (index[:, 0].copy(), distance[:, 0].copy()) if k == 1 else (index, distance)


@hookimpl
def spacr_accel_local_maxima(field: np.ndarray, size: int, threshold: np.float32 | None) -> np.ndarray:
    from ._peaks import local_maxima

    _warm.kernels_for("science:peaks")
    return local_maxima(field, size, threshold)


@hookimpl
def spacr_accel_window_maxima(stack: np.ndarray, points: np.ndarray, size: int) -> np.ndarray:
    from ._decode import kernels, window_maxima

    _warm.kernels_for("science:decode")  # declines while the warm-up compiles it
    return window_maxima(kernels(), stack, points, size)


@hookimpl
def spacr_accel_phase_correlate(first: np.ndarray, second: np.ndarray,
                                pairing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from ._decode import kernels, phase_correlate

    _warm.kernels_for("science:decode")
    return phase_correlate(kernels(), first, second, pairing)


def filtered(field: np.ndarray, size: int, kernels_for: Callable[[str], ModuleType]) -> np.ndarray:
    """The filter on the kernel compiled for ``field``'s dtype (``kernels_for`` gets it: declining
    while it compiles, for dispatch; waiting, for :func:`spacr_accel_numba.window_maximum`)."""
    dtype = field.dtype
    if dtype not in _FILTERED:
        raise BackendDeclined(f"the filter is compiled for {', '.join(_warm.FIELD_DTYPES)}, not {dtype}")
    return window_maximum(kernels_for(f"filter:{dtype}"), field, size)


def nearest_squared(source: np.ndarray, target: np.ndarray,
                    kernels_for: Callable[[str], ModuleType]) -> tuple[np.ndarray, np.ndarray]:
    """Nearest targets and float64 squared distances by the method for the width: the grid up to
    :data:`DIMENSIONS` coordinates, the matrix search from :data:`WIDE`; a tree's range between is
    declined (the NumPy floor answers it)."""
    width = source.shape[1]
    if width >= WIDE:
        return search_wide(kernels_for("nearest:wide"), source, target)
    if width > DIMENSIONS:
        raise BackendDeclined(f"the grid takes at most {DIMENSIONS} coordinates and the matrix search pays "
                              f"from {WIDE}; {width} go to a tree")
    return search(kernels_for("nearest"), np.ascontiguousarray(source, dtype=np.float64),
                  np.ascontiguousarray(target, dtype=np.float64))


# ---- the decode chain's filters -------------------------------------------------------------------


@hookimpl
def spacr_accel_minimum_filter(field: np.ndarray, size: int, out: np.ndarray | None) -> np.ndarray:
    from ._smooth import minimum

    _warm.kernels_for("science:smooth")
    return minimum(field, size, out)


@hookimpl
def spacr_accel_gaussian_filter(field: np.ndarray, sigma: tuple[float, float], out: np.ndarray | None,
                                truncate: float, mode: str) -> np.ndarray:
    from ._smooth import gaussian

    _warm.kernels_for("science:smooth")
    return gaussian(field, sigma, out, truncate, mode, laplace=False)


@hookimpl
def spacr_accel_gaussian_laplace(field: np.ndarray, sigma: tuple[float, float], out: np.ndarray | None,
                                 truncate: float, mode: str) -> np.ndarray:
    from ._smooth import gaussian

    _warm.kernels_for("science:smooth")
    return gaussian(field, sigma, out, truncate, mode, laplace=True)


# ---- the point operations: read attribution, the merge's inlier counts ----------------------------


@hookimpl
def spacr_accel_attribute_reads(peaks: np.ndarray, centroids: np.ndarray, radius: np.ndarray, footprint: float,
                                tie: float) -> tuple[np.ndarray, np.ndarray]:
    from ._points import attribute_reads, kernels

    _warm.kernels_for("science:points")
    return attribute_reads(kernels(), peaks, centroids, radius, footprint, tie)


@hookimpl
def spacr_accel_count_within(moved: np.ndarray, target: np.ndarray, limit: float) -> np.ndarray:
    from ._points import count_within, kernels

    _warm.kernels_for("science:points")
    return count_within(kernels(), moved, target, limit)


@hookimpl
def spacr_accel_spot_score(stack: np.ndarray) -> np.ndarray:
    from ._planes import kernels, spot_score

    _warm.kernels_for("science:planes")  # declines while the warm-up compiles it
    return spot_score(kernels(), stack)


# ---- the levels family (percentiles, clip and scale) -------------------------------------------


@hookimpl
def spacr_accel_percentiles(stack: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    from ._levels import kernels, order_statistics

    _warm.kernels_for("science:levels")  # declines while the warm-up compiles it
    return order_statistics(kernels(), stack, ranks)


@hookimpl
def spacr_accel_rescale_fields(stack: np.ndarray, scale: np.ndarray, low: np.ndarray,
                               high: np.ndarray) -> np.ndarray:
    from ._levels import kernels, rescale_fields

    _warm.kernels_for("science:levels")
    return rescale_fields(kernels(), stack, scale, low, high)
