"""The neighbours family on torch: one neighbour, ``k`` within a distance, and Hamming, each exact and
equal to the NumPy backend's.

The torch code (the search that serves a call, and each search) lives in
:mod:`._neighbours_kernels`, imported by the hook at its first call: the plugin imports this module,
and its import stays as cheap as the hook alone.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from ._on_device import run


@hookimpl
def spacr_accel_nearest_neighbours(source: np.ndarray, target: np.ndarray, chunk: int, k: int,
                                   max_distance: float | None, metric: str) -> tuple[np.ndarray, np.ndarray]:
    from ._neighbours_kernels import nearest_neighbours

    return run("nearest_neighbours", nearest_neighbours, source, target, chunk, k, max_distance, metric)
