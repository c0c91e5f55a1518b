"""Tie-heavy nearest-neighbour input through the CuPy algorithms, run on the NumPy kit, against the
plain reference: duplicates (searched once), points equal only in float32, and a tight cluster
beside far outliers (passes with too many candidates, answered by the exact brute force)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core.testing import reference_nearest, tie_heavy_point_sets
from spacr_accel_cupy import _kit, _neighbours_kernels

KIT = _kit.numpy_kit()


def cluster_beside_outliers(count: int, seed: int) -> np.ndarray:
    """A tight cluster (sigma 1e-3) with one point in a hundred far away (sigma 1e4), D=8."""
    rng = np.random.default_rng(seed)
    points = rng.normal(0.0, 1e-3, (count, 8))
    points[rng.choice(count, max(1, count // 100), replace=False)] = rng.normal(0.0, 1e4, (max(1, count // 100), 8))
    return points.astype(np.float32)


@settings(max_examples=40, deadline=None)
@given(points=tie_heavy_point_sets(), chunk=st.integers(1, 400), cap=st.sampled_from([0, 32]))
def test_ties_go_to_the_lowest_index(points: tuple[np.ndarray, np.ndarray], chunk: int, cap: int) -> None:
    """With the default cap and with a cap of 0 (every pass by the brute force)."""
    source, target = points
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_neighbours_kernels, "_CANDIDATES_PER_ROW", cap)
        if cap == 0:
            patch.setattr(_neighbours_kernels, "_CANDIDATE_ALLOWANCE", 0)
        index, distance = _neighbours_kernels.nearest(KIT, source, target, chunk)
    expected_index, expected_distance = reference_nearest(source, target)
    assert np.array_equal(index, expected_index)
    assert np.array_equal(distance, expected_distance)


def test_copies_are_searched_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """3,000 copies of two points reach the search as two targets and two sources."""
    search = _neighbours_kernels._search
    seen: list[tuple[int, int]] = []

    def spy(kit: _kit.Kit, source: np.ndarray, target: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
        seen.append((source.shape[0], target.shape[0]))
        return search(kit, source, target, chunk)

    monkeypatch.setattr(_neighbours_kernels, "_search", spy)
    pair = np.array([[7.0, 7.0], [1.0, 2.0]], dtype=np.float32)
    target = np.ascontiguousarray(pair[np.arange(3000) % 2])
    source = np.ascontiguousarray(pair[::-1][np.arange(3000) % 2])
    index, distance = _neighbours_kernels.nearest(KIT, source, target, 4096)
    assert seen == [(2, 2)]
    assert np.array_equal(index, np.arange(3000) % 2 == 0)  # source 0 is [1, 2]: target 1
    assert not distance.any()


def test_a_tight_cluster_beside_far_outliers_goes_to_the_brute_force(monkeypatch: pytest.MonkeyPatch) -> None:
    """The expansion cannot tell the cluster apart; the capped passes are answered exactly, in
    sub-passes of a small budget, and equal the reference."""
    brute = _neighbours_kernels._brute
    calls: list[tuple[int, int]] = []

    def spy(kit: _kit.Kit, s_dev: np.ndarray, t_dev: np.ndarray, start: int, stop: int,
            index: np.ndarray, best: np.ndarray) -> None:
        calls.append((start, stop))
        brute(kit, s_dev, t_dev, start, stop, index, best)

    monkeypatch.setattr(_neighbours_kernels, "_brute", spy)
    monkeypatch.setenv("SPACR_ACCEL_CUPY_PASS_BYTES", str(1 << 20))  # several sub-passes per pass
    source, target = cluster_beside_outliers(1500, 1), cluster_beside_outliers(2000, 2)
    index, distance = _neighbours_kernels.nearest(KIT, source, target, 700)
    assert calls  # the case this guards
    expected_index, expected_distance = reference_nearest(source, target)
    assert np.array_equal(index, expected_index)
    assert np.array_equal(distance, expected_distance)
