"""spacr-accel's numba backend: compiled CPU loops that repeat the NumPy floor's answers, faster.

A van Herk/Gil-Werman windowed maximum (float32, and uint8/uint16 camera fields in their own
dtype), a uniform-grid exact nearest-neighbour search for 1 to 3 coordinates, and for 16 and more
a float32 GEMM whose candidates are settled in cache; all threaded, all bit-identical to the floor.
Registered under the ``spacr_accel`` entry point ``numba`` (priority 120: above the floor, below
the GPU backends). The kernels compile in the background on
first use and are cached on disk; until they are ready the floor answers (:func:`warm` waits).
"""

from __future__ import annotations

import numpy as np

from ._filters import filtered
from ._neighbours import nearest_squared
from ._warm import failure, require, warm

__all__ = ["failure", "nearest", "warm", "window_maximum"]


def window_maximum(field: np.ndarray, size: int) -> np.ndarray:
    """The compiled windowed maximum, waiting for its kernel (see :func:`warm`).

    :param field: non-empty 2-D float32, uint8 or uint16.
    :param size: odd window edge, at least 3.
    :returns: a new float32 array (zeros are ``+0.0``).
    :raises RuntimeError: numba cannot compile here, another dtype, or a window too tall for the kernel.
    """
    return filtered(field, size, _ready)


def nearest(source: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest targets (lowest index on ties) and float64 squared distances, waiting for the kernel.

    :param source: float32 or float64 ``(N, D)``, finite, with ``D <= 3`` (the grid) or ``D >= 16``
        (the matrix search).
    :param target: likewise ``(M, D)``, ``M >= 1``.
    :raises RuntimeError: numba cannot compile here, the grid declines these points, or D is
        between 4 and 15 (a tree's range: the NumPy floor's).
    """
    return nearest_squared(source, target, _ready)


def _ready(name: str) -> None:
    """Return once every kernel is compiled (or raise the reason they cannot be)."""
    warm()
    require(name)
