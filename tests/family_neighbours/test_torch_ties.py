"""Tie-heavy nearest-neighbour input on the torch backend (on the CPU here), against the plain
reference: duplicates, points equal only in float32, clusters, through both the block search and
the matrix product."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core.testing import reference_nearest, tie_heavy_point_sets

torch = pytest.importorskip("torch")
from spacr_accel_torch import _neighbours_kernels, _runtime  # noqa: E402  (after the importorskip above)

CPU = _runtime.Device(torch.device("cpu"), True)


def search(source, target, chunk):
    """``_neighbours_kernels.nearest`` on the CPU: torch's own search."""
    return _neighbours_kernels.nearest(source, target, chunk, CPU)


@settings(max_examples=40, deadline=None)
@given(points=tie_heavy_point_sets(), chunk=st.integers(1, 400))
def test_duplicates_go_to_the_lowest_index(points, chunk):
    source, target = points
    index, distance = search(source, target, chunk)
    expected_index, expected_distance = reference_nearest(source, target)
    assert np.array_equal(index, expected_index)
    assert np.array_equal(distance, expected_distance)


def test_clusters_with_gaps_and_copies():
    """Blocks that straddle the gap between two clusters, beside blocks that do not."""
    rng = np.random.default_rng(3)
    centres = rng.uniform(0, 1000, (6, 3))
    target = (centres[rng.integers(0, 6, 2500)] + rng.normal(0, 1, (2500, 3))).astype(np.float32)
    target[1000:1100] = target[5]  # a hundred copies of one point, after it
    source = (centres[rng.integers(0, 6, 700)] + rng.normal(0, 1, (700, 3))).astype(np.float32)
    source[:50] = target[5]
    expected_index, expected_distance = reference_nearest(source, target)
    index, distance = search(source, target, 4096)
    assert np.array_equal(index, expected_index)
    assert np.array_equal(distance, expected_distance)
    assert (index[:50] == 5).all()


@pytest.mark.parametrize("cap", [0, None])
def test_matrix_passes_with_too_many_candidates_go_to_the_block_search(monkeypatch, cap):
    """A tight cluster beside far outliers, D=8: the expansion cannot tell the cluster apart, so its
    passes are handed to the block search (forced for every pass with a cap of 0)."""
    if cap is not None:
        monkeypatch.setattr(_neighbours_kernels, "_CANDIDATES_PER_ROW", cap)
    rng = np.random.default_rng(4)
    target = rng.normal(0, 1e-3, (1500, 8)).astype(np.float32)
    target[rng.choice(1500, 15, replace=False)] = rng.normal(0, 1e4, (15, 8))
    source = np.ascontiguousarray(np.concatenate([target[:300:3], rng.normal(0, 1e-3, (200, 8))]).astype(np.float32))
    deferred = _neighbours_kernels._matrix(source, target, 4096, CPU, _neighbours_kernels._Verdict(source, target, CPU))
    assert deferred  # the case this guards: passes the matrix search hands on
    index, distance = search(source, target, 97)
    expected_index, expected_distance = reference_nearest(source, target)
    assert np.array_equal(index, expected_index)
    assert np.array_equal(distance, expected_distance)


def test_a_cpu_run_is_torchs_own_search_and_says_so():
    """Forced onto the CPU, torch computes the answer itself (no hand-off to another
    distribution's private search), so ``last_dispatch()`` naming torch is the truth."""
    import spacr_accel_core
    from spacr_accel_core import ops

    rng = np.random.default_rng(9)
    source = rng.random((200, 3), dtype=np.float32)
    target = rng.random((300, 3), dtype=np.float32)
    index, distance = ops.nearest_neighbours(source, target, backend="torch")
    expected_index, expected_distance = reference_nearest(source, target)
    assert spacr_accel_core.last_dispatch().backend == "torch"
    assert np.array_equal(index, expected_index) and np.array_equal(distance, expected_distance)
    assert not hasattr(_neighbours_kernels, "_host_kdtree")


def test_clusters_beside_far_outliers_on_the_cpu_match_the_reference():
    """The two cases torch's block search was slowest on, small: tight clusters beside far
    outliers (D=8) and many clusters (D=3), through torch's own search."""
    rng = np.random.default_rng(5)
    tight = rng.normal(0, 1e-3, (2000, 8))
    tight[rng.choice(2000, 20, replace=False)] = rng.normal(0, 1e4, (20, 8))
    centres = rng.uniform(0, 1000, (50, 3))
    many = centres[rng.integers(0, 50, 3000)] + rng.normal(0, 1, (3000, 3))
    for drawn in (tight, many):
        points = drawn.astype(np.float32)
        source, target = np.ascontiguousarray(points[::2]), np.ascontiguousarray(points[1::2])
        expected_index, expected_distance = reference_nearest(source, target)
        index, distance = search(source, target, 4096)
        assert np.array_equal(index, expected_index)
        assert np.array_equal(distance, expected_distance)
