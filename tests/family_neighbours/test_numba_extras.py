"""numba's k nearest and Hamming against the NumPy floor (bit for bit) and the reference: the grid's
partition, repeated targets, far sources and wide holes, and what the grid declines."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import BackendDeclined, reference
from spacr_accel_core.kit import _knearest as floor_knearest
from spacr_accel_numpy import _neighbours as floor_neighbours

pytest.importorskip("numba")

from spacr_accel_numba import _neighbours_kernels as numba_neighbours  # after the skip: needs numba


def _same(got: tuple[np.ndarray, np.ndarray], expected: tuple[np.ndarray, np.ndarray]) -> None:
    assert got[0].dtype == np.int64 and got[1].dtype == np.float32
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1].tobytes() == expected[1].tobytes()


def _grid_answer(source: np.ndarray, target: np.ndarray, k: int,
                 limit: float | None) -> tuple[np.ndarray, np.ndarray] | None:
    try:
        return numba_neighbours.k_nearest(source, target, k, limit)
    except BackendDeclined:
        return None


@st.composite
def _point_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    width = draw(st.integers(1, 3))
    n, m = draw(st.integers(1, 300)), draw(st.integers(1, 300))
    if draw(st.booleans()):  # a lattice: ties at every place, some duplicates
        span = draw(st.sampled_from([3, 8, 30]))
        grid = st.integers(-span, span)
        return (draw(hnp.arrays(np.int32, (n, width), elements=grid)).astype(np.float32),
                draw(hnp.arrays(np.int32, (m, width), elements=grid)).astype(np.float32))
    values = st.floats(-1000, 1000, width=32)
    return (draw(hnp.arrays(np.float32, (n, width), elements=values)),
            draw(hnp.arrays(np.float32, (m, width), elements=values)))


@settings(max_examples=60, deadline=None)
@given(_point_sets(), st.integers(1, 6), st.sampled_from([None, 0.0, 1.0, 2.0, 40.0]))
def test_k_nearest_equals_the_floor_and_the_reference(points: tuple[np.ndarray, np.ndarray], k: int,
                                                      limit: float | None) -> None:
    source, target = points
    got = _grid_answer(source, target, k, limit)
    expected = reference.k_nearest(source, target, k, limit)
    if got is not None:
        _same(got, expected)
    _same(floor_knearest.k_nearest(source, target, k, limit), expected)


def test_k_nearest_on_a_shifted_field_and_a_lattice() -> None:
    rng = np.random.default_rng(11)
    source = rng.random((6000, 2)).astype(np.float32)
    target = (rng.random((5000, 2)) + np.array([0.5, 0.0])).astype(np.float32)
    for k, limit in ((1, None), (4, None), (2, 0.02), (1, 0.0)):
        _same(numba_neighbours.k_nearest(source, target, k, limit), floor_knearest.k_nearest(source, target, k, limit))
    lattice = np.stack(np.meshgrid(np.arange(60), np.arange(50)), -1).reshape(-1, 2).astype(np.float32)
    points = np.ascontiguousarray(lattice[rng.permutation(len(lattice))])
    half = np.ascontiguousarray(points[:700] + np.float32(0.5))
    for k in (1, 3, 4, 8):
        _same(numba_neighbours.k_nearest(half, points, k), floor_knearest.k_nearest(half, points, k))
        _same(numba_neighbours.k_nearest(points[:500], points, k, 1.0),
              reference.k_nearest(points[:500], points, k, 1.0))


def test_k_nearest_three_coordinates_and_far_sources() -> None:
    rng = np.random.default_rng(12)
    target = rng.random((3000, 3)).astype(np.float32)
    source = np.concatenate([rng.random((400, 3)), rng.random((20, 3)) * 1e4]).astype(np.float32)
    _same(numba_neighbours.k_nearest(source, target, 5), reference.k_nearest(source, target, 5))


def test_k_nearest_declines_what_the_grid_cannot_serve() -> None:
    with pytest.raises(BackendDeclined, match="coordinates"):
        numba_neighbours.k_nearest(np.zeros((3, 4), np.float32), np.zeros((3, 4), np.float32), 1)
    rng = np.random.default_rng(13)
    cluster = np.concatenate([rng.random((3000, 2)) * 1e-3, [[1000.0, 1000.0]]]).astype(np.float32)
    with pytest.raises(BackendDeclined, match="crowd"):
        numba_neighbours.k_nearest(cluster[:100], cluster, 1)
    small = numba_neighbours.k_nearest(cluster[:10], cluster, 2)  # few pairs: compared outright instead
    _same(small, reference.k_nearest(cluster[:10], cluster, 2))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 200), st.integers(1, 1500), st.sampled_from([1, 5, 8, 32, 40]), st.integers(1, 5),
       st.sampled_from([None, 0, 9, 100.5]), st.data())
def test_hamming_equals_the_floor(n: int, m: int, width: int, k: int, limit: float | None,
                                  data: st.DataObject) -> None:
    values = st.sampled_from([0, 1, 7, 255]) if data.draw(st.booleans()) else st.integers(0, 255)
    source = data.draw(hnp.arrays(np.uint8, (n, width), elements=values))
    target = data.draw(hnp.arrays(np.uint8, (m, width), elements=values))
    _same(numba_neighbours.hamming_nearest(source, target, k, limit),
          floor_neighbours.hamming_nearest(source, target, k, limit))


def test_hamming_threaded_against_the_reference() -> None:
    rng = np.random.default_rng(14)
    source = rng.integers(0, 256, (700, 32), dtype=np.uint8)
    target = rng.integers(0, 256, (3000, 32), dtype=np.uint8)
    target[2000:] = target[:1000]  # every distance tied at least twice: the lower index must win
    _same(numba_neighbours.hamming_nearest(source, target, 2), reference.hamming_nearest(source, target, 2))


def test_repeated_targets_are_searched_once_and_give_their_lowest_copies() -> None:
    rng = np.random.default_rng(16)
    target = rng.random((3000, 2)).astype(np.float32)
    target[100:2900] = target[50]  # 2,851 copies of one point crowd its cell
    source = rng.random((500, 2)).astype(np.float32)
    source[:100] = target[50]
    _same(numba_neighbours.k_nearest(source, target, 4, 0.05), reference.k_nearest(source, target, 4, 0.05))
    index, _ = numba_neighbours.k_nearest(source[:1], target, 3)
    assert index.tolist() == [[50, 100, 101]]


def test_a_shifted_field_with_sources_beyond_near_and_far_outside_the_targets() -> None:
    """Enough points for the side-by-side builds and the threaded walk, and every kind of source in
    one call: walked inside the targets' box and just outside it, answered by the tree (within the
    bound but many cells out), and beyond the bound (no neighbour, no search)."""
    rng = np.random.default_rng(17)
    target = (rng.random((20_000, 2)) + np.array([0.5, 0.0])).astype(np.float32)
    source = rng.random((30_000, 2)).astype(np.float32) * np.float32([1.2, 1.0])
    for k, limit in ((1, 0.25), (1, 0.01), (3, 0.25), (2, None)):
        got = numba_neighbours.k_nearest(source, target, k, limit)
        _same(got, floor_knearest.k_nearest(source, target, k, limit))
        _same((got[0][::97], got[1][::97]), reference.k_nearest(source[::97], target, k, limit))
    unmatched = numba_neighbours.k_nearest(source, target, 1, 0.01)[0][:, 0] < 0
    assert 0.3 < unmatched.mean() < 0.5  # the sources left of the targets, a few cells in excepted


def test_the_partition_chooses_as_the_box_distance_says_and_buckets_stably() -> None:
    grid_cells = numba_neighbours.grid_cells

    rng = np.random.default_rng(18)
    target = (rng.random((4000, 2)) + np.array([0.5, 0.0])).astype(np.float64)
    source = np.concatenate([rng.random((3000, 2)), np.repeat(rng.random((50, 2)), 4, axis=0)])
    low, high, edge, inverse, cells = grid_cells(target, 2.0)
    reach, far_out = 0.2 ** 2, (8 * edge[:2].max()) ** 2
    rows, bucketed, elsewhere, scale = numba_neighbours.grid_sources(source, low, high, inverse, cells, reach,
                                                                        far_out)
    gap = (np.maximum(np.maximum(low[:2] - source, source - high[:2]), 0.0) ** 2).sum(axis=1)
    walked = (gap <= reach) & (gap <= far_out)
    np.testing.assert_array_equal(np.sort(rows), np.flatnonzero(walked))
    np.testing.assert_array_equal(elsewhere, np.flatnonzero((gap <= reach) & ~walked))
    np.testing.assert_array_equal(bucketed, source[rows])
    cell = np.minimum(np.maximum((source[rows] - low[:2]) * inverse[:2], 0), cells[:2] - 1).astype(np.int64)
    flat = cell[:, 0] * cells[1] + cell[:, 1]
    np.testing.assert_array_equal(rows, rows[np.lexsort((rows, flat))])  # by cell, then by index
    assert scale == np.abs(source[rows]).max()
    assert elsewhere.size and (~walked).sum() > elsewhere.size  # every kind is there


@pytest.mark.parametrize("limit", [0.1, 1.0, 1e-30, 3.4028235e38, 0.0, None])
@pytest.mark.parametrize("k", [2, 4])
def test_the_compiled_finish_is_the_floors_bit_for_bit(limit: float | None, k: int) -> None:
    near = np.float32(1.0 if limit is None else limit)
    with np.errstate(over="ignore"):  # float32's largest steps up to inf, 1e200 squared is inf
        roots = np.array([np.nextafter(near, np.float32(-np.inf)), near, np.nextafter(near, np.float32(np.inf)),
                          0.0, 3e38, 3.5e38, np.inf, 1e200], dtype=np.float64)
        squared = np.stack([roots * roots, (roots * roots)[::-1]], axis=1)
    index = np.arange(squared.size, dtype=np.int64).reshape(squared.shape)
    index[[2, 5], 1] = -1
    squared[[2, 5], 1] = np.inf
    with np.errstate(over="ignore"):
        _same(numba_neighbours._finish(index, squared, k, limit), floor_knearest.finish(index, squared, k, limit))
        _same(numba_neighbours._finish(index[:, :k], squared[:, :k], k, limit),
              floor_knearest.finish(index[:, :k], squared[:, :k], k, limit))


def test_sources_in_a_wide_hole_are_settled_by_brute_force_in_their_rows() -> None:
    """A source in the middle of an empty square walks more cells than it may and is settled by
    comparing it with every target; its answer lands in its own row, between walked ones."""
    rng = np.random.default_rng(19)
    side = np.linspace(0.05, 0.95, 3000)  # evenly, and clear of the corners: no cell is crowded
    edge = np.zeros(3000)
    target = np.concatenate([np.stack([side, edge], 1), np.stack([side, edge + 1], 1),
                             np.stack([edge, side], 1), np.stack([edge + 1, side], 1)])
    target = np.ascontiguousarray(target[rng.permutation(len(target))], dtype=np.float32)
    source = np.concatenate([rng.random((40, 2)) * 0.1 + 0.45, rng.random((40, 2))]).astype(np.float32)
    source = np.ascontiguousarray(source[rng.permutation(len(source))])
    for k, limit in ((1, None), (2, 0.6), (3, 0.3)):
        _same(numba_neighbours.k_nearest(source, target, k, limit), reference.k_nearest(source, target, k, limit))
