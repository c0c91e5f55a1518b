"""numba's compiled nearest-neighbour search against the plain reference and the NumPy floor, on the
same inputs, bitwise (int64 indices and float32 distances): the numba backend must be the floor's
answer, faster, never a near miss."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import last_dispatch, ops
from spacr_accel_core.testing import reference_nearest, tie_heavy_point_sets

pytestmark = pytest.mark.usefixtures("numba_compiled")  # the kernels, not the floor, under test


@st.composite
def point_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    width = draw(st.integers(1, 3))
    grid = draw(st.sampled_from([None, 0.5, 4.0]))  # coarse lattices make exact ties common
    n, m = draw(st.integers(0, 300)), draw(st.integers(1, 300))
    coordinates = st.floats(-1e4, 1e4, width=32) if grid is None else st.integers(-8, 8).map(lambda v: v * grid)
    source = draw(hnp.arrays(np.float32, (n, width), elements=coordinates))
    target = draw(hnp.arrays(np.float32, (m, width), elements=coordinates))
    return source, target


def _same_as_reference(source: np.ndarray, target: np.ndarray) -> None:
    try:
        index, distance = ops.nearest_neighbours(source, target, backend="numba")
    except RuntimeError as exc:  # a decline: the automatic answer (the floor's) is checked instead
        assert "crowd" in str(exc) or "far from every target" in str(exc), exc
        index, distance = ops.nearest_neighbours(source, target)
    expected_index, expected_distance = reference_nearest(source, target)
    assert np.array_equal(index, expected_index)
    assert distance.tobytes() == expected_distance.tobytes()


@settings(max_examples=150, deadline=None)
@given(points=point_sets())
def test_nearest_is_the_reference_bit_for_bit(points: tuple[np.ndarray, np.ndarray]) -> None:
    _same_as_reference(*points)


@settings(max_examples=60, deadline=None)
@given(points=tie_heavy_point_sets())
def test_nearest_ties_go_to_the_lowest_index(points: tuple[np.ndarray, np.ndarray]) -> None:
    source, target = points
    if source.shape[1] <= 3:
        _same_as_reference(source, target)


@pytest.mark.parametrize("width", [1, 2, 3])
def test_nearest_centroids_at_scale_match_the_floor(width: int) -> None:
    rng = np.random.default_rng(width)
    source = rng.uniform(0, 2048, (60_000, width)).astype(np.float32)
    target = (source + rng.normal(0, 0.5, source.shape)).astype(np.float32)[rng.permutation(60_000)]
    index, distance = ops.nearest_neighbours(source, target, backend="numba")
    assert last_dispatch().backend == "numba"  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record
    floor_index, floor_distance = ops.nearest_neighbours(source, target, backend="numpy")
    assert np.array_equal(index, floor_index)
    assert distance.tobytes() == floor_distance.tobytes()


@pytest.mark.parametrize("width", [16, 20, 64])
def test_wide_points_match_the_floor_and_the_reference(width: int) -> None:
    rng = np.random.default_rng(width)
    source = rng.standard_normal((700, width)).astype(np.float32)
    target = rng.standard_normal((3000, width)).astype(np.float32)
    target[::50] = target[1::50]  # exact duplicates: the first copy wins
    cluster = (1e4 + rng.normal(0, 1e-3, (300, width))).astype(np.float32)  # points float32 barely parts
    cluster[::37] = rng.normal(0, 1e4, (len(cluster[::37]), width))  # beside far outliers
    for s, t in ((source, target), (target[:500], target), (cluster, cluster[::-1]), (source[:1], target[:1])):
        index, distance = ops.nearest_neighbours(s, t, backend="numba")
        assert last_dispatch().backend == "numba"  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record
        expected_index, expected_distance = reference_nearest(s, t)
        assert np.array_equal(index, expected_index)
        assert distance.tobytes() == expected_distance.tobytes()
        floor_index, floor_distance = ops.nearest_neighbours(s, t, backend="numpy")
        assert np.array_equal(index, floor_index) and distance.tobytes() == floor_distance.tobytes()


def test_sources_far_outside_the_targets_are_settled_by_brute_force() -> None:
    rng = np.random.default_rng(7)
    target = rng.uniform(0, 100, (20_000, 2)).astype(np.float32)
    source = np.concatenate([rng.uniform(0, 100, (1000, 2)), rng.uniform(1e6, 2e6, (5, 2)),
                             [[-1e30, 3.0], [5.0, 1e30]]]).astype(np.float32)
    index, distance = ops.nearest_neighbours(source, target, backend="numba")
    expected_index, expected_distance = reference_nearest(source, target)
    assert np.array_equal(index, expected_index)
    assert distance.tobytes() == expected_distance.tobytes()


def test_a_thin_line_of_targets_does_not_build_a_huge_grid() -> None:
    x = np.linspace(0, 1e4, 50_000)
    target = np.stack([x, 1e-3 * np.sin(x)], axis=1).astype(np.float32)
    source = (target[::7] + 0.25).astype(np.float32)
    _same_as_reference(source, target)
