"""The points family's references: spaCR's read attribution and its inlier counts, read by read and
set by set, by SciPy's own KD-tree (imported when a reference is called).
"""

from __future__ import annotations

import numpy as np


def attribute_reads(peaks: object, centroids: object, areas: object, *, footprint: float = 10.0,
                    tie: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """spaCR's ``attribute_reads``, read by read: the objects within ``max(radius) + footprint`` of a
    read by SciPy's KD-tree ball query, each one's gap ``np.hypot(dy, dx) - radius`` in float64, a
    stable sort; no owner beyond ``footprint``, ambiguous when the two smallest gaps differ by less
    than ``tie``."""
    from scipy.spatial import cKDTree

    points = np.asarray(peaks, dtype=float).reshape(-1, 2)
    centres = np.asarray(centroids, dtype=float).reshape(-1, 2)
    radius = np.sqrt(np.maximum(np.asarray(areas, dtype=float).reshape(-1), 0.0) / np.pi)
    owner = np.full(points.shape[0], -1, dtype=np.int64)
    ambiguous = np.zeros(points.shape[0], dtype=bool)
    if points.shape[0] == 0 or centres.shape[0] == 0:
        return owner, ambiguous
    reach = float(radius.max()) + float(footprint)
    for index, found in enumerate(cKDTree(centres).query_ball_point(points, r=reach)):
        if not found:
            continue
        near = np.asarray(found, dtype=np.int64)
        gap = np.hypot(centres[near, 0] - points[index, 0], centres[near, 1] - points[index, 1]) - radius[near]
        order = np.argsort(gap, kind="stable")
        if gap[order[0]] > footprint:
            continue
        if order.size > 1 and gap[order[1]] - gap[order[0]] < tie:
            ambiguous[index] = True
            continue
        owner[index] = int(near[order[0]])
    return owner, ambiguous


def count_within(moved: object, target: object, radius: float) -> np.ndarray:
    """spaCR's inlier count of each moved set: ``np.sum(cKDTree(target).query(points)[0] <= radius)``."""
    from scipy.spatial import cKDTree

    sets = np.asarray(moved, dtype=np.float64)
    tree = cKDTree(np.asarray(target, dtype=np.float64).reshape(-1, 2))
    lead = sets.shape[:-2]
    out = np.zeros(lead, dtype=np.int64)
    for index in np.ndindex(*lead):
        if sets[index].shape[0]:
            out[index] = int(np.sum(tree.query(sets[index])[0] <= radius))
    return out
