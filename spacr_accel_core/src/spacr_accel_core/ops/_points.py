"""The point operations of spaCR's read attribution and merge: who owns each read, and how many
moved nuclei land on a target. Each declared here once, its hook's specification beside it
(:func:`~spacr_accel_core.operations._operations.operation`); re-exported by :mod:`spacr_accel_core.ops`.

BOTH ARE SPACR'S ANSWERS EXACTLY, not approximations of them. :func:`attribute_reads` is
``spacr.ops_sbs.attribute_reads`` (a KD-tree ball query, ``np.hypot`` gaps, a stable sort) without
its loop over the reads; :func:`count_within` is the inlier count ``seed_by_scaled_pairs`` takes of
every candidate transform, ``sum(tree.query(moved)[0] <= radius)``, for a batch of candidates at
once. Every backend compares the float64 quantities SciPy and NumPy compute, the same way, so the
owners, flags and counts are the same integers everywhere.

The input is checked here, once, before any backend runs (:mod:`.operations._checks`'s words).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import reference
from ..contract._markers import hookspec
from ..dispatch._registry import REGISTRY
from ..operations._checks import _I64, _numeric, _options, _read_only, _real
from ..operations._operations import OwnGraph, operation
from ..operations._points import (
    agree_attribution,
    agree_counts,
    attribution_bench,
    check_attribution,
    check_counts,
    counts_bench,
    small_attribution,
    small_counts,
    squared_limit,
)

__all__ = ["attribute_reads", "count_within"]


def _point_rows(value: Any, name: str) -> np.ndarray:
    """``(N, 2)`` finite ``(y, x)`` rows as C-contiguous float64; an empty input is no points."""
    array = _numeric(value, name)
    if array.size == 0 and array.ndim <= 2:
        return np.zeros((0, 2), dtype=np.float64)
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"{name} must be (N, 2) rows (y, x), got shape {array.shape}")
    rows = np.ascontiguousarray(array, dtype=np.float64)
    _all_finite(rows, name)
    return rows


def _all_finite(array: np.ndarray, name: str) -> None:
    if array.size and not (math.isfinite(array.min()) and math.isfinite(array.max())):
        raise ValueError(f"{name} must be finite: it holds NaN or infinity")


def _not_negative(value: Any, name: str) -> float:
    number = _real(value, name)
    if number < 0:
        raise ValueError(f"{name} must be at least 0 pixels, got {value!r}")
    return number


@hookspec
def spacr_accel_attribute_reads(  # type: ignore[empty-body]  # a specification has no body
    peaks: np.ndarray, centroids: np.ndarray, radius: np.ndarray, footprint: float, tie: float
) -> tuple[np.ndarray, np.ndarray]:
    """Each read given to the object whose boundary (the disc of its area) is nearest: spaCR's
    ``attribute_reads`` exactly.

    A read's candidates are the objects whose centre lies within ``reach = radius.max() +
    footprint``, by SciPy's KD-tree ball test (``fl(dy*dy) + fl(dx*dx) <= fl(reach*reach)``, the
    tree's own verdict where a sum lies within rounding of the bound); each candidate's gap is
    ``np.hypot(dy, dx) - radius[j]`` in float64 (``np.hypot``'s bits: C's ``hypot``, not a square
    root of the sum); the smallest gap wins, the lowest object index among equal gaps. No owner
    when that gap exceeds ``footprint``; refused as ambiguous (no owner) when the second smallest
    gap minus the smallest is below ``tie``.

    :param peaks: C-contiguous finite float64 ``(N, 2)`` read positions ``(y, x)``, ``N >= 1``.
    :param centroids: C-contiguous finite float64 ``(M, 2)`` object centres, ``M >= 1``.
    :param radius: C-contiguous float64 ``(M,)``: ``sqrt(max(area, 0) / pi)``, computed by the core.
    :param footprint: finite, at least 0.
    :param tie: finite, at least 0.
    :returns: ``(owner, ambiguous)``: int64 ``(N,)`` (an index into ``centroids`` or -1) and bool ``(N,)``.
    """


@operation(
    spec=spacr_accel_attribute_reads,
    task="Reads given to nuclei (attribute_reads)",
    check=check_attribution,
    agree=agree_attribution,
    reference=reference.attribute_reads,
    small=small_attribution,
    bench=attribution_bench,
    dask=OwnGraph(),
)
def attribute_reads(peaks: Any, centroids: Any, areas: Any, *, footprint: Any = 10.0, tie: Any = 1.0,
                    gpu: Any = True, backend: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Give each read to the object whose boundary is nearest: ``spacr.ops_sbs.attribute_reads``.

    Reads are found over the whole field, then attributed: a read belongs to the nucleus whose
    equivalent disc (the circle of its area about its centroid) it lies nearest, within
    ``footprint`` pixels of that boundary; a read about as near two boundaries (within ``tie``)
    is given to neither and flagged, because its barcode would vote for a cell it may not be in.
    The nearest centre is not always the nearest boundary (a large nucleus reaches further), so
    every object within ``max(radius) + footprint`` of a read is weighed, as spaCR weighs them.

    :param peaks: ``(N, 2)`` read positions ``(y, x)`` (``[]``: no reads).
    :param centroids: ``(M, 2)`` object centroids in the same frame.
    :param areas: ``(M,)`` object areas in pixels (a negative area is a point: radius 0).
    :param footprint: how far beyond a boundary a read may lie and still be that object's.
    :param tie: how close the two nearest boundaries may be before a read is refused.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: ``(owner, ambiguous)``: int64 ``(N,)`` index into ``centroids`` or -1, bool ``(N,)``.
    :raises ValueError: ``peaks`` or ``centroids`` not ``(N, 2)`` rows, ``areas`` not one per
        centroid, a coordinate or area not finite, ``footprint`` or ``tie`` negative or not finite.
    :raises TypeError: non-numeric input, or ``gpu``/``backend`` not a bool and a name.
    """
    points = _point_rows(peaks, "peaks")
    centres = _point_rows(centroids, "centroids")
    area = _numeric(areas, "areas")
    if area.ndim > 1 or area.size != centres.shape[0]:
        raise ValueError(f"areas must be one per centroid ({centres.shape[0]},), got shape {area.shape}")
    area = area.astype(np.float64).reshape(-1)
    _all_finite(area, "areas")
    reach, ties = _not_negative(footprint, "footprint"), _not_negative(tie, "tie")
    use_gpu = _options(gpu, backend)
    if points.shape[0] == 0 or centres.shape[0] == 0:
        REGISTRY.record_served("attribute_reads")
        return np.full(points.shape[0], -1, dtype=_I64), np.zeros(points.shape[0], dtype=bool)
    radius = np.sqrt(np.maximum(area, 0.0) / np.pi)  # spaCR's expression, once for every backend
    result: tuple[np.ndarray, np.ndarray] = REGISTRY.dispatch(
        "attribute_reads", {"peaks": _read_only(points), "centroids": _read_only(centres),
                            "radius": _read_only(radius), "footprint": reach, "tie": ties},
        gpu=use_gpu, backend=backend, expected=(points.shape[0], centres.shape[0]))
    return result


