"""The NumPy floor's k nearest and Hamming searches against the plain reference, ties and lattices included."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import reference
from spacr_accel_core.kit import _knearest
from spacr_accel_numpy import _neighbours


def _same(got: tuple[np.ndarray, np.ndarray], expected: tuple[np.ndarray, np.ndarray]) -> None:
    assert got[0].dtype == np.int64 and got[1].dtype == np.float32
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1].tobytes() == expected[1].tobytes()


@st.composite
def _point_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Lattices (ties, duplicates) large enough for the tree, and continuous points."""
    width = draw(st.integers(1, 3))
    n, m = draw(st.integers(1, 400)), draw(st.integers(1, 400))
    if draw(st.booleans()):
        span = draw(st.sampled_from([1, 2, 4, 8]))
        grid = st.integers(-span, span)
        source = draw(hnp.arrays(np.int32, (n, width), elements=grid)).astype(np.float32)
        target = draw(hnp.arrays(np.int32, (m, width), elements=grid)).astype(np.float32)
    else:
        values = st.floats(-1000, 1000, width=32)
        source = draw(hnp.arrays(np.float32, (n, width), elements=values))
        target = draw(hnp.arrays(np.float32, (m, width), elements=values))
    return np.ascontiguousarray(source), np.ascontiguousarray(target)


@settings(max_examples=60, deadline=None)
@given(_point_sets(), st.integers(1, 6), st.sampled_from([None, 0.0, 1.0, 2.0, 50.0]),
       st.sampled_from([7, 1 << 16]))
def test_k_nearest_matches_the_reference(points: tuple[np.ndarray, np.ndarray], k: int,
                                         limit: float | None, chunk: int) -> None:
    source, target = points
    _same(_knearest.k_nearest(source, target, k, limit, chunk), reference.k_nearest(source, target, k, limit))


@pytest.mark.parametrize("k", [1, 2, 4, 9])
def test_lattice_ties_at_the_kth_place(k: int) -> None:
    # Every source sits on a square lattice of targets: 4 at one spacing, 4 at sqrt(2), ...
    grid = np.stack(np.meshgrid(np.arange(40), np.arange(40)), axis=-1).reshape(-1, 2).astype(np.float32)
    rng = np.random.default_rng(3)
    target = grid[rng.permutation(len(grid))]
    source = np.ascontiguousarray(grid[::7] + np.float32(0.5) * (rng.random((len(grid[::7]), 1)) < 0.5))
    _same(_knearest.k_nearest(source, target, k), reference.k_nearest(source, target, k))


def test_many_copies_of_one_point_give_their_lowest_indices() -> None:
    rng = np.random.default_rng(4)
    target = rng.random((3000, 2)).astype(np.float32)
    target[100:2900] = target[50]  # 2,851 copies of one point
    source = rng.random((500, 2)).astype(np.float32)
    source[:100] = target[50]
    _same(_knearest.k_nearest(source, target, 4, 0.05), reference.k_nearest(source, target, 4, 0.05))
    index, _ = _knearest.k_nearest(source[:1], target, 3)
    assert index.tolist() == [[50, 100, 101]]


def test_max_distance_leaves_distant_sources_empty() -> None:
    rng = np.random.default_rng(5)
    target = rng.random((4000, 2)).astype(np.float32)
    source = rng.random((1000, 2)).astype(np.float32) + np.float32(0.5)
    got = _knearest.k_nearest(source, target, 2, 0.03)
    _same(got, reference.k_nearest(source, target, 2, 0.03))
    assert (got[0][(source > 1.04).any(axis=1)] == -1).all()
    assert (got[0][(source < 0.95).all(axis=1)] >= 0).all()


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 300), st.integers(1, 300), st.sampled_from([1, 3, 8, 16, 32]), st.integers(1, 5),
       st.sampled_from([None, 0, 5, 40.5]), st.data())
