"""The conformance checks of the calls spaCR's science makes around the primitives: the k nearest
within a distance, binary descriptors, mutual matching, peaks as coordinates, stacks and ``out=``.

Each is compared with :mod:`spacr_accel_core.reference` (the plain definitions) on
hypothesis-generated input full of ties: integer lattices, duplicated points, equal descriptors,
plateaus and NaN in fields. A backend that does not take an argument (``k``, ``metric``) declines
such a call, and the check then verifies that automatic dispatch answered it instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .. import ops, reference
from ._references import assert_same_field, reference_maximum_filter

_T = TypeVar("_T")

_SETTINGS = settings(max_examples=25, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                            HealthCheck.differing_executors])  # one test, many backend classes


@st.composite
def lattice_points(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Two small point sets on an integer lattice (ties and duplicates everywhere) or continuous."""
    width = draw(st.sampled_from([1, 2, 3, 8]))
    n, m = draw(st.integers(1, 30)), draw(st.integers(1, 30))
    if draw(st.booleans()):
        grid = st.integers(-3, 3)
        return (draw(hnp.arrays(np.int32, (n, width), elements=grid)).astype(np.float32),
                draw(hnp.arrays(np.int32, (m, width), elements=grid)).astype(np.float32))
    coordinates = st.floats(-100, 100, allow_nan=False, allow_infinity=False, width=32)
    return (draw(hnp.arrays(np.float32, (n, width), elements=coordinates)),
            draw(hnp.arrays(np.float32, (m, width), elements=coordinates)))


@st.composite
def descriptors(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Packed binary descriptors: a few distinct rows repeated (equal distances), any width."""
    width = draw(st.sampled_from([1, 3, 8, 32]))
    n, m = draw(st.integers(1, 30)), draw(st.integers(1, 30))
    pool = draw(hnp.arrays(np.uint8, (draw(st.integers(1, 6)), width)))
    pick = st.integers(0, len(pool) - 1)
    return (pool[draw(hnp.arrays(np.int64, n, elements=pick))],
            pool[draw(hnp.arrays(np.int64, m, elements=pick))])


@st.composite
def peak_fields(draw: st.DrawFn) -> np.ndarray:
    """A field or a stack of fields with plateaus (small integers), NaN and signed zeros."""
    shape = draw(st.sampled_from([(1, 1), (5, 7), (12, 9), (2, 6, 8), (3, 1, 10)]))
    values = st.one_of(st.integers(0, 3).map(float), st.sampled_from([np.nan, -0.0, 2.5]))
    return draw(hnp.arrays(np.float32, shape, elements=values))


class ScienceConformance:
    """Mixed into :class:`~spacr_accel_core.testing.BackendConformance`; uses its ``_forced``."""

    backend: ClassVar[str]
    _forced: Callable[..., Any]

    @_SETTINGS
    @given(points=lattice_points(), k=st.integers(1, 5), bound=st.sampled_from([None, 0.0, 1.0, 2.5, 40.0]))
    def test_k_nearest_within_a_distance_matches_reference(self, points: tuple[np.ndarray, np.ndarray],
                                                           k: int, bound: float | None) -> None:
        source, target = points
        index, distance = self._forced("nearest_neighbours", ops.nearest_neighbours, source, target,
                                       k=k, max_distance=bound)
        expected_index, expected_distance = reference.k_nearest(source, target, k, bound)
        if k == 1:
            expected_index, expected_distance = expected_index[:, 0], expected_distance[:, 0]
        np.testing.assert_array_equal(index, expected_index)
        np.testing.assert_array_equal(distance, expected_distance)

    @_SETTINGS
    @given(bits=descriptors(), k=st.integers(1, 4), bound=st.sampled_from([None, 0, 3, 12]))
    def test_hamming_matches_reference(self, bits: tuple[np.ndarray, np.ndarray], k: int,
                                       bound: int | None) -> None:
        source, target = bits
        index, distance = self._forced("nearest_neighbours", ops.nearest_neighbours, source, target,
                                       k=k, max_distance=bound, metric="hamming")
        expected_index, expected_distance = reference.hamming_nearest(source, target, k, bound)
        if k == 1:
            expected_index, expected_distance = expected_index[:, 0], expected_distance[:, 0]
        np.testing.assert_array_equal(index, expected_index)
        np.testing.assert_array_equal(distance, expected_distance)

    @_SETTINGS
    @given(points=lattice_points(), bound=st.sampled_from([None, 1.0, 3.0]))
    def test_mutual_pairs_match_reference(self, points: tuple[np.ndarray, np.ndarray], bound: float | None) -> None:
        first, second = points
        pairs = self._forced("nearest_neighbours", ops.mutual_nearest_neighbours, first, second,
                             max_distance=bound, recorded="mutual_nearest_neighbours")
        np.testing.assert_array_equal(pairs, reference.mutual_nearest(first, second, bound))

    @_SETTINGS
    @given(field=peak_fields(), size=st.integers(2, 7), threshold=st.sampled_from([None, 0.5, 2.0, -1.0]))
    def test_local_maxima_matches_reference(self, field: np.ndarray, size: int, threshold: float | None) -> None:
        window = size + 1 if size % 2 == 0 else size
        whole = window >= 2 * max(field.shape[-2:]) - 1  # a window this wide is the core's to answer
        peaks = self._forced("local_maxima", ops.local_maxima, field, size, threshold=threshold,
                             core_may_answer=whole)
        np.testing.assert_array_equal(peaks, reference.local_maxima(field, size, threshold))

    @_SETTINGS
    @given(field=peak_fields(), size=st.integers(2, 7))
    def test_maximum_filter_of_a_stack_is_each_field_filtered(self, field: np.ndarray, size: int) -> None:
        window = size + 1 if size % 2 == 0 else size
        whole = window >= 2 * max(field.shape[-2:]) - 1
        out = np.full(field.shape, 7.0, np.float32)
        got = self._forced("maximum_filter", ops.maximum_filter, field, size, out=out, core_may_answer=whole)
        assert got is out
        flat = field.reshape(-1, *field.shape[-2:])
        for number, plane in enumerate(got.reshape(flat.shape)):
            assert_same_field(plane, reference_maximum_filter(flat[number], size))

    def test_matmul_into_out(self) -> None:
        rng = np.random.default_rng(11)
        first = rng.integers(-8, 8, (300, 4)).astype(np.float32)
        second = rng.integers(-8, 8, (4, 4)).astype(np.float32)
        out = np.full((300, 4), np.nan, np.float32)
        got = self._forced("matmul", ops.matmul, first, second, out=out)
        assert got is out
        np.testing.assert_array_equal(got, first @ second)  # small integers: every product exact
