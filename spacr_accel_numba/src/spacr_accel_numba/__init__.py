"""spacr-accel's numba backend: compiled CPU loops that repeat the NumPy floor's answers, faster.

A van Herk/Gil-Werman windowed maximum (float32, and uint8/uint16 camera fields in their own
dtype), a uniform-grid exact nearest-neighbour search for 1 to 3 coordinates, and for 16 and more
a float32 GEMM whose candidates are settled in cache; all threaded, all bit-identical to the floor.
Registered under the ``spacr_accel`` entry point ``numba`` (priority 120: above the floor, below
the GPU backends). The kernels compile in the background on
first use and are cached on disk; until they are ready the floor answers (:func:`warm` waits).
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from spacr_accel_core import BackendDeclined

from ._filter import window_maximum as _window_maximum
from ._grid import DIMENSIONS as _DIMENSIONS
from ._grid import search as _search
from ._warm import failure, warm
from ._wide import WIDE as _WIDE
from ._wide import search as _search_wide

__all__ = ["failure", "nearest", "warm", "window_maximum"]


def window_maximum(field: np.ndarray, size: int) -> np.ndarray:
    """The compiled windowed maximum, waiting for its kernel (see :func:`warm`).

    :param field: non-empty 2-D float32, uint8 or uint16.
    :param size: odd window edge, at least 3.
    :returns: a new float32 array (zeros are ``+0.0``).
    :raises RuntimeError: numba cannot compile here, or the window is too tall for the kernel.
    """
    return _window_maximum(_ready(f"filter:{np.dtype(field.dtype)}"), field, size)


def nearest(source: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest targets (lowest index on ties) and float64 squared distances, waiting for the kernel.

    :param source: float32 or float64 ``(N, D)``, finite, with ``D <= 3`` (the grid) or ``D >= 16``
        (the matrix search).
    :param target: likewise ``(M, D)``, ``M >= 1``.
    :raises RuntimeError: numba cannot compile here, the grid declines these points, or D is
        between 4 and 15 (a tree's range: the NumPy floor's).
    """
    if source.shape[1] >= _WIDE:
        return _search_wide(_ready("nearest:wide"), source, target)
    if source.shape[1] > _DIMENSIONS:
        raise BackendDeclined(f"{source.shape[1]} coordinates: neither the grid (at most {_DIMENSIONS}) nor "
                              f"the matrix search (from {_WIDE})")
    kernels = _ready("nearest")
    return _search(kernels, np.ascontiguousarray(source, np.float64), np.ascontiguousarray(target, np.float64))


def _ready(name: str) -> ModuleType:
    from . import _warm as state

    state.warm()
    return state.kernels_for(name)