def test_hamming_matches_the_reference(n: int, m: int, width: int, k: int, limit: float | None,
                                       data: st.DataObject) -> None:
    values = st.sampled_from([0, 1, 7, 255, 128]) if data.draw(st.booleans()) else st.integers(0, 255)
    source = data.draw(hnp.arrays(np.uint8, (n, width), elements=values))
    target = data.draw(hnp.arrays(np.uint8, (m, width), elements=values))
    _same(_neighbours.hamming_nearest(source, target, k, limit, chunk=data.draw(st.sampled_from([5, 1 << 16]))),
          reference.hamming_nearest(source, target, k, limit))


def test_hamming_without_bitwise_count(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(6)
    source = rng.integers(0, 256, (50, 32), dtype=np.uint8)
    target = rng.integers(0, 256, (70, 32), dtype=np.uint8)
    expected = reference.hamming_nearest(source, target, 3)
    monkeypatch.delattr(np, "bitwise_count", raising=False)
    _same(_neighbours.hamming_nearest(source, target, 3), expected)


def test_empty_sets() -> None:
    index, found = _knearest.k_nearest(np.zeros((3, 2), np.float32), np.zeros((0, 2), np.float32), 2)
    assert index.tolist() == [[-1, -1]] * 3 and np.isinf(found).all()
    index, found = _neighbours.hamming_nearest(np.zeros((0, 4), np.uint8), np.zeros((5, 4), np.uint8), 2)
    assert index.shape == found.shape == (0, 2)


def _finish_in_float64(index: np.ndarray, squared: np.ndarray, k: int,
                       max_distance: float | None) -> tuple[np.ndarray, np.ndarray]:
    """The answer's form spelled out: every float32 distance widened back and compared in float64."""
    rows, have = index.shape
    out_index = np.full((rows, k), -1, dtype=np.int64)
    out_found = np.full((rows, k), np.inf, dtype=np.float32)
    out_index[:, :have] = index
    with np.errstate(over="ignore"):
        out_found[:, :have] = np.sqrt(squared).astype(np.float32)
    out_found[out_index < 0] = np.inf
    if max_distance is not None:
        beyond = out_found.astype(np.float64) > max_distance
        out_index[beyond] = -1
        out_found[beyond] = np.inf
    return out_index, out_found


def _answers_at_the_edge(limit: float) -> tuple[np.ndarray, np.ndarray]:
    """Squared distances whose float32 distances sit on both sides of ``limit`` and of float32's
    range, with missing places between them."""
    with np.errstate(over="ignore"):  # the limits beyond float32's range step to its largest and inf
        near = np.float32(limit)
        steps = [np.nextafter(near, np.float32(-np.inf)), near, np.nextafter(near, np.float32(np.inf))]
    roots = np.array([*steps, 0.0, 3e38, 3.5e38, np.inf], dtype=np.float64)
    squared = np.stack([roots * roots, (roots * roots)[::-1]], axis=1)
    index = np.arange(squared.size, dtype=np.int64).reshape(squared.shape)
    index[2, 1] = -1
    squared[2, 1] = np.inf
    return index, squared


@pytest.mark.parametrize("limit", [0.1, 1.0, 0.3, 1e-30, 3.4028235e38, 1e300, 0.0, np.inf])
@pytest.mark.parametrize("k", [2, 3])
def test_finish_compares_in_float32_as_if_in_float64(limit: float, k: int) -> None:
    """The float32 just below the limit decides exactly as the float64 comparison: a float32 that
    rounds to the limit but exceeds it (0.1 rounded is 0.100000001) is dropped, and a limit beyond
    float32's range keeps every finite distance."""
    index, squared = _answers_at_the_edge(limit)
    for max_distance in (limit, None):
        got = _knearest.finish(index, squared, k, max_distance)
        expected = _finish_in_float64(index, squared, k, max_distance)
        np.testing.assert_array_equal(got[0], expected[0])
        assert got[1].tobytes() == expected[1].tobytes()
        assert got[0].dtype == np.int64 and got[1].dtype == np.float32
