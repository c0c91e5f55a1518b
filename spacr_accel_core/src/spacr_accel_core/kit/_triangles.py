"""Triangle matching between two point sets, whole arrays at a time, with the float64 bits that
NumPy's calls give one triangle and one match at a time.

WHAT IS MATCHED. Each point set is Delaunay-triangulated (SciPy's ``Delaunay``, the same call on
the same array, so the same simplices in the same order: the core triangulates, and a backend is
handed the simplices); a triangle is described by its two shorter sides over its longest, its
vertices ordered by the side opposite each. Each source
triangle is matched to the target triangles whose descriptors lie within a tolerance (SciPy's
``cKDTree.query_ball_point``, the same tree and distances, every query's points in the tree's
order), and each match proposes a similarity (scale, rotation) fitted in closed form: the centred
points' covariance, its 2 x 2 singular value decomposition, a reflection turned into a rotation.
The proposals are pooled by their medians.

WHY THE BITS ARE THE PER-ITEM CALLS' BITS. Every step is the per-item call's own NumPy routine
applied to a stack:

- a side's length is ``sqrt`` of the vector's dot product with itself, which ``np.linalg.norm``
  takes from BLAS's ``ddot`` (fused multiply-adds where the BLAS kernel uses them, so ``x*x + y*y``
  is not it); ``np.vecdot`` (NumPy 2) calls the same ``dot`` loop per row, and so does, before
  NumPy 2, ``matmul`` of each row as a ``(1, n) @ (n, 1)`` product (a one-element answer is that
  loop, not ``gemm``);
- ``np.argsort`` along the last axis sorts each row as a 1-D call sorts it (ties included: integer
  pixel centres make isosceles triangles common);
- a stack of ``(2, 3) @ (3, 2)`` and ``(2, 2) @ (2, 2)`` products is NumPy's loop of the same BLAS
  ``gemm`` per matrix, with each matrix's strides as the single call has them;
- ``np.linalg.svd`` and ``np.linalg.det`` on a stack call LAPACK's ``gesdd`` and ``getrf`` per
  matrix;
- means and sums reduce the same elements in the same order (three rows; six squares; two terms);
- elementwise ufuncs (``sqrt``, ``arctan2``, division) give each element a scalar call's bits.

:func:`batches_match_single_calls` checks these premises once a process on a fixed probe (ties,
fused-multiply-add-sensitive lengths, reflections, degenerate triangles) against the per-item calls
themselves; a NumPy or BLAS that batches otherwise is told apart there, and :func:`triangle_matches`
then makes the per-item calls themselves, one triangle and one match at a time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["TriangleVotes", "batches_match_single_calls", "pooled_transform", "triangle_matches",
           "triangle_shapes", "triangle_votes"]

BLOCK = 512
"""Source triangles queried and fitted at once: the matches of one block are the memory in use
beside the votes kept, whatever the tolerance."""

DEGENERATE_VARIANCE = 1e-12
"""A source triangle whose centred squared coordinates sum to at most this proposes nothing (no
scale is defined for coincident points)."""


def _lengths(vectors: np.ndarray) -> np.ndarray:
    """Each row's Euclidean length, as ``np.linalg.norm`` gives one row: ``sqrt(dot(v, v))``.

    ``np.vecdot`` is NumPy 2's; the packages also run on NumPy 1, where each row is a
    ``(1, n) @ (n, 1)`` product, which NumPy's ``matmul`` hands to the same ``dot`` loop with the
    row's own strides (neither ``einsum`` nor a sum of squares rounds as that loop does). Both give
    ``np.linalg.norm``'s bits, and the probe of :func:`batches_match_single_calls` holds either to
    them.
    """
    vecdot = getattr(np, "vecdot", None)
    if vecdot is not None:
        squared = vecdot(vectors, vectors)
    else:
        squared = np.matmul(vectors[..., None, :], vectors[..., :, None])[..., 0, 0]
    lengths: np.ndarray = np.sqrt(squared)
    return lengths


def triangle_shapes(coords: np.ndarray, simplices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Describe every triangle of a triangulation of ``coords`` by its shape.

    The descriptor is the two shorter sides over the longest; the vertices are ordered by the
    length of the side opposite each, shortest first, so two matched descriptors pair their points.
    A triangle whose longest side is not positive keeps a zero descriptor and zero vertices.

    :param coords: ``(N, 2)`` float64 points, finite (the caller checks).
    :param simplices: ``(M, 3)`` indices into ``coords``: SciPy's ``Delaunay(coords).simplices``.
    :returns: ``(descriptors, vertices)``: ``(M, 2)`` float64 and ``(M, 3)`` of the simplices' dtype.
    """
    corners = coords[simplices]
    sides = np.empty_like(corners)
    np.subtract(corners[:, 1], corners[:, 2], out=sides[:, 0])
    np.subtract(corners[:, 0], corners[:, 2], out=sides[:, 1])
    np.subtract(corners[:, 0], corners[:, 1], out=sides[:, 2])
    lengths = _lengths(sides)
    order = np.argsort(lengths, axis=1)
    ranked = np.take_along_axis(lengths, order, axis=1)
    shaped = ~(ranked[:, 2] <= 0)
    descriptors = np.zeros((simplices.shape[0], 2))
    longest = ranked[shaped, 2]
    descriptors[shaped, 0] = ranked[shaped, 0] / longest
    descriptors[shaped, 1] = ranked[shaped, 1] / longest
    vertices = np.zeros_like(simplices)
    vertices[shaped] = np.take_along_axis(simplices, order, axis=1)[shaped]
    return descriptors, vertices


