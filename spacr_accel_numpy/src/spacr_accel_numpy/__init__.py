"""spacr-accel's NumPy backend: the floor that always runs.

Exact and fast on one CPU: a separable log-doubling windowed maximum (13x scipy.ndimage on a
4096 x 4096 field), a KD-tree or matrix-product nearest-neighbour search with an exact re-check,
and NumPy's own ``@``. Registered under the ``spacr_accel`` entry point ``numpy``.
"""

from __future__ import annotations

from spacr_accel_core.toolkit import exact_squared  # re-exported: it moved to the core, for every backend

from ._filters import window_maximum
from ._neighbours import nearest

__all__ = ["exact_squared", "nearest", "window_maximum"]
