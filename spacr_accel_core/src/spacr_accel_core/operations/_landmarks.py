"""The landmarks family's input checks, result checks, agreements and the inputs the table tries it
on: the points two acquisitions of a well are aligned by, spaced out of a field's peaks
(``spaced_peaks``) and matched by the shapes of their triangles (``match_triangles``).

WHY THE CORE TRIANGULATES. Which triangles a point set has is SciPy's ``Delaunay`` answer, and a
point set Qhull refuses (collinear points) is the caller's input, not a backend's failure: the core
triangulates once, refuses such a set with a ``ValueError`` naming it, and hands every backend the
same simplices, so no backend repeats the call or can answer with other triangles.

WHY SCIPY IS IMPORTED ON FIRST USE. The core depends on NumPy and pluggy alone; the triangles (and
the bench's smoothed plane) are SciPy's. A copy without SciPy imports and serves every other
operation, and a call that needs it is refused with :class:`BackendUnavailable` naming what to
install (a ``RuntimeError``: the bench reports the operation as skipped, not broken).
"""

from __future__ import annotations

import importlib
import math
from typing import Any

import numpy as np

from ..contract._errors import BackendUnavailable, describe
from ._checks import _F32, _I64, _integer, _numeric, _scalar, _shown
from ._results import Example

__all__ = [
    "agree_match",
    "agree_spaced",
    "bench_spacing",
    "bench_triangles",
    "check_spaced",
    "check_votes",
    "delaunay_triangles",
    "landmark_points",
    "peak_spacing",
    "small_spacing",
    "small_triangles",
    "triangle_tolerance",
]

NO_TRIANGLES = np.zeros((0, 3), dtype=np.int32)
"""The simplices of a point set of fewer than three points: none (read-only, shared)."""
NO_TRIANGLES.setflags(write=False)


# ---- the input checks -----------------------------------------------------------------------------


def _scipy(module: str, needed_for: str) -> Any:
    """SciPy's ``scipy.<module>``, imported on first use.

    :param module: ``spatial`` or ``ndimage``.
    :param needed_for: what needs it, in words, for the message.
    :raises BackendUnavailable: SciPy is not installed here (the message says what to install).
    """
    try:
        return importlib.import_module(f"scipy.{module}")
    except ImportError as exc:
        raise BackendUnavailable(f"{needed_for} needs SciPy (scipy.{module}), which cannot be imported here "
                                 f"({describe(exc)}): pip install scipy") from exc


def landmark_points(points: Any, name: str) -> np.ndarray:
    """``points`` as C-contiguous float64 ``(N, 2)`` rows, every coordinate finite.

    :raises ValueError: not ``(N, 2)`` rows, or a NaN or an infinity among them (Qhull and the tree
        have no answer for it).
    :raises TypeError: not real numbers.
    """
    array = _numeric(points, name)
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"{name} must be (N, 2) rows of (y, x) or (x, y) coordinates, got shape {array.shape}")
    rows = np.ascontiguousarray(array, dtype=np.float64)
    if not np.isfinite(rows).all():
        raise ValueError(f"{name} holds a NaN or an infinity")
    return rows


def triangle_tolerance(tolerance: Any) -> float:
    """The descriptors' largest distance: one finite number, at least zero.

    :raises TypeError: not a real number.
    :raises ValueError: negative, NaN or infinite.
    """
    value = _scalar(tolerance)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"tolerance must be a number, got {type(value).__name__} ({_shown(value)})")
    number = float(value)
    if not (math.isfinite(number) and number >= 0.0):
        raise ValueError(f"tolerance must be a finite number at least zero, got {_shown(value)}")
    return number


def delaunay_triangles(points: np.ndarray, name: str) -> np.ndarray:
    """SciPy's ``Delaunay(points).simplices``, as ``spacr.ops_merge.triangle_descriptors`` has them:
    none for fewer than three points.

    :param points: :func:`landmark_points`' answer.
    :param name: the caller's argument name, for the message.
    :returns: C-contiguous ``(M, 3)`` indices into ``points`` (SciPy's dtype), read-only.
    :raises ValueError: Qhull cannot triangulate the points (all on one line, say).
    :raises BackendUnavailable: SciPy is not installed (fewer than three points need no SciPy).
    """
    if points.shape[0] < 3:
        return NO_TRIANGLES
    spatial = _scipy("spatial", "match_triangles' Delaunay triangles")
    try:
        simplices = np.ascontiguousarray(spatial.Delaunay(points).simplices)
    except spatial.QhullError as exc:
        raise ValueError(f"{name}: Qhull cannot triangulate these points ({describe(exc)})") from None
    simplices.setflags(write=False)
    return simplices


