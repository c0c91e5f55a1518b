"""Tie-heavy nearest-neighbour input on the NumPy backend (duplicates, points equal only in float32,
tight clusters beside far outliers), through the ops and through each method, against the plain
reference: large enough that the KD-tree and matrix paths run, not the brute force."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import ops
from spacr_accel_core.testing import reference_nearest


@st.composite
def tie_heavy(draw):
    width = draw(st.sampled_from([1, 2, 3, 8, 16, 20]))
    pool = draw(hnp.arrays(np.float32, (draw(st.integers(1, 6)), width),
                           elements=st.sampled_from([0.0, -0.0, 1.0, 2.0, -1.0, 1e7, 1e7 + 1.0])))
    n, m = draw(st.integers(260, 400)), draw(st.integers(260, 400))  # n * m above the brute-force size
    source = pool[draw(hnp.arrays(np.int64, n, elements=st.integers(0, pool.shape[0] - 1)))]
    target = pool[draw(hnp.arrays(np.int64, m, elements=st.integers(0, pool.shape[0] - 1)))]
    if draw(st.booleans()):  # a few distinct points too, so not everything is a tie
        extra = draw(hnp.arrays(np.float32, (draw(st.integers(1, 20)), width), elements=st.floats(-3, 3, width=32)))
        target = np.concatenate([target, extra])
    return source, target


@settings(max_examples=40, deadline=None)
@given(points=tie_heavy(), chunk=st.integers(1, 500))
def test_duplicates_go_to_the_lowest_index(points, chunk):
    source, target = points
    index, distance = ops.nearest_neighbours(source, target, backend="numpy", chunk=chunk)
    expected_index, expected_distance = reference_nearest(source, target)
    assert np.array_equal(index, expected_index)
    assert np.array_equal(distance, expected_distance)


@pytest.mark.parametrize("width", [2, 8, 20])
def test_jitter_below_float32_cluster_and_outliers(width):
    rng = np.random.default_rng(width)
    jitter = 1e7 + rng.uniform(0, 1e-3, (1500, width))  # one point once in float32
    cluster = rng.normal(0, 1e-3, (1500, width))
    cluster[rng.choice(1500, 15, replace=False)] = rng.normal(0, 1e4, (15, width))
    for source, target in ((jitter[:200], jitter), (cluster[:200], cluster), (cluster[:200], cluster[::-1])):
        index, distance = ops.nearest_neighbours(source, target, backend="numpy")
        expected_index, expected_distance = reference_nearest(source, target)
        assert np.array_equal(index, expected_index)
        assert np.array_equal(distance, expected_distance)


def test_thirty_thousand_copies_answer_at_once():
    """30,000 copies of one point: every row ties with every row, index 0 wins (92 s before)."""
    same = np.full((30_000, 2), 7.0, dtype=np.float32)
    index, distance = ops.nearest_neighbours(same, same, backend="numpy")
    assert not index.any() and not distance.any()
