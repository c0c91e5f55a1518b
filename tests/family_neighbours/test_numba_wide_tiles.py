"""The wide search's tiles: a row's minimum and candidates carried across column tiles, and the rows
whose candidates outgrow what a row holds searched again whole, checked bitwise against the plain
reference with tiles and holds shrunk until every path runs on small inputs."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import last_dispatch, ops
from spacr_accel_core.testing import reference_nearest
from spacr_accel_numba import _neighbours_kernels

pytestmark = pytest.mark.usefixtures("numba_compiled")  # the kernels, not the floor, under test


@st.composite
def wide_point_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """16-24 coordinates, either few distinct rows in many copies (ties everywhere, the holds
    overflow) or small-integer lattices (ties common) or plain floats."""
    width = draw(st.integers(_neighbours_kernels.WIDE, _neighbours_kernels.WIDE + 8))
    n, m = draw(st.integers(1, 60)), draw(st.integers(1, 200))
    kind = draw(st.sampled_from(["copies", "lattice", "floats"]))
    if kind == "copies":
        pool = draw(hnp.arrays(np.float32, (draw(st.integers(1, 4)), width),
                               elements=st.sampled_from([0.0, -0.0, 1.0, -1.0, 1e7, 1e7 + 1.0])))
        source = pool[draw(hnp.arrays(np.int64, n, elements=st.integers(0, pool.shape[0] - 1)))]
        target = pool[draw(hnp.arrays(np.int64, m, elements=st.integers(0, pool.shape[0] - 1)))]
        return np.ascontiguousarray(source), np.ascontiguousarray(target)
    elements = st.integers(-2, 2).map(float) if kind == "lattice" else st.floats(-1e3, 1e3, width=32)
    return (draw(hnp.arrays(np.float32, (n, width), elements=elements)),
            draw(hnp.arrays(np.float32, (m, width), elements=elements)))


def _with_tiles(rows: int, columns: int, held: int, run: Callable[[], None]) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_neighbours_kernels, "_TILE_ROWS", rows)
        patch.setattr(_neighbours_kernels, "_TILE_COLUMNS", columns)
        patch.setattr(_neighbours_kernels, "HELD", held)
        run()


def _matches_reference(source: np.ndarray, target: np.ndarray) -> None:
    index, distance = ops.nearest_neighbours(source, target, backend="numba")
    assert last_dispatch().backend == "numba"  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record
    expected_index, expected_distance = reference_nearest(source, target)
    assert np.array_equal(index, expected_index)
    assert distance.tobytes() == expected_distance.tobytes()


@settings(max_examples=120, deadline=None)
@given(points=wide_point_sets(), rows=st.integers(1, 9), columns=st.integers(1, 70), held=st.integers(1, 4))
def test_any_tiling_and_hold_is_the_reference_bit_for_bit(points: tuple[np.ndarray, np.ndarray], rows: int,
                                                          columns: int, held: int) -> None:
    _with_tiles(rows, columns, held, lambda: _matches_reference(*points))


def test_a_minimum_that_falls_in_every_tile_keeps_only_the_last_candidates() -> None:
    # Each target nearer the origin than the one before: every tile lowers every row's minimum, and a
    # hold of one column must drop the earlier candidates rather than overflow.
    width = _neighbours_kernels.WIDE
    target = np.zeros((300, width), dtype=np.float32)
    target[:, 0] = np.linspace(300.0, 1.0, 300, dtype=np.float32)
    source = np.zeros((5, width), dtype=np.float32)
    again: list[int] = []
    real = _neighbours_kernels._search_again

    def counted(*args: object) -> None:
        again.append(len(args[1]))  # type: ignore[arg-type]  # the rows searched again
        real(*args)  # type: ignore[arg-type]  # the kernel's own arguments, passed on as received

    def run() -> None:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_neighbours_kernels, "_search_again", counted)
            _matches_reference(source, target)

    _with_tiles(2, 7, 1, run)
    assert again == [0]


def test_ties_in_different_tiles_go_to_the_lowest_index_and_overflow_searches_again() -> None:
    rng = np.random.default_rng(11)
    width = 24
    target = rng.standard_normal((2500, width)).astype(np.float32)
    nearest = target[1700].copy()
    target[[40, 1100, 2400]] = nearest  # the same point in three column tiles
    others = np.setdiff1d(np.arange(4, 2500), [40, 1100, 1700, 2400])
    copies = rng.choice(others, _neighbours_kernels.HELD + 1, replace=False)
    target[copies] = target[3]  # more equal candidates than a row holds
    source = np.stack([nearest, target[3], rng.standard_normal(width).astype(np.float32)])
    again: list[np.ndarray] = []
    real = _neighbours_kernels._search_again

    def recorded(*args: object) -> None:
        again.append(np.asarray(args[1]).copy())
        real(*args)  # type: ignore[arg-type]  # the kernel's own arguments, passed on as received

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_neighbours_kernels, "_search_again", recorded)
        _matches_reference(source, target)
    index, _ = ops.nearest_neighbours(source, target, backend="numba")
    assert index[0] == min(40, 1100, 1700, 2400)
    assert index[1] == min(3, *copies)
    assert [rows.tolist() for rows in again] == [[1]]  # only the row with too many ties


@pytest.mark.parametrize("position", [0, 127, 128, 255, 256 + 200, 1023, 1024 + 70, 1099])
def test_the_nearest_anywhere_in_a_chunk_is_found(position: int) -> None:
    # A row's minimum is taken chunk by chunk, each full chunk as two halves side by side, the last
    # partial chunk of a tile in one: the nearest target in either half, at a chunk's edges or in
    # the partial chunk of the second tile (1,100 targets in tiles of 1,024) is found all the same.
    rng = np.random.default_rng(position)
    target = rng.uniform(10.0, 20.0, (1100, _neighbours_kernels.WIDE)).astype(np.float32)
    source = np.zeros((3, _neighbours_kernels.WIDE), dtype=np.float32)
    target[position] = 0.5
    _with_tiles(3, 1024, _neighbours_kernels.HELD, lambda: _matches_reference(source, target))
    assert ops.nearest_neighbours(source, target, backend="numba")[0].tolist() == [position] * 3