def peak_spacing(min_distance: Any) -> int:
    """``min_distance`` as a whole number of pixels, at least 1.

    :raises TypeError: not an integer (or a float holding one).
    :raises ValueError: a fraction, or below 1.
    """
    distance = _integer(min_distance, "min_distance")
    if distance < 1:
        raise ValueError(f"min_distance must be at least 1 pixel, got {distance}")
    return distance


# ---- what a backend's answer must look like, and when two answers agree -------------------------


def check_votes(result: Any, expected: tuple[int, int]) -> str | None:
    """``(scales, angles, source, target)``: float64 ``(K,)``, ``(K,)``, ``(K, 3, 2)`` and ``(K, 3, 2)``,
    at most one vote per pair of triangles, every scale a positive finite number and every angle
    within ``[-pi, pi]`` (``arctan2``'s range)."""
    sources, targets = expected
    if not isinstance(result, tuple) or len(result) != 4:
        return f"returned {type(result).__name__}, not a (scales, angles, source, target) tuple"
    scales, angles, source, target = result
    if not isinstance(scales, np.ndarray) or scales.dtype != np.float64 or scales.ndim != 1:
        return "scales are not a float64 (K,) array"
    votes = scales.shape[0]
    if votes > sources * targets:
        return f"returned {votes} votes from {sources} x {targets} pairs of triangles"
    if not isinstance(angles, np.ndarray) or angles.dtype != np.float64 or angles.shape != (votes,):
        return f"angles are not float64 of shape ({votes},)"
    for label, vertices in (("source", source), ("target", target)):
        if not isinstance(vertices, np.ndarray) or vertices.dtype != np.float64 or vertices.shape != (votes, 3, 2):
            return f"{label} vertices are not float64 of shape ({votes}, 3, 2)"
    if votes and not (np.isfinite(scales).all() and (scales > 0).all()):
        return "returned a scale that is not a positive finite number"
    if votes and not (np.abs(angles) <= math.pi).all():
        return "returned an angle outside [-pi, pi]"
    return None


def _same_bits(expected: Any, got: Any) -> bool:
    """The same float64 values to the bit, a NaN matching a NaN."""
    want = np.asarray(expected, dtype=np.float64)
    have = np.asarray(got, dtype=np.float64)
    if want.shape != have.shape:
        return False
    return bool(((want.view(np.int64) == have.view(np.int64)) | (np.isnan(want) & np.isnan(have))).all())


def agree_match(expected: Any, got: Any) -> tuple[bool, str]:
    """The same count of votes and the same consensus to the bit (scale, rotation, translation):
    every backend makes the per-item calls' arithmetic, and a median does not depend on the order
    the votes come in."""
    votes, scale, rotation, translation = expected
    if int(got[0]) != int(votes):
        return False, f"got {int(got[0])} votes, the reference {int(votes)}"
    for label, want, have in (("scale", scale, got[1]), ("rotation", rotation, got[2]),
                              ("translation", translation, got[3])):
        if not _same_bits(want, have):
            return False, f"the {label} differs: got {have!r}, the reference {want!r}"
    return True, "the same votes and consensus, bit for bit"


def check_spaced(result: Any, expected: tuple[tuple[int, int], int, int]) -> str | None:
    """int64 ``(N, 2)``, ``N`` at most the points given, every row inside the field's interior (at
    least ``min_distance`` from each edge)."""
    (height, width), distance, given = expected
    if not isinstance(result, np.ndarray) or result.dtype != _I64 or result.ndim != 2 or result.shape[1] != 2:
        return f"returned {getattr(result, 'dtype', type(result).__name__)}" \
               f"{list(getattr(result, 'shape', ()))}, expected int64 (N, 2) peaks"
    if result.shape[0] > given:
        return f"returned {result.shape[0]} peaks from {given} points"
    if result.shape[0]:
        rows, cols = result[:, 0], result[:, 1]
        if rows.min() < distance or rows.max() >= height - distance or cols.min() < distance \
                or cols.max() >= width - distance:
            return "returned peaks within min_distance of the field's edge"
    return None


def agree_spaced(expected: Any, got: Any) -> tuple[bool, str]:
    """The same peaks in the same order (the order is the answer: brightest first)."""
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return False, f"got {got.dtype}{list(got.shape)}, the reference gave {expected.dtype}{list(expected.shape)}"
    same = bool(np.array_equal(got, expected))
    return same, "the same peaks in the same order" if same else "the peaks or their order differ"


# ---- the inputs the table tries them on -------------------------------------------------------


