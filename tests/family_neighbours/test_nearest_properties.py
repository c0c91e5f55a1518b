"""Property tests: ``ops.nearest_neighbours`` on the default backend against a plain reference
written here (the float64 brute force on the float32 coordinates, summed coordinate by coordinate
in order): ties to the lowest index, any chunk, empty sets, the self match."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import spacr_accel_core
from spacr_accel_core import ops

SETTINGS = settings(deadline=None, max_examples=80, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
FEW = settings(deadline=None, max_examples=15, database=None, suppress_health_check=[HealthCheck.too_slow])


# ---- references -----------------------------------------------------------------------------------


def reference_nearest(source: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Brute force in float64 on the float32 coordinates, summed coordinate by coordinate in order."""
    s = np.asarray(source, dtype=np.float32).astype(np.float64)
    t = np.asarray(target, dtype=np.float32).astype(np.float64)
    squared = np.zeros((s.shape[0], t.shape[0]))
    for axis in range(s.shape[1]):
        squared += np.square(s[:, None, axis] - t[None, :, axis])
    index = np.argmin(squared, axis=1)  # the first minimum: ties to the lowest index
    distance = np.sqrt(squared[np.arange(s.shape[0]), index]).astype(np.float32)
    return index.astype(np.int64), distance


# ---- nearest_neighbours -----------------------------------------------------------------------------


@st.composite
def grid_points(draw, max_rows: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Integer-grid points in a tiny box: duplicates and exact ties everywhere."""
    width = draw(st.integers(1, 4))
    side = draw(st.integers(1, 4))
    dtype = draw(st.sampled_from([np.int64, np.float32, np.float64, np.int8]))
    coordinates = st.integers(-side, side)
    source = draw(hnp.arrays(dtype, (draw(st.integers(1, max_rows)), width), elements=coordinates))
    target = draw(hnp.arrays(dtype, (draw(st.integers(1, max_rows)), width), elements=coordinates))
    return source, target


@st.composite
def float_points(draw) -> tuple[np.ndarray, np.ndarray]:
    width = draw(st.integers(1, 5))
    coordinates = st.floats(-1e3, 1e3, width=32)
    source = draw(hnp.arrays(np.float32, (draw(st.integers(1, 30)), width), elements=coordinates))
    target = draw(hnp.arrays(np.float32, (draw(st.integers(1, 30)), width), elements=coordinates))
    return source, target


def check_nearest(source: np.ndarray, target: np.ndarray, **kwargs: object) -> None:
    index, distance = ops.nearest_neighbours(source, target, **kwargs)
    want_index, want_distance = reference_nearest(source, target)
    assert index.dtype == np.int64 and distance.dtype == np.float32
    assert index.shape == distance.shape == (source.shape[0],)
    np.testing.assert_array_equal(index, want_index)
    np.testing.assert_array_equal(distance, want_distance)


@SETTINGS
@given(points=grid_points())
def test_nearest_on_a_grid_ties_go_to_the_lowest_index(points):
    check_nearest(*points)


@SETTINGS
@given(points=float_points())
def test_nearest_on_float_points_matches_brute_force(points):
    check_nearest(*points)


@FEW
@given(seed=st.integers(0, 2**32 - 1), width=st.sampled_from([2, 3, 16, 24]), side=st.integers(2, 6),
       rows=st.tuples(st.integers(257, 420), st.integers(257, 420)))
def test_nearest_large_grids_with_many_ties(seed, width, side, rows):
    """Enough pairs for the backend's fast paths (KD-tree for narrow, matrix product for wide)."""
    rng = np.random.default_rng(seed)
    source = rng.integers(-side, side + 1, size=(rows[0], width)).astype(np.float32)
    target = rng.integers(-side, side + 1, size=(rows[1], width)).astype(np.float32)
    target[rng.integers(0, rows[1], 40)] = target[rng.integers(0, rows[1], 40)]  # exact duplicates
    check_nearest(source, target)


@FEW
@given(seed=st.integers(0, 2**32 - 1), width=st.sampled_from([2, 16]))
def test_nearest_large_float_points(seed, width):
    rng = np.random.default_rng(seed)
    source = (rng.random((400, width)) * 2048).astype(np.float32)
    target = (rng.random((350, width)) * 2048).astype(np.float32)
    check_nearest(source, target)


@SETTINGS
@given(points=grid_points(max_rows=60), chunk=st.integers(1, 70))
def test_nearest_does_not_depend_on_chunk(points, chunk):
    source, target = points
    index, distance = ops.nearest_neighbours(source, target, chunk=chunk)
    whole_index, whole_distance = ops.nearest_neighbours(source, target)
    np.testing.assert_array_equal(index, whole_index)
    np.testing.assert_array_equal(distance, whole_distance)


@FEW
@given(seed=st.integers(0, 2**32 - 1), chunk=st.sampled_from([1, 7, 64, 1000]), width=st.sampled_from([2, 16]))
def test_nearest_large_does_not_depend_on_chunk(seed, chunk, width):
    rng = np.random.default_rng(seed)
    source = rng.integers(0, 5, size=(300, width)).astype(np.float32)
    target = rng.integers(0, 5, size=(280, width)).astype(np.float32)
    index, distance = ops.nearest_neighbours(source, target, chunk=chunk)
    whole_index, whole_distance = ops.nearest_neighbours(source, target, chunk=ops.CHUNK)
    np.testing.assert_array_equal(index, whole_index)
    np.testing.assert_array_equal(distance, whole_distance)


@given(rows=st.integers(1, 10), width=st.integers(1, 4))
@settings(deadline=None, max_examples=20, database=None)
def test_nearest_with_no_targets_answers_minus_one_and_inf(rows, width):
    index, distance = ops.nearest_neighbours(np.ones((rows, width)), np.empty((0, width)))
    assert index.dtype == np.int64 and distance.dtype == np.float32
    np.testing.assert_array_equal(index, np.full(rows, -1))
    assert np.isposinf(distance).all() and distance.shape == (rows,)
    assert spacr_accel_core.last_dispatch().backend == "core"


def test_nearest_with_no_sources_is_empty():
    index, distance = ops.nearest_neighbours(np.empty((0, 3)), np.ones((4, 3)))
    assert index.shape == distance.shape == (0,)
    assert index.dtype == np.int64 and distance.dtype == np.float32
    index, distance = ops.nearest_neighbours(np.empty((0, 3)), np.empty((0, 3)))
    assert index.shape == distance.shape == (0,)


def test_nearest_coordinates_are_taken_as_float32():
    # 16777217 is not a float32: it rounds to 16777216, a tie with target 0, so index 0 wins.
    source = np.array([[16777217.0]])
    target = np.array([[16777216.0], [16777218.0]])
    index, distance = ops.nearest_neighbours(source, target)
    assert index.tolist() == [0] and distance.tolist() == [0.0]


def test_nearest_self_match_is_zero():
    points = np.random.default_rng(5).random((50, 3))
    assert len(np.unique(points, axis=0)) == 50
    index, distance = ops.nearest_neighbours(points, points)
    np.testing.assert_array_equal(index, np.arange(50))
    assert not distance.any()
