"""The table's parts for the two point operations of spaCR's merge and read attribution: what a
backend's answer must look like, when two answers agree, how a plugin is called, and the inputs
each is tried on.

``attribute_reads`` answers ``(owner, ambiguous)`` per read; ``count_within`` answers one count per
moved point set. Both answers are exact (integers and flags decided by float64 comparisons every
backend makes alike), so agreement is equality.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._checks import _I64
from ._results import Example

__all__ = [
    "agree_attribution",
    "agree_counts",
    "attribution_bench",
    "check_attribution",
    "check_counts",
    "counts_bench",
    "small_attribution",
    "small_counts",
    "squared_limit",
]


def squared_limit(radius: float) -> float:
    """The largest float64 ``s`` whose correctly rounded square root is at most ``radius``.

    WHY A SQUARED LIMIT. spaCR compares SciPy's KD-tree distance, ``sqrt(dy*dy + dx*dx)`` rounded
    once, with the radius. The square root is correctly rounded and monotonic, so ``sqrt(s) <=
    radius`` holds exactly for the sums ``s`` up to one float64, found here by stepping from
    ``radius * radius``: a backend then compares the sum itself, with no square root per pair, and
    every backend draws the boundary where SciPy does.

    :param radius: a finite radius, at least 0.
    :returns: the limit on the squared distance (``0.0`` for a radius of 0; ``inf`` when every
        finite sum's root is within ``radius``).
    """
    limit = radius * radius
    if math.isinf(limit):
        return math.inf
    while math.sqrt(limit) > radius:
        limit = math.nextafter(limit, -math.inf)
    while True:
        above = math.nextafter(limit, math.inf)
        if math.isinf(above) or math.sqrt(above) > radius:
            return limit
        limit = above


def check_attribution(result: Any, expected: tuple[int, int]) -> str | None:
    """``(owner, ambiguous)``: int64 ``(N,)`` owners in ``[-1, M)``, bool ``(N,)`` flags, and no
    read both owned and ambiguous (a refused read has no owner)."""
    count, objects = expected
    if not isinstance(result, tuple) or len(result) != 2:
        return f"returned {type(result).__name__}, not an (owner, ambiguous) pair"
    owner, ambiguous = result
    if not isinstance(owner, np.ndarray) or owner.dtype != _I64 or owner.shape != (count,):
        return f"owners are not int64 of shape ({count},)"
    if not isinstance(ambiguous, np.ndarray) or ambiguous.dtype != np.bool_ or ambiguous.shape != (count,):
        return f"ambiguity flags are not bool of shape ({count},)"
    if count and (owner.min() < -1 or owner.max() >= objects):
        return f"owners fall outside the {objects} objects"
    if bool(np.any(ambiguous & (owner >= 0))):
        return "a read is both owned and ambiguous"
    return None


def check_counts(result: Any, expected: tuple[int, int]) -> str | None:
    """int64 ``(B,)`` counts, each between 0 and the ``N`` points of a set."""
    sets, points = expected
    if not isinstance(result, np.ndarray) or result.dtype != _I64 or result.shape != (sets,):
        return f"returned {getattr(result, 'dtype', type(result).__name__)}" \
               f"{list(getattr(result, 'shape', ()))}, expected int64[{sets}]"
    if sets and (result.min() < 0 or result.max() > points):
        return f"a count outside 0..{points}"
    return None


def agree_attribution(expected: Any, got: Any) -> tuple[bool, str]:
    """The same owner and the same flag for every read."""
    owner, ambiguous = (np.asarray(part) for part in got)
    want_owner, want_ambiguous = (np.asarray(part) for part in expected)
    if owner.shape != want_owner.shape or ambiguous.shape != want_ambiguous.shape:
        return False, f"{owner.shape[0] if owner.ndim else 0} reads answered, expected {want_owner.shape[0]}"
    wrong = int(np.count_nonzero((owner != want_owner) | (ambiguous != want_ambiguous)))
    return wrong == 0, "identical owners and flags" if wrong == 0 else f"{wrong} reads differ"


def agree_counts(expected: Any, got: Any) -> tuple[bool, str]:
    """The same count for every set."""
    same = np.shape(got) == np.shape(expected) and bool(np.array_equal(got, expected))
    return same, "identical counts" if same else f"counts {np.asarray(got).tolist()[:8]}, " \
                                                f"expected {np.asarray(expected).tolist()[:8]}"


def small_attribution() -> Example:
    """Three reads: one clearly owned, one between two equal discs (ambiguous), one out of reach."""
    peaks = np.array([[0.0, 0.0], [10.0, 5.0], [100.0, 100.0]])
    centroids = np.array([[0.0, 3.0], [10.0, 0.0], [10.0, 10.0]])
    return Example("3 reads, 3 objects", (peaks, centroids, np.array([12.0, 20.0, 20.0])))


def small_counts() -> Example:
    """Two moved copies of three points against four targets, one landing exactly on the radius."""
    moved = np.array([[[0.0, 0.0], [3.0, 4.0], [9.0, 9.0]], [[1.0, 0.0], [0.0, 5.0], [20.0, 20.0]]])
    return Example("2 sets of 3 points to 4", (moved, np.array([[0.0, 0.0], [6.0, 8.0], [9.0, 9.5], [30, 30]]), 5.0))


def attribution_bench(quick: bool, rng: np.random.Generator) -> Example:
    """A sequencing field's reads among its nuclei (spaCR's areas and footprint)."""
    reads, objects = (2_000, 300) if quick else (10_000, 3_000)
    side = 1480.0
    peaks = rng.uniform(0, side, (reads, 2))
    centroids = rng.uniform(0, side, (objects, 2))
    return Example(f"{reads:,} reads, {objects:,} nuclei in {side:.0f} px", (peaks, centroids,
                   rng.uniform(150, 450, objects)))


def counts_bench(quick: bool, rng: np.random.Generator) -> Example:
    """Candidate transforms of an anchor field's 600 nuclei scored against its 2,678 targets."""
    sets = 64 if quick else 1_024
    target = rng.uniform(0, 3000, (2_678, 2))
    moved = rng.uniform(0, 3000, (sets, 600, 2))
    return Example(f"{sets:,} sets of 600 points to 2,678, radius 12", (moved, target, 12.0))
