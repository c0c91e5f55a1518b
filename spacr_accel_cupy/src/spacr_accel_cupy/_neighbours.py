"""The neighbours family on the card: one nearest neighbour, the ``k`` nearest within a distance, and
Hamming, each nominated by a matrix product and settled exactly.

The primitives live in :mod:`._neighbours_kernels` (written against the kit), imported by the hook
at its first call: the plugin imports this module, and its import stays as cheap as the hook alone.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from ._runtime import run


@hookimpl
def spacr_accel_nearest_neighbours(source: np.ndarray, target: np.ndarray, chunk: int, k: int,
                                   max_distance: float | None, metric: str) -> tuple[np.ndarray, np.ndarray]:
    from ._neighbours_kernels import nearest_neighbours

    return run("nearest_neighbours", nearest_neighbours, source, target, chunk, k, max_distance, metric)
