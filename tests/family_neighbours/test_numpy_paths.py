"""The NumPy backend's three nearest-neighbour methods, each against a reference.

The conformance suite reaches these only through the size heuristics; here every method is driven
directly on hypothesis input, so a tie or rounding bug in the KD-tree or matrix path cannot hide
behind the brute force that small inputs take."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import ops
from spacr_accel_core.testing import reference_nearest
from spacr_accel_numpy import _neighbours

METHODS = [_neighbours._brute, _neighbours._kdtree, _neighbours._matrix]


@st.composite
def point_sets(draw):
    width = draw(st.integers(1, 20))
    n, m = draw(st.integers(1, 60)), draw(st.integers(1, 60))
    if draw(st.integers(0, 3)) == 0:
        # Magnitudes where a float32 expansion overflows (1e19, 3e37) or underflows (1e-22).
        scale = draw(st.sampled_from([1e19, 3e37, 1e-22, 3e-23, 1e-3]))
        values = st.floats(-1, 1, allow_nan=False, width=32)
        return (draw(hnp.arrays(np.float32, (n, width), elements=values)) * np.float32(scale),
                draw(hnp.arrays(np.float32, (m, width), elements=values)) * np.float32(scale))
    if draw(st.booleans()):
        grid = st.integers(-2, 2).map(float)
        offset = draw(st.sampled_from([0.0, 1000.0, -3e5]))
        source = draw(hnp.arrays(np.float32, (n, width), elements=grid)) + np.float32(offset)
        target = draw(hnp.arrays(np.float32, (m, width), elements=grid)) + np.float32(offset)
        return source, target
    values = st.floats(-1e5, 1e5, allow_nan=False, width=32)
    return (draw(hnp.arrays(np.float32, (n, width), elements=values)),
            draw(hnp.arrays(np.float32, (m, width), elements=values)))


@pytest.mark.parametrize("method", METHODS, ids=lambda f: f.__name__.strip("_"))
@settings(max_examples=80, deadline=None)
@given(points=point_sets(), chunk=st.integers(1, 70))
def test_every_nearest_method_is_exact(method, points, chunk):
    source, target = points
    index, squared = method(source, target, chunk)
    expected_index, expected_distance = reference_nearest(source, target)
    assert np.array_equal(index, expected_index)
    assert np.array_equal(np.sqrt(squared).astype(np.float32), expected_distance)


def test_float32_expansion_alone_would_pick_wrong_neighbours():
    """Why the matrix path re-checks: its raw argmin is wrong on clustered, offset points."""
    rng = np.random.default_rng(2)
    centre = rng.uniform(-1000, 1000, 32)
    source = (centre + rng.standard_normal((400, 32)) * 0.05).astype(np.float32)
    target = (centre + rng.standard_normal((3000, 32)) * 0.05).astype(np.float32)
    approx = (np.square(target).sum(1)[None, :] - 2 * source @ target.T)
    naive = np.argmin(approx, axis=1)
    expected, _ = reference_nearest(source, target)
    assert np.count_nonzero(naive != expected) > 0
    index, _ = _neighbours._matrix(source, target, 4096)
    assert np.array_equal(index, expected)


@pytest.mark.parametrize("scale", [1e19, 3e37, 1e-22, 3e-23])
def test_wide_points_of_extreme_magnitude_through_ops(scale):
    """Large enough to take the matrix path (N*M > 65536, D >= 16), at magnitudes where float32
    squares overflow or underflow: the answer is still the reference's."""
    rng = np.random.default_rng(6)
    source = (rng.standard_normal((300, 16)) * scale).astype(np.float32)
    target = (rng.standard_normal((300, 16)) * scale).astype(np.float32)
    index, distance = ops.nearest_neighbours(source, target, backend="numpy")
    expected = reference_nearest(source, target)
    assert np.array_equal(index, expected[0]) and np.array_equal(distance, expected[1])


def test_kdtree_resolves_many_way_ties_to_the_lowest_index():
    target = np.zeros((50, 2), np.float32)  # fifty copies of one point
    target[::7] = 1.0
    source = np.array([[0.0, 0.0], [1.0, 1.0], [0.5, 0.5]], np.float32)
    index, _ = _neighbours._kdtree(source, target, 2)
    assert index.tolist() == reference_nearest(source, target)[0].tolist() == [1, 0, 0]
