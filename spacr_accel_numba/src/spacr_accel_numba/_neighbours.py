"""The neighbours family on numba: the exact ``k`` nearest within a distance, and Hamming.

Which search serves a call is chosen here, by the metric, ``k`` and the points' width
(:mod:`._widths`); the compiled loops and their drivers live in :mod:`._neighbours_kernels` (it
imports numba), loaded by the hook once the kernel it needs is ready: the plugin imports this
module, and its import stays as cheap as the hook alone. Until a kernel is ready its calls decline
(:mod:`._warm`) and the NumPy floor answers them with the same bits.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from spacr_accel_core import BackendDeclined, hookimpl
from spacr_accel_core.toolkit import distances

from . import _warm
from ._widths import DIMENSIONS, WIDE


@hookimpl
def spacr_accel_nearest_neighbours(source: np.ndarray, target: np.ndarray, chunk: int, k: int,
                                   max_distance: float | None, metric: str) -> tuple[np.ndarray, np.ndarray]:
    if metric == "hamming":
        _warm.require("science:hamming")  # declines while the warm-up compiles it
        from ._neighbours_kernels import hamming_nearest

        index, distance = hamming_nearest(source, target, k, max_distance)
    elif k == 1 and max_distance is None:  # the per-tile case: the k = 1 grid and the wide search
        index, squared = nearest_squared(source, target, _warm.require)
        return index, distances(squared)
    else:
        _warm.require("science:knearest")
        from ._neighbours_kernels import k_nearest

        index, distance = k_nearest(source, target, k, max_distance)
    return (index[:, 0].copy(), distance[:, 0].copy()) if k == 1 else (index, distance)


def nearest_squared(source: np.ndarray, target: np.ndarray,
                    require: Callable[[str], None]) -> tuple[np.ndarray, np.ndarray]:
    """Nearest targets and float64 squared distances by the method for the width: the grid up to
    :data:`DIMENSIONS` coordinates, the matrix search from :data:`WIDE`; a tree's range between is
    declined (the NumPy floor answers it). ``require`` gets the kernel ready (declining while it
    compiles, for dispatch; waiting, for :func:`spacr_accel_numba.nearest`)."""
    width = source.shape[1]
    if width >= WIDE:
        require("nearest:wide")
        from ._neighbours_kernels import wide_nearest

        return wide_nearest(source, target)
    if width > DIMENSIONS:
        raise BackendDeclined(f"the grid takes at most {DIMENSIONS} coordinates and the matrix search pays "
                              f"from {WIDE}; {width} go to a tree")
    require("nearest")
    from ._neighbours_kernels import grid_nearest

    return grid_nearest(np.ascontiguousarray(source, dtype=np.float64), np.ascontiguousarray(target, dtype=np.float64))
