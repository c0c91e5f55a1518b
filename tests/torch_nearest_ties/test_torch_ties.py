"""Tie-heavy nearest-neighbour input on the torch backend (on the CPU here), against the plain
reference: duplicates, points equal only in float32, clusters, through both the block search and
the matrix product."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core.testing import reference_nearest, tie_heavy_point_sets

torch = pytest.importorskip("torch")
from spacr_accel_torch import _nearest, _runtime  # noqa: E402  (after the importorskip above)

CPU = _runtime.Device(torch.device("cpu"), True)


def search(source, target, chunk, *, host=False):
    """``_nearest.nearest`` on the CPU: torch's own search, or (``host``) the hand-over to the NumPy
    backend's KD-tree that a real CPU run takes below that backend's matrix-product width."""
    with pytest.MonkeyPatch.context() as patch:
        if not host:
            patch.setattr(_nearest, "_host_kdtree", lambda device, dims: None)
        return _nearest.nearest(source, target, chunk, CPU)


@pytest.mark.parametrize("host", [False, True])
@settings(max_examples=40, deadline=None)
@given(points=tie_heavy_point_sets(), chunk=st.integers(1, 400))
def test_duplicates_go_to_the_lowest_index(points, chunk, host):
    source, target = points
    index, distance = search(source, target, chunk, host=host)
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
    for host in (False, True):
        index, distance = search(source, target, 4096, host=host)
        assert np.array_equal(index, expected_index)
        assert np.array_equal(distance, expected_distance)
        assert (index[:50] == 5).all()


@pytest.mark.parametrize("cap", [0, None])
def test_matrix_passes_with_too_many_candidates_go_to_the_block_search(monkeypatch, cap):
    """A tight cluster beside far outliers, D=8: the expansion cannot tell the cluster apart, so its
    passes are handed to the block search (forced for every pass with a cap of 0)."""
    if cap is not None:
        monkeypatch.setattr(_nearest, "_CANDIDATES_PER_ROW", cap)
    rng = np.random.default_rng(4)
    target = rng.normal(0, 1e-3, (1500, 8)).astype(np.float32)
    target[rng.choice(1500, 15, replace=False)] = rng.normal(0, 1e4, (15, 8))
    source = np.ascontiguousarray(np.concatenate([target[:300:3], rng.normal(0, 1e-3, (200, 8))]).astype(np.float32))
    deferred = _nearest._matrix(source, target, 4096, CPU, _nearest._Verdict(source, target, CPU))
    assert deferred  # the case this guards: passes the matrix search hands on
    index, distance = search(source, target, 97)
    expected_index, expected_distance = reference_nearest(source, target)
    assert np.array_equal(index, expected_index)
    assert np.array_equal(distance, expected_distance)


def test_a_cpu_run_below_the_numpy_width_is_the_numpy_backends_search(monkeypatch):
    """The hand-over happens exactly where it should: a CPU that takes doubles, fewer coordinates
    than the NumPy backend's matrix-product width, the NumPy backend installed."""
    from spacr_accel_numpy import _nearest as host

    assert _nearest._host_kdtree(CPU, 3) is host.nearest
    assert _nearest._host_kdtree(CPU, host.WIDE - 1) is host.nearest
    assert _nearest._host_kdtree(CPU, host.WIDE) is None
    assert _nearest._host_kdtree(_runtime.Device(torch.device("cpu"), False), 3) is None
    assert _nearest._host_kdtree(_runtime.Device(torch.device("cuda"), True), 3) is None
    monkeypatch.setitem(__import__("sys").modules, "spacr_accel_numpy", None)  # not installed
    assert _nearest._host_kdtree(CPU, 3) is None


def test_clusters_beside_far_outliers_on_the_cpu_match_the_reference():
    """The two cases torch's block search was slowest on, small: tight clusters beside far
    outliers (D=8) and many clusters (D=3), through the CPU hand-over and through torch's search."""
    rng = np.random.default_rng(5)
    tight = rng.normal(0, 1e-3, (2000, 8))
    tight[rng.choice(2000, 20, replace=False)] = rng.normal(0, 1e4, (20, 8))
    centres = rng.uniform(0, 1000, (50, 3))
    many = centres[rng.integers(0, 50, 3000)] + rng.normal(0, 1, (3000, 3))
    for drawn in (tight, many):
        points = drawn.astype(np.float32)
        source, target = np.ascontiguousarray(points[::2]), np.ascontiguousarray(points[1::2])
        expected_index, expected_distance = reference_nearest(source, target)
        for host in (False, True):
            index, distance = search(source, target, 4096, host=host)
            assert np.array_equal(index, expected_index)
            assert np.array_equal(distance, expected_distance)
