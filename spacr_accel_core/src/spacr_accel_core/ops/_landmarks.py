"""The landmarks family: the points two acquisitions of a well are aligned by, spaced out of a
field's peaks and matched by the shapes of their triangles (re-exported by
:mod:`spacr_accel_core.ops`).

BOTH ARE THE PEER'S OWN ANSWERS, BIT FOR BIT. ``spaced_peaks`` is scikit-image's ``peak_local_max``
after its maxima are found (the border dropped, brightest first, the spacing walk of
``ensure_spacing``), so with :func:`~spacr_accel_core.ops.local_maxima` it is ``peak_local_max``;
``match_triangles`` is spaCR's ``align_by_triangles`` before its ``min_votes`` (the Delaunay
triangles' shape descriptors, the tolerance search, one similarity fit per match, the medians that
pool them). A field's nuclear centres are spaced, then matched to the other acquisition's: spaCR's
phenotype phase, served by these two rows. Input is checked here before any backend runs.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from .. import reference
from ..contract._markers import hookspec
from ..dispatch._registry import REGISTRY
from ..kit._triangles import TriangleVotes, pooled_transform
from ..operations._checks import _F32, _I64, _numeric, _options, _read_only, window_points
from ..operations._landmarks import (
    agree_match,
    agree_spaced,
    bench_spacing,
    bench_triangles,
    check_spaced,
    check_votes,
    delaunay_triangles,
    landmark_points,
    peak_spacing,
    small_spacing,
    small_triangles,
    triangle_tolerance,
)
from ..operations._operations import operation

__all__ = ["TriangleMatch", "match_triangles", "spaced_peaks"]


@hookspec
def spacr_accel_spaced_peaks(  # type: ignore[empty-body]  # a specification has no body
    points: np.ndarray, values: np.ndarray, shape: tuple[int, int], min_distance: int
) -> np.ndarray:
    """A field's candidate peaks as ``peak_local_max`` keeps them: those at least ``min_distance``
    from every edge, ranked by value, brightest first (``argsort(-values, kind="stable")``: equal
    values in the order given), then walked in that order, a peak kept unless a peak already kept
    lies nearer than ``min_distance`` in both rows and columns (the Chebyshev norm). With
    ``min_distance`` 1 no two of the points are nearer, and the ranked points are the answer.

    :param points: C-contiguous int64 ``(P, 2)`` rows ``(y, x)`` inside the field, none repeated,
        ``P >= 1``; never modify it.
    :param values: C-contiguous float32 ``(P,)``: the field's value at each point, none NaN.
    :param shape: the field's ``(height, width)``, each more than ``2 * min_distance``.
    :param min_distance: at least 1: the border's width and the spacing.
    :returns: C-contiguous int64 ``(N, 2)``: the rows of ``points`` kept, in the walk's order.
    """


@operation(
    spec=spacr_accel_spaced_peaks,
    task="Peaks spaced as peak_local_max spaces them (spaced_peaks)",
    check=check_spaced,
    agree=agree_spaced,
    reference=reference.spaced_peaks,
    small=small_spacing,
    bench=bench_spacing,
    dask=None,
)
def spaced_peaks(field: Any, points: Any, min_distance: Any, *, gpu: Any = True,
                 backend: str | None = None) -> np.ndarray:
    """A field's peaks brightest first, no two nearer than ``min_distance``: ``peak_local_max``'s answer
    from the field's maxima.

    ONE NUCLEUS, ONE CENTRE. A smoothed nucleus can hold a plateau or two equal maxima; ranking the
    peaks by value and walking them brightest first, keeping a peak only when no kept one lies
    nearer than ``min_distance`` rows and columns, leaves one per nucleus, the brightest (among
    equals, the first given). Given ``local_maxima(field, 2 * min_distance + 1, threshold=t)``, the
    answer is scikit-image's ``peak_local_max(field, min_distance=min_distance, threshold_abs=t)``,
    bit for bit, order and memory layout included (on a field that is not constant: scikit-image
    finds no peak on a constant one). The points within ``min_distance`` of an edge are dropped.

    :param field: a 2-D array of real numbers, read as float32 (the values the peaks are ranked by).
    :param points: ``(P, 2)`` integer ``(y, x)`` rows inside the field, none repeated: the candidate
        peaks (``local_maxima``'s answer). ``[]`` is none.
    :param min_distance: the spacing and the border's width, a whole number of pixels, at least 1.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: C-contiguous int64 ``(N, 2)`` rows of ``points``, brightest first.
    :raises ValueError: ``field`` not 2-D; ``points`` not whole ``(N, 2)`` coordinates inside the
        field, repeated, or on a NaN pixel; ``min_distance`` below 1 or a fraction.
    :raises TypeError: ``field`` or ``points`` not real numbers; ``min_distance`` not a number.
    """
    array = _numeric(field, "field")
    if array.ndim != 2:
        raise ValueError(f"field must be one 2-D field, got shape {array.shape}")
    rows = window_points(points, array.shape)
    spacing = peak_spacing(min_distance)
    use_gpu = _options(gpu, backend)
    height, width = array.shape
    if rows.shape[0] > 1:
        flat = rows[:, 0] * width + rows[:, 1]
        if not (flat[1:] > flat[:-1]).all():  # local_maxima's answer is in row-major order: no sort
            ordered = np.sort(flat)
            if (ordered[1:] == ordered[:-1]).any():
                raise ValueError("points holds a repeated point")
    with np.errstate(over="ignore"):  # a float64 beyond float32's range is inf, as the field is read
        values = np.ascontiguousarray(array[rows[:, 0], rows[:, 1]], dtype=_F32)
    if np.isnan(values).any():
        raise ValueError("points holds a point on a NaN pixel (it has no rank among the peaks)")
    if rows.shape[0] == 0 or min(height, width) <= 2 * spacing:
        # No backend needed: no candidate, or no pixel at min_distance from every edge.
        REGISTRY.record_served("spaced_peaks")
        return np.empty((0, 2), dtype=_I64)
    result = REGISTRY.dispatch(
        "spaced_peaks", {"points": _read_only(rows), "values": _read_only(values), "shape": (height, width),
                         "min_distance": spacing}, gpu=use_gpu, backend=backend,
        expected=((height, width), spacing, rows.shape[0]))
    return np.ascontiguousarray(result)


class TriangleMatch(NamedTuple):
    """What :func:`match_triangles` finds: how many matches voted, and their consensus.

    :param votes: the matches whose similarity counts (spaCR compares this with ``min_votes``).
    :param scale: the median scale (a Python float), NaN with no vote.
    :param rotation: float64 ``(2, 2)``: the rotation by the median angle, NaN with no vote.
    :param translation: float64 ``(2,)``: the median offset of the matched target vertices from the
        source vertices moved by scale and rotation, NaN with no vote.
    """

    votes: int
    scale: float
    rotation: np.ndarray
    translation: np.ndarray


def _no_match() -> TriangleMatch:
    return TriangleMatch(0, math.nan, np.full((2, 2), math.nan), np.full(2, math.nan))


@hookspec
def spacr_accel_match_triangles(  # type: ignore[empty-body]  # a specification has no body
    source: np.ndarray, target: np.ndarray, source_triangles: np.ndarray, target_triangles: np.ndarray,
    tolerance: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every source triangle matched to the target triangles of like shape, and the similarity each
    match proposes, with the bits of spaCR's per-item NumPy calls.

    A triangle's descriptor is its two shorter sides over its longest, each side
    ``np.linalg.norm`` of its vector (BLAS's ``ddot``), its vertices ordered by the side opposite
    each (``np.argsort`` of the three lengths); a triangle whose longest side is not positive has a
    zero descriptor and zero vertices. Each source triangle in order is matched to the target
    triangles whose descriptors lie within ``tolerance`` (SciPy's ``cKDTree.query_ball_point``
    on the target descriptors, in the tree's order); each match's similarity is spaCR's
    ``_similarity_from_pairs``: the centred vertices, ``(dst_c.T @ src_c) / 3``, its SVD, a
    reflection turned into a rotation, the scale ``(singular * diag(correction)).sum() / (variance /
    3)``. A match votes unless the source's centred squares sum to at most ``1e-12`` or the scale is
    not a positive finite number.

    :param source: C-contiguous float64 ``(N, 2)`` points, finite; never modify it.
    :param target: C-contiguous float64 ``(M, 2)`` points, finite; never modify it.
    :param source_triangles: ``Delaunay(source).simplices``: ``(S, 3)`` indices, ``S >= 1``.
    :param target_triangles: ``Delaunay(target).simplices``: ``(T, 3)`` indices, ``T >= 1``.
    :param tolerance: the descriptors' largest distance, finite, at least zero.
    :returns: ``(scales, angles, source_vertices, target_vertices)``: float64 ``(K,)`` scales,
        ``(K,)`` angles (``arctan2(R[1, 0], R[0, 0])``), and each vote's matched vertices
        ``(K, 3, 2)``, in the order of the source triangles and, within one, of the tree's answer.
    """


@operation(
    spec=spacr_accel_match_triangles,
    task="Nuclei matched by their triangles (match_triangles)",
    check=check_votes,
    agree=agree_match,
    reference=reference.match_triangles,
    small=small_triangles,
    bench=bench_triangles,
    dask=None,
)
def match_triangles(source: Any, target: Any, *, tolerance: Any = 0.02, gpu: Any = True,
                    backend: str | None = None) -> TriangleMatch:
    """The similarity (scale, rotation, translation) between two point sets, from the shapes of their
    triangles: spaCR's ``align_by_triangles`` before its ``min_votes``, bit for bit.

    SHAPES SURVIVE WHAT DIFFERS BETWEEN ACQUISITIONS. A triangle's two shorter sides over its longest
    do not change when it is scaled, turned or moved: each Delaunay triangle of ``source`` is matched
    to the ``target`` triangles whose descriptors lie within ``tolerance``, each match proposes a
    similarity fitted in closed form, and the proposals are pooled by their medians, which the
    chance matches do not move. The answer is spaCR's to the bit: its descriptors, its ball queries
    (SciPy's), its fits (NumPy's, LAPACK's) and its medians.

    :param source: ``(N, 2)`` points in the frame to be moved (a phenotype field's nuclei).
    :param target: ``(M, 2)`` points in the frame to move to (the sequencing nuclei around it).
    :param tolerance: how near two descriptors must lie to match; a finite number at least zero.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: a :class:`TriangleMatch`: the count of votes and their consensus (NaN with no vote;
        none with fewer than three points on either side).
    :raises ValueError: not ``(N, 2)`` rows, a NaN or an infinity among them, a point set Qhull
        cannot triangulate (all on one line), or a negative, NaN or infinite ``tolerance``.
    :raises TypeError: points or ``tolerance`` not real numbers.
    :raises BackendUnavailable: SciPy is not installed (the core triangulates with its ``Delaunay``):
        the message says what to install.
    """
    src = landmark_points(source, "source")
    dst = landmark_points(target, "target")
    bound = triangle_tolerance(tolerance)
    use_gpu = _options(gpu, backend)
    src_triangles = delaunay_triangles(src, "source")
    dst_triangles = delaunay_triangles(dst, "target")
    if src_triangles.shape[0] == 0 or dst_triangles.shape[0] == 0:
        # No backend needed: a side with no triangle has nothing to match.
        REGISTRY.record_served("match_triangles")
        return _no_match()
    scales, angles, matched_src, matched_dst = REGISTRY.dispatch(
        "match_triangles", {"source": _read_only(src), "target": _read_only(dst),
                            "source_triangles": src_triangles, "target_triangles": dst_triangles,
                            "tolerance": bound}, gpu=use_gpu, backend=backend,
        expected=(src_triangles.shape[0], dst_triangles.shape[0]))
    if scales.shape[0] == 0:
        return _no_match()
    votes = TriangleVotes(scales, angles, np.ascontiguousarray(matched_src).reshape(-1, 2),
                          np.ascontiguousarray(matched_dst).reshape(-1, 2))
    scale, rotation, translation = pooled_transform(votes)
    return TriangleMatch(int(scales.shape[0]), scale, rotation, translation)