@hookspec
def spacr_accel_count_within(  # type: ignore[empty-body]  # a specification has no body
    moved: np.ndarray, target: np.ndarray, limit: float
) -> np.ndarray:
    """How many points of each moved set land near a target: the merge's score of a candidate transform.

    A point counts when ``fl(dy*dy) + fl(dx*dx) <= limit`` for some target, the sum in float64 as
    SciPy's KD-tree takes it; ``limit`` is the largest float64 whose square root is within the
    caller's radius, so the count is that of SciPy's ``distance <= radius``.

    :param moved: C-contiguous finite float64 ``(B, N, 2)``, ``B, N >= 1``; never modify it.
    :param target: C-contiguous finite float64 ``(M, 2)``, ``M >= 1``.
    :param limit: the squared distance bound, at least 0 (``inf``: every point counts).
    :returns: int64 ``(B,)``.
    """


@operation(
    spec=spacr_accel_count_within,
    task="Merge transforms scored (count_within)",
    check=check_counts,
    agree=agree_counts,
    reference=reference.count_within,
    small=small_counts,
    bench=counts_bench,
    dask=OwnGraph(),
)
def count_within(moved: Any, target: Any, radius: Any, *, gpu: Any = True,
                 backend: str | None = None) -> np.ndarray:
    """How many points of each moved set lie within ``radius`` of a target: a transform's inliers.

    The merge tries thousands of candidate transforms of a phenotype field's nuclei and keeps the
    one under which most land on a sequencing nucleus; this is that count for a batch of
    candidates at once. A point counts when its nearest target's float64 distance (SciPy's
    KD-tree distance, ``sqrt(dy*dy + dx*dx)`` rounded once) is at most ``radius``: spaCR's
    ``np.sum(tree.query(moved)[0] <= radius)`` for every set.

    :param moved: ``(..., N, 2)`` points ``(y, x)``: one set ``(N, 2)``, or a stack of sets.
    :param target: ``(M, 2)`` target points.
    :param radius: how close a point must land, in pixels (finite, at least 0).
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: int64 of shape ``moved.shape[:-2]`` (a 0-d array for one set).
    :raises ValueError: ``moved`` not ``(..., N, 2)``, ``target`` not ``(M, 2)``, a coordinate not
        finite, ``radius`` negative or not finite.
    :raises TypeError: non-numeric input, or ``gpu``/``backend`` not a bool and a name.
    """
    sets = _numeric(moved, "moved")
    if sets.ndim < 2 or sets.shape[-1] != 2:
        raise ValueError(f"moved must be (..., N, 2) points (y, x), got shape {sets.shape}")
    dst = _point_rows(target, "target")
    bound = _not_negative(radius, "radius")
    use_gpu = _options(gpu, backend)
    lead = sets.shape[:-2]
    count, points = int(np.prod(lead, dtype=np.int64)), sets.shape[-2]
    flat = np.ascontiguousarray(sets, dtype=np.float64).reshape(count, points, 2)
    _all_finite(flat, "moved")
    if count == 0 or points == 0 or dst.shape[0] == 0:
        REGISTRY.record_served("count_within")
        return np.zeros(lead, dtype=_I64)
    counts: np.ndarray = REGISTRY.dispatch(
        "count_within", {"moved": _read_only(flat), "target": _read_only(dst), "limit": squared_limit(bound)},
        gpu=use_gpu, backend=backend, expected=(count, points))
    return counts.reshape(lead)
