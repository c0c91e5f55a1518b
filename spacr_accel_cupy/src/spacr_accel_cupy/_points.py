"""The point operations on cupy: declined, for reasons of exactness, not of speed.

READ ATTRIBUTION. spaCR's gap is ``np.hypot(dy, dx) - radius``, C's ``hypot`` to the last bit,
and the gaps decide both the owner and the tie. CUDA's ``hypot`` need not round as C's does, and
one differing last bit changes an owner wherever two gaps tie. Without a ``hypot`` of the same
bits on the device, the NumPy floor and numba answer.

THE MERGE'S INLIER COUNTS. Exact on a card in float64 (a sum of two squares against a squared
bound), but a brute force over every pair does not beat numba's grid for spaCR's sizes (600 moved
nuclei, 3,000 targets, batches of 256 candidates), and the toolkit's grid (which torch gathers on
its device) is not yet written against CuPy's kit: declined until it is.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import BackendDeclined

__all__ = ["attribute_reads", "count_within"]


def attribute_reads(peaks: np.ndarray, centroids: np.ndarray, radius: np.ndarray, footprint: float,
                    tie: float) -> tuple[np.ndarray, np.ndarray]:
    """Declined: see the module."""
    raise BackendDeclined("spaCR's read gaps are C's hypot to the last bit, which cupy's hypot does not "
                          "reproduce (an owner changes where two gaps tie); the CPU backends answer")


def count_within(moved: np.ndarray, target: np.ndarray, limit: float) -> np.ndarray:
    """Declined: see the module."""
    raise BackendDeclined("cupy has no grid search for the merge's inlier counts; numba's grid (or the "
                          "NumPy floor) answers them")