def _nuclear_stain(side: int, nuclei: int, rng: np.random.Generator) -> np.ndarray:
    """A nuclear channel: camera noise, nuclei as Gaussians of 6 to 12 px, whole counts, float32."""
    plane = rng.normal(400.0, 30.0, (side, side)).astype(_F32)
    for y, x, peak, radius in zip(rng.uniform(0, side, nuclei), rng.uniform(0, side, nuclei),
                                  rng.uniform(1500, 4000, nuclei), rng.uniform(6, 12, nuclei), strict=True):
        top, bottom = int(max(0, y - 3 * radius)), int(min(side, y + 3 * radius + 1))
        left, right = int(max(0, x - 3 * radius)), int(min(side, x + 3 * radius + 1))
        ys, xs = np.mgrid[top:bottom, left:right]
        plane[top:bottom, left:right] += (peak * np.exp(-((ys - y) ** 2 + (xs - x) ** 2)
                                                        / (2 * radius * radius))).astype(_F32)
    return np.round(plane).astype(_F32)


def small_spacing() -> Example:
    """Flat tops in 2 x 2 blocks of three levels: equal peaks everywhere, where only the walk's order
    (brightest first, ties in the order given) decides which are kept."""
    blocks = np.array([[0, 2, 1, 2, 0, 1], [2, 2, 0, 1, 2, 2], [1, 0, 2, 2, 0, 1], [2, 1, 0, 2, 1, 2],
                       [0, 2, 2, 1, 2, 0]])
    field = np.kron(blocks, np.ones((2, 2))).astype(_F32)
    points = np.argwhere(field > 0)
    return Example("every non-zero pixel of a 10x12 field of plateaus, min_distance 2", (field, points, 2))


def bench_spacing(quick: bool, rng: np.random.Generator) -> Example:
    """spaCR's phenotype plane as ``nuclear_points`` spaces it: the stain smoothed at sigma 3, its
    local maxima of 17-pixel windows above the 99th percentile, ``min_distance=8``.

    :raises BackendUnavailable: SciPy is not installed (the bench reports the operation as skipped).
    """
    ndimage = _scipy("ndimage", "spaced_peaks' bench input (a smoothed plane's maxima)")
    side, nuclei = (512, 75) if quick else (2960, 2500)
    smooth = ndimage.gaussian_filter(_nuclear_stain(side, nuclei, rng), 3.0)
    floor = np.percentile(smooth, 99.0)
    maxima = np.argwhere((smooth == ndimage.maximum_filter(smooth, 17, mode="nearest")) & (smooth > floor))
    return Example(f"{side}x{side} smoothed nuclear stain, its {maxima.shape[0]:,} maxima above the 99th "
                   "percentile, min_distance 8", (smooth, maxima, 8))


def _anchor_pair(sources: int, targets: int, scale: float, degrees: float,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One anchor pair as spaCR's phenotype phase hands it to ``align_by_triangles``: whole-pixel
    nuclear centres of a phenotype field, and the sequencing nuclei of the window around it, the
    shared ones moved by a similarity (``scale`` sequencing pixels per phenotype pixel) and jittered,
    a sixth of the phenotype nuclei with no partner."""
    window = 3000.0
    target = rng.uniform(0.0, window, (targets, 2))
    shared = round(sources * 0.85)
    side = window * float(np.sqrt(shared / targets))
    corner = rng.uniform(0.0, window - side, 2)
    inside = np.flatnonzero(np.all((target >= corner) & (target < corner + side), axis=1))
    chosen = rng.permutation(inside)[:shared]
    angle = np.radians(degrees)
    rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    seen = target[chosen] + rng.normal(0.0, 0.7, (chosen.size, 2))
    moved = ((seen - corner) @ rotation) / scale
    missed = rng.uniform(0.0, side / scale, (sources - chosen.size, 2))
    return np.round(rng.permutation(np.concatenate([moved, missed]))), np.round(target)


def small_triangles() -> Example:
    """Twelve points and the same points moved by a similarity among eight others, whole pixels."""
    source = np.array([[3, 4], [10, 2], [7, 9], [15, 11], [2, 14], [12, 17], [18, 5], [9, 21], [20, 19],
                       [5, 26], [16, 25], [23, 12]], dtype=np.float64)
    turn = np.array([[0.8, -0.6], [0.6, 0.8]])
    moved = np.round(2.0 * source @ turn.T + np.array([40.0, 7.0]))
    others = np.array([[1, 1], [60, 3], [33, 70], [70, 60], [5, 50], [48, 22], [66, 31], [25, 8]], dtype=np.float64)
    return Example("12 points against 20, 8 of them unmatched", (source, np.concatenate([moved, others])),
                   keywords=(("tolerance", 0.02),))


def bench_triangles(quick: bool, rng: np.random.Generator) -> Example:
    """One anchor pair of spaCR's phenotype phase: 100 phenotype nuclei against the 2,000 sequencing
    nuclei of the window around them, whole pixels, 0.19 sequencing pixels per phenotype pixel."""
    sources, targets = (40, 400) if quick else (100, 2000)
    source, target = _anchor_pair(sources, targets, 0.19, 3.0, rng)
    return Example(f"{sources} to {targets:,} whole-pixel nuclei, tolerance 0.02", (source, target),
                   keywords=(("tolerance", 0.02),))
