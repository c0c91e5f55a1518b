"""The point operations on the floor: read attribution by SciPy's own tree (the toolkit's, shared
with numba's deferred reads), and the merge's inlier counts by SciPy's own nearest-neighbour query.

WHY SCIPY'S TREE IS THE ANSWER HERE. Both operations are defined as spaCR computes them with
``cKDTree``: the same tree on the same points gives the same candidate sets and the same float64
distances, so the floor is exact by construction and its only saving is spaCR's loop in Python.

Imported by the hooks of :mod:`._points` at their first call.
"""

from __future__ import annotations

import math

import numpy as np

from spacr_accel_core.toolkit import attribute_by_tree, cpu_threads

__all__ = ["attribute_reads", "count_within"]

_POINTS_PER_QUERY = 1 << 20
"""Moved points asked of the tree at once: bounds the distances' buffer (8 MiB)."""


def attribute_reads(peaks: np.ndarray, centroids: np.ndarray, radius: np.ndarray, footprint: float,
                    tie: float) -> tuple[np.ndarray, np.ndarray]:
    """spaCR's owners and flags, from its own ball query of every read at once."""
    return attribute_by_tree(peaks, centroids, radius, footprint, tie)


def count_within(moved: np.ndarray, target: np.ndarray, limit: float) -> np.ndarray:
    """Per set, the points whose nearest target's squared distance is within ``limit``.

    The tree returns ``sqrt(s)`` of the nearest sum ``s``; ``s <= limit`` exactly when ``sqrt(s) <=
    sqrt(limit)`` (both roots correctly rounded, the root monotonic, ``limit`` the largest sum whose
    root is within the radius). The tree is bounded a little above that root, so a point with
    nothing near stops early; what it finds inside the bound is the exact nearest.
    """
    from scipy.spatial import cKDTree

    sets, points = moved.shape[:2]
    if math.isinf(limit):
        return np.full(sets, points, dtype=np.int64)
    root = math.sqrt(limit)
    tree = cKDTree(target)
    flat = moved.reshape(-1, 2)
    hits = np.empty(flat.shape[0], dtype=bool)
    for start in range(0, flat.shape[0], _POINTS_PER_QUERY):
        part = flat[start:start + _POINTS_PER_QUERY]
        found, _ = tree.query(part, k=1, distance_upper_bound=root * (1.0 + 2.0**-20) + 2.0**-500,
                              workers=cpu_threads())
        hits[start:start + part.shape[0]] = found <= root
    counts: np.ndarray = np.count_nonzero(hits.reshape(sets, points), axis=1).astype(np.int64)
    return counts
