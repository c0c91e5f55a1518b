"""The conformance checks of the point operations: read attribution and the merge's inlier counts,
each compared with :mod:`spacr_accel_core.reference` (and with spaCR's own ``attribute_reads``
where spaCR is installed) on hypothesis input.

The points are drawn on a half-pixel lattice, so that exact ties are common: two nuclei of one
area equally far from a read (the lowest index must win, or the read is refused), a gap exactly
``footprint`` or a separation exactly ``tie``, a moved point exactly ``radius`` from a target (3,
4, 5 triangles); areas of zero and negative areas (a point) among them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .. import ops, reference

_SETTINGS = settings(max_examples=40, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                            HealthCheck.differing_executors])  # one test, many backend classes

_LATTICE = st.integers(-40, 40).map(lambda value: value / 2.0)
"""Half-pixel coordinates: equal distances, and so ties, are common."""


@st.composite
def attribution_cases(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """Reads, nuclei (areas from a few values, zero and negative included), a footprint and a tie."""
    reads = draw(st.integers(0, 30))
    objects = draw(st.integers(0, 12))
    peaks = draw(hnp.arrays(np.float64, (reads, 2), elements=_LATTICE))
    centroids = draw(hnp.arrays(np.float64, (objects, 2), elements=_LATTICE))
    areas = draw(hnp.arrays(np.float64, objects,
                            elements=st.sampled_from([0.0, -3.0, np.pi, 4 * np.pi, 25 * np.pi, 12.5, 300.0])))
    footprint = draw(st.sampled_from([0.0, 1.0, 2.5, 10.0]))
    tie = draw(st.sampled_from([0.0, 0.5, 1.0, 3.0]))
    return peaks, centroids, areas, footprint, tie


@st.composite
def count_cases(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, float]:
    """Moved sets (one, or a stack), targets and a radius on the lattice's distances."""
    lead = draw(st.sampled_from([(), (1,), (3,), (2, 2)]))
    points = draw(st.integers(0, 12))
    moved = draw(hnp.arrays(np.float64, (*lead, points, 2), elements=_LATTICE))
    targets = draw(st.integers(0, 12))
    target = draw(hnp.arrays(np.float64, (targets, 2), elements=_LATTICE))
    radius = draw(st.sampled_from([0.0, 0.5, 2.5, 5.0, 7.0, 100.0]))
    return moved, target, radius


def _assert_attribution(got: tuple[np.ndarray, np.ndarray], expected: tuple[np.ndarray, np.ndarray]) -> None:
    owner, ambiguous = got
    assert owner.dtype == np.int64 and ambiguous.dtype == np.bool_
    np.testing.assert_array_equal(owner, expected[0])
    np.testing.assert_array_equal(ambiguous, expected[1])


class PointsConformance:
    """Mixed into :class:`~spacr_accel_core.testing.BackendConformance`; uses its ``_forced``."""

    backend: ClassVar[str]
    _forced: Callable[..., Any]

    @_SETTINGS
    @given(case=attribution_cases())
    def test_attribute_reads_matches_reference(self, case: tuple[Any, ...]) -> None:
        peaks, centroids, areas, footprint, tie = case
        got = self._forced("attribute_reads", ops.attribute_reads, peaks, centroids, areas, footprint=footprint,
                           tie=tie, core_may_answer=True)
        _assert_attribution(got, reference.attribute_reads(peaks, centroids, areas, footprint=footprint, tie=tie))

    @_SETTINGS
    @given(case=attribution_cases())
    def test_attribute_reads_matches_spacr(self, case: tuple[Any, ...]) -> None:
        sbs = pytest.importorskip("spacr.ops_sbs")
        peaks, centroids, areas, footprint, tie = case
        got = self._forced("attribute_reads", ops.attribute_reads, peaks, centroids, areas, footprint=footprint,
                           tie=tie, core_may_answer=True)
        spacr_attribute = getattr(sbs.attribute_reads, "__spacr_accel_original__", sbs.attribute_reads)
        _assert_attribution(got, spacr_attribute(peaks, centroids, areas, footprint=footprint, tie=tie))

    def test_attribute_reads_on_a_field(self) -> None:
        """A sequencing field's worth: 5,000 reads among 800 nuclei of spaCR's areas."""
        rng = np.random.default_rng(11)
        peaks, centroids = rng.uniform(0, 800, (5_000, 2)), rng.uniform(0, 800, (800, 2))
        areas = rng.uniform(150, 450, 800)
        got = self._forced("attribute_reads", ops.attribute_reads, peaks, centroids, areas)
        _assert_attribution(got, reference.attribute_reads(peaks, centroids, areas))
        assert (got[0] >= 0).sum() > 1_000 and got[1].sum() > 0  # owners and refusals both occur

    @_SETTINGS
    @given(case=count_cases())
    def test_count_within_matches_reference(self, case: tuple[np.ndarray, np.ndarray, float]) -> None:
        moved, target, radius = case
        got = self._forced("count_within", ops.count_within, moved, target, radius, core_may_answer=True)
        expected = reference.count_within(moved, target, radius)
        assert got.dtype == np.int64 and got.shape == moved.shape[:-2]
        np.testing.assert_array_equal(got, expected)

    def test_count_within_on_the_boundary(self) -> None:
        """Points exactly ``radius`` away count; so does one whose squared distance is a float64
        above ``radius ** 2`` but whose rounded distance is ``radius`` (SciPy's comparison); the
        next distance up does not."""
        target = np.array([[0.0, 0.0], [100.0, 100.0]])
        edge = np.array([[3.0, 4.0], [100.0, 105.0], [np.nextafter(3.0, 4.0), 4.0], [0.0, np.nextafter(5.0, 6.0)]])
        assert edge[2, 0] ** 2 + edge[2, 1] ** 2 > 25.0 and np.sqrt(edge[2, 0] ** 2 + edge[2, 1] ** 2) == 5.0
        sets = np.stack([edge[:2], edge[2:], edge[[0, 3]], edge[[3, 3]]])
        got = self._forced("count_within", ops.count_within, sets, target, 5.0)
        np.testing.assert_array_equal(got, [2, 1, 1, 0])


    def test_count_within_of_many_candidates(self) -> None:
        """Candidate transforms of 300 points against 1,000 targets: the reference's counts."""
        rng = np.random.default_rng(12)
        target = rng.uniform(0, 1000, (1_000, 2))
        moved = target[rng.integers(0, 1_000, (40, 300))] + rng.normal(0, 8, (40, 300, 2))
        got = self._forced("count_within", ops.count_within, moved, target, 12.0)
        np.testing.assert_array_equal(got, reference.count_within(moved, target, 12.0))
        assert got.min() > 0 and got.max() < 300
