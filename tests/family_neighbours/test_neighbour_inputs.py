"""The neighbour calls' inputs and the rules the core applies itself: ``k``, ``max_distance`` and
``metric`` refused before any backend, ``k`` beyond the targets and empty sets (-1 and inf),
``k=1`` keeping its shapes and bits, the bound compared on the returned float32 distance, mutual
pairs as the two one-way calls agreeing."""

from __future__ import annotations

import numpy as np
import pytest

import spacr_accel_core
from spacr_accel_core import ops, reference

RNG = np.random.default_rng(21)
RNG.random((20, 30), dtype=np.float32)  # the stream's first draw, a field, skipped: the points are its next two
POINTS = RNG.integers(-3, 4, (40, 2)).astype(np.float32)
OTHER = RNG.integers(-3, 4, (25, 2)).astype(np.float32)


@pytest.mark.parametrize(("keywords", "error", "words"), [
    ({"k": 0}, ValueError, "k must be at least 1"),
    ({"k": 2.5}, ValueError, "k must be a whole number"),
    ({"k": "2"}, TypeError, "k must be an integer"),
    ({"max_distance": -1.0}, ValueError, "max_distance must be a non-negative"),
    ({"max_distance": float("nan")}, ValueError, "max_distance must be a non-negative"),
    ({"max_distance": "far"}, TypeError, "max_distance must be"),
    ({"metric": "cosine"}, ValueError, "metric must be one of"),
    ({"metric": 3}, TypeError, "metric must be a string"),
    ({"metric": "hamming"}, TypeError, "uint8"),
])
def test_neighbour_keywords_are_refused_before_any_backend(keywords, error, words):
    with pytest.raises(error, match=words):
        ops.nearest_neighbours(POINTS, OTHER, **keywords)


def test_k_beyond_the_targets_and_empty_sets_are_minus_one_and_inf():
    index, distance = ops.nearest_neighbours(POINTS, OTHER[:3], k=5)
    assert index.shape == (40, 5) and (index[:, 3:] == -1).all() and np.isinf(distance[:, 3:]).all()
    index, distance = ops.nearest_neighbours(POINTS, OTHER[:0], k=2)
    assert index.shape == (40, 2) and (index == -1).all()
    index, distance = ops.nearest_neighbours(POINTS[:0], OTHER, k=3)
    assert index.shape == (0, 3) and distance.dtype == np.float32


def test_k1_keeps_todays_shapes_and_bits_and_inf_bound_is_no_bound():
    today = ops.nearest_neighbours(POINTS, OTHER)
    for bound in (None, float("inf")):
        index, distance = ops.nearest_neighbours(POINTS, OTHER, k=1, max_distance=bound)
        np.testing.assert_array_equal(index, today[0])
        np.testing.assert_array_equal(distance, today[1])


def test_max_distance_is_compared_on_the_returned_float32_distance():
    index, distance = ops.nearest_neighbours(POINTS, OTHER, k=3, max_distance=1.0)
    expected = reference.k_nearest(POINTS, OTHER, 3, 1.0)
    np.testing.assert_array_equal(index, expected[0])
    np.testing.assert_array_equal(distance, expected[1])
    assert (distance[index >= 0] <= 1.0).all()


def test_mutual_pairs_are_the_two_one_way_calls_agreeing():
    pairs = ops.mutual_nearest_neighbours(POINTS, OTHER, max_distance=2.0)
    assert spacr_accel_core.last_dispatch().operation == "mutual_nearest_neighbours"
    assert pairs.dtype == np.int64
    np.testing.assert_array_equal(pairs, reference.mutual_nearest(POINTS, OTHER, 2.0))
    none = ops.mutual_nearest_neighbours(POINTS, OTHER[:0])
    assert none.shape == (0, 2) and none.dtype == np.int64