@dataclass(frozen=True)
class TriangleVotes:
    """The matches whose similarity counts, in the order of the source triangles and, within one,
    of the tree's answer.

    :param scales: each match's scale (float64).
    :param angles: each match's rotation angle, ``arctan2(R[1, 0], R[0, 0])``.
    :param source: ``(3K, 2)`` the matched source triangles' vertices, match after match.
    :param target: ``(3K, 2)`` the matched target triangles' vertices, in the same order.
    """

    scales: np.ndarray
    angles: np.ndarray
    source: np.ndarray
    target: np.ndarray


def _similarities(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each matched pair's closed-form similarity: ``(keep, scale, angle)``, ``keep`` false where
    the source triangle is degenerate or the scale is not a positive finite number.

    :param src: ``(K, 3, 2)`` source vertices.
    :param dst: ``(K, 3, 2)`` target vertices.
    """
    count = src.shape[1]
    src_c = src - src.mean(axis=1)[:, None, :]
    dst_c = dst - dst.mean(axis=1)[:, None, :]
    variance = (src_c ** 2).reshape(src.shape[0], count * src.shape[2]).sum(axis=1)
    keep = ~(variance <= DEGENERATE_VARIANCE)
    scale = np.zeros(src.shape[0])
    angle = np.zeros(src.shape[0])
    if not keep.any():
        return keep, scale, angle
    src_c, dst_c, variance = src_c[keep], dst_c[keep], variance[keep]
    covariance = np.matmul(dst_c.transpose(0, 2, 1), src_c) / count
    u, singular, vt = np.linalg.svd(covariance)
    correction = np.zeros_like(u)
    correction[:, 0, 0] = 1.0
    correction[:, 1, 1] = np.where(np.linalg.det(np.matmul(u, vt)) < 0, -1.0, 1.0)
    rotation = np.matmul(np.matmul(u, correction), vt)
    weighted = singular * np.diagonal(correction, axis1=1, axis2=2)
    fitted = weighted.sum(axis=1) / (variance / count)
    scale[keep] = fitted
    angle[keep] = np.arctan2(rotation[:, 1, 0], rotation[:, 0, 0])
    keep[keep] = np.isfinite(fitted) & ~(fitted <= 0)
    return keep, scale, angle


def triangle_votes(source: np.ndarray, target: np.ndarray, source_shapes: tuple[np.ndarray, np.ndarray],
                   target_shapes: tuple[np.ndarray, np.ndarray], tolerance: float) -> TriangleVotes:
    """Every source triangle matched to the target triangles within ``tolerance`` of its descriptor,
    and the similarity each match proposes.

    :param source: ``(N, 2)`` float64 source points.
    :param target: ``(M, 2)`` float64 target points.
    :param source_shapes: :func:`triangle_shapes` of ``source`` (at least one triangle).
    :param target_shapes: :func:`triangle_shapes` of ``target`` (at least one triangle).
    :param tolerance: the descriptors' largest distance (a finite number, at least zero).
    """
    from scipy.spatial import cKDTree

    (src_desc, src_tri), (dst_desc, dst_tri) = source_shapes, target_shapes
    tree = cKDTree(dst_desc)
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for start in range(0, src_desc.shape[0], BLOCK):
        found = tree.query_ball_point(src_desc[start:start + BLOCK], tolerance, return_sorted=False)
        lengths = np.fromiter((len(hits) for hits in found), dtype=np.intp, count=len(found))
        total = int(lengths.sum())
        partners = np.fromiter((j for hits in found for j in hits), dtype=np.intp, count=total)
        matched_src = source[src_tri[np.repeat(np.arange(start, start + len(found)), lengths)]]
        matched_dst = target[dst_tri[partners]]
        keep, scale, angle = _similarities(matched_src, matched_dst)
        parts.append((scale[keep], angle[keep], matched_src[keep].reshape(-1, 2), matched_dst[keep].reshape(-1, 2)))
    if not parts:
        return TriangleVotes(np.zeros(0), np.zeros(0), np.zeros((0, 2)), np.zeros((0, 2)))
    return TriangleVotes(*(np.concatenate([part[index] for part in parts]) for index in range(4)))


def pooled_transform(votes: TriangleVotes) -> tuple[float, np.ndarray, np.ndarray]:
    """The votes' consensus: the median scale and angle, and the median offset of the matched target
    vertices from the source vertices moved by them.

    :param votes: at least one vote.
    :returns: ``(scale, rotation (2, 2), translation (2,))``.
    """
    scale = float(np.median(votes.scales))
    angle = float(np.median(votes.angles))
    rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    offsets = votes.target - (scale * (rotation @ votes.source.T).T)
    return scale, rotation, np.median(offsets, axis=0)


# ---- the per-item calls (where the stacks round otherwise), and the premises checked once a process -


def _one_shape(coords: np.ndarray, tri: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """One triangle's descriptor and ordered vertices by per-item calls (None: not positive)."""
    p0, p1, p2 = coords[tri]
    sides = np.array([np.linalg.norm(p1 - p2), np.linalg.norm(p0 - p2), np.linalg.norm(p0 - p1)])
    order = np.argsort(sides)
    a, b, c = sides[order]
    if c <= 0:
        return None
    return np.array([a / c, b / c]), tri[order]


def _one_similarity(src: np.ndarray, dst: np.ndarray) -> tuple[float, Any] | None:
    """One match's scale and angle by per-item calls (None: degenerate or not a positive scale)."""
    src_c, dst_c = src - src.mean(axis=0), dst - dst.mean(axis=0)
    variance = float((src_c ** 2).sum())
    if variance <= DEGENERATE_VARIANCE:
        return None
    u, singular, vt = np.linalg.svd(dst_c.T @ src_c / src.shape[0])
    correction = np.eye(2)
    if np.linalg.det(u @ vt) < 0:
        correction[1, 1] = -1.0
    rotation = u @ correction @ vt
    scale = float((singular * np.diag(correction)).sum() / (variance / src.shape[0]))
    if not np.isfinite(scale) or scale <= 0:
        return None
    return scale, np.arctan2(rotation[1, 0], rotation[0, 0])


def _shapes_one_by_one(coords: np.ndarray, simplices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`triangle_shapes` by the per-item calls, one triangle at a time."""
    descriptors, vertices = np.zeros((simplices.shape[0], 2)), np.zeros_like(simplices)
    for i, row in enumerate(simplices):
        one = _one_shape(coords, row)
        if one is not None:
            descriptors[i], vertices[i] = one
    return descriptors, vertices


def _votes_one_by_one(source: np.ndarray, target: np.ndarray, source_shapes: tuple[np.ndarray, np.ndarray],
                      target_shapes: tuple[np.ndarray, np.ndarray], tolerance: float) -> TriangleVotes:
    """:func:`triangle_votes` by the per-item calls: one ball query per source triangle, one fit per
    match, in the same order."""
    from scipy.spatial import cKDTree

    (src_desc, src_tri), (dst_desc, dst_tri) = source_shapes, target_shapes
    tree = cKDTree(dst_desc)
    scales: list[float] = []
    angles: list[Any] = []
    matched_src: list[np.ndarray] = []
    matched_dst: list[np.ndarray] = []
    for i, desc in enumerate(src_desc):
        for j in tree.query_ball_point(desc, tolerance):
            src_vertices, dst_vertices = source[src_tri[i]], target[dst_tri[j]]
            fit = _one_similarity(src_vertices, dst_vertices)
            if fit is None:
                continue
            scales.append(fit[0])
            angles.append(fit[1])
            matched_src.append(src_vertices)
            matched_dst.append(dst_vertices)
    if not scales:
        return TriangleVotes(np.zeros(0), np.zeros(0), np.zeros((0, 2)), np.zeros((0, 2)))
    return TriangleVotes(np.array(scales, dtype=np.float64), np.array(angles, dtype=np.float64),
                         np.concatenate(matched_src), np.concatenate(matched_dst))


def _probe_points() -> tuple[np.ndarray, np.ndarray]:
    """Two point sets related by a similarity with a reflection's worth of noise: pixel centres (ties
    in side lengths) and fractional ones (lengths whose ``ddot`` rounds apart from ``x*x + y*y``)."""
    rng = np.random.default_rng(20250611)
    pixels = rng.integers(0, 30, size=(40, 2)).astype(np.float64)
    pixels = np.unique(pixels, axis=0)
    fractional = rng.normal(scale=173.0, size=(30, 2))
    source = np.concatenate([pixels, fractional + 500.0])
    turn = np.array([[np.cos(0.3), -np.sin(0.3)], [np.sin(0.3), np.cos(0.3)]])
    target = 1.7 * source @ turn.T + rng.normal(scale=0.4, size=source.shape)
    return source, np.concatenate([target, target[:8, ::-1]])


def _probe() -> bool:
    source, target = _probe_points()
    from scipy.spatial import Delaunay

    shapes = []
    for points in (source, target):
        simplices = Delaunay(points).simplices
        desc, tri = triangle_shapes(points, simplices)
        want_desc, want_tri = _shapes_one_by_one(points, simplices)
        if not (np.array_equal(desc.view(np.int64), want_desc.view(np.int64)) and np.array_equal(tri, want_tri)
                and tri.dtype == want_tri.dtype):
            return False
        shapes.append((desc, tri))
    tolerance = 0.02
    votes = triangle_votes(source, target, shapes[0], shapes[1], tolerance)
    want = _votes_one_by_one(source, target, shapes[0], shapes[1], tolerance)
    return (want.scales.shape[0] > 50 and np.array_equal(want.scales.view(np.int64), votes.scales.view(np.int64))
            and np.array_equal(want.angles.view(np.int64), votes.angles.view(np.int64)))


_checked: list[bool] = []
_checked_lock = threading.Lock()


def batches_match_single_calls() -> bool:
    """Whether this NumPy (with its BLAS and LAPACK) gives the stacked calls of this module the bits
    of the per-item calls, on a fixed probe of a few hundred triangles and matches; checked once a
    process.

    :returns: False where any descriptor, vertex order, scale or angle differs by a bit.
    """
    if not _checked:
        with _checked_lock:
            if not _checked:
                with np.errstate(all="ignore"):
                    _checked.append(bool(_probe()))
    return _checked[0]


def triangle_matches(source: np.ndarray, target: np.ndarray, source_simplices: np.ndarray,
                     target_simplices: np.ndarray, tolerance: float) -> TriangleVotes:
    """Every source triangle matched to the target triangles within ``tolerance`` of its shape, and
    the similarity each match proposes, with the per-item calls' bits: on stacks where this NumPy
    rounds them as the per-item calls (:func:`batches_match_single_calls`), else one triangle and
    one match at a time.

    :param source: ``(N, 2)`` float64 source points, finite.
    :param target: ``(M, 2)`` float64 target points, finite.
    :param source_simplices: ``Delaunay(source).simplices`` (at least one triangle).
    :param target_simplices: ``Delaunay(target).simplices`` (at least one triangle).
    :param tolerance: the descriptors' largest distance (a finite number, at least zero).
    :returns: the votes, in the order of the source triangles and, within one, of the tree's answer.
    """
    if batches_match_single_calls():
        shaped = triangle_shapes(source, source_simplices), triangle_shapes(target, target_simplices)
        return triangle_votes(source, target, shaped[0], shaped[1], tolerance)
    one_by_one = _shapes_one_by_one(source, source_simplices), _shapes_one_by_one(target, target_simplices)
    return _votes_one_by_one(source, target, one_by_one[0], one_by_one[1], tolerance)
