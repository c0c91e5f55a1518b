"""The landmarks family's references: a field's peaks spaced as scikit-image's ``peak_local_max``
spaces them, and spaCR's triangle consensus, one triangle and one match at a time (SciPy's own
``Delaunay`` and KD-tree, imported when a reference is called).
"""

from __future__ import annotations

import math

import numpy as np


def spaced_peaks(field: object, points: object, min_distance: int) -> np.ndarray:
    """The points walked brightest first, each kept unless a point already kept lies nearer than
    ``min_distance`` in both rows and columns, plainly.

    The points within ``min_distance`` of the field's edge are dropped first; the rest are ranked by
    their value in the float32 field, brightest first, equal values in the order given (Python's
    sort is stable); the walk compares each with every point kept before it.

    :param field: a 2-D field, read as float32.
    :param points: ``(P, 2)`` integer ``(y, x)`` rows inside the field.
    :param min_distance: at least 1: the border's width and the spacing.
    :returns: int64 ``(N, 2)`` peaks in the order kept.
    """
    values = np.asarray(field, dtype=np.float32)
    rows = np.asarray(points, dtype=np.int64).reshape(-1, 2)
    spacing = int(min_distance)
    height, width = values.shape
    inside = [(int(y), int(x)) for y, x in rows.tolist()
              if spacing <= y < height - spacing and spacing <= x < width - spacing]
    ranked = sorted(inside, key=lambda point: -float(values[point]))
    kept: list[tuple[int, int]] = []
    for y, x in ranked:
        if all(max(abs(y - ky), abs(x - kx)) >= spacing for ky, kx in kept):
            kept.append((y, x))
    return np.array(kept, dtype=np.int64).reshape(-1, 2)


def _described(coords: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """spaCR's ``triangle_descriptors``: each Delaunay triangle's two shorter sides over its longest,
    its vertices ordered by the side opposite each (a triangle with no positive side: zeros)."""
    from scipy.spatial import Delaunay

    if coords.shape[0] < 3:
        return np.empty((0, 2)), np.empty((0, 3), dtype=np.int64)
    simplices = Delaunay(coords).simplices
    descriptors = np.zeros((simplices.shape[0], 2))
    ordered = np.zeros_like(simplices)
    for i, triangle in enumerate(simplices):
        p0, p1, p2 = coords[triangle]
        sides = np.array([np.linalg.norm(p1 - p2), np.linalg.norm(p0 - p2), np.linalg.norm(p0 - p1)])
        order = np.argsort(sides)
        a, b, c = sides[order]
        if c <= 0:
            continue
        descriptors[i] = (a / c, b / c)
        ordered[i] = triangle[order]
    return descriptors, ordered


def _similarity(src: np.ndarray, dst: np.ndarray) -> tuple[float, float] | None:
    """spaCR's ``_similarity_from_pairs``' scale and angle, or None where the source is degenerate
    (its centred squares sum to at most ``1e-12``) or the scale is not a positive finite number."""
    src_c, dst_c = src - src.mean(axis=0), dst - dst.mean(axis=0)
    variance = float((src_c ** 2).sum())
    if variance <= 1e-12:
        return None
    u, singular, vt = np.linalg.svd(dst_c.T @ src_c / src.shape[0])
    correction = np.eye(2)
    if np.linalg.det(u @ vt) < 0:
        correction[1, 1] = -1.0
    rotation = u @ correction @ vt
    scale = float((singular * np.diag(correction)).sum() / (variance / src.shape[0]))
    if not np.isfinite(scale) or scale <= 0:
        return None
    return scale, float(np.arctan2(rotation[1, 0], rotation[0, 0]))


def match_triangles(source: object, target: object, tolerance: float = 0.02) -> tuple[
        int, float, np.ndarray, np.ndarray]:
    """spaCR's ``align_by_triangles`` before its ``min_votes``: every source triangle matched to the
    target triangles whose descriptors lie within ``tolerance`` (SciPy's ball query), each match's
    similarity fitted, and the votes pooled by their medians.

    :returns: ``(votes, scale, rotation, translation)``: the count of votes, the median scale, the
        rotation by the median angle, and the median offset of the matched target vertices from the
        source vertices moved by them; NaN (scale, ``(2, 2)``, ``(2,)``) where there is no vote.
    """
    from scipy.spatial import cKDTree

    src = np.asarray(source, dtype=np.float64)
    dst = np.asarray(target, dtype=np.float64)
    src_desc, src_tri = _described(src)
    dst_desc, dst_tri = _described(dst)
    scales: list[float] = []
    angles: list[float] = []
    matched_src: list[np.ndarray] = []
    matched_dst: list[np.ndarray] = []
    if src_desc.shape[0] and dst_desc.shape[0]:
        tree = cKDTree(dst_desc)
        for i, descriptor in enumerate(src_desc):
            for j in tree.query_ball_point(descriptor, float(tolerance)):
                fit = _similarity(src[src_tri[i]], dst[dst_tri[j]])
                if fit is None:
                    continue
                scales.append(fit[0])
                angles.append(fit[1])
                matched_src.append(src[src_tri[i]])
                matched_dst.append(dst[dst_tri[j]])
    if not scales:
        return 0, math.nan, np.full((2, 2), math.nan), np.full(2, math.nan)
    scale = float(np.median(scales))
    angle = float(np.median(angles))
    rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    offsets = np.concatenate(matched_dst) - (scale * (rotation @ np.concatenate(matched_src).T).T)
    return len(scales), scale, rotation, np.median(offsets, axis=0)
