"""The grid search for sources far from every target and for sources in an empty hole.

Answers are compared bit for bit with the plain reference and with the NumPy floor; the walk's
length is checked by what it needs, not by time: such sources must settle within a short walk,
without the brute force (the benchmark ``benchmarks/bench_numba_edges.py`` times them).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import spacr_accel_numba
from spacr_accel_core import last_dispatch, ops
from spacr_accel_core.testing import reference_nearest
from spacr_accel_numba import _neighbours_kernels

pytestmark = pytest.mark.usefixtures("numba_compiled")  # the kernels, not the floor, under test


def _exact(source: np.ndarray, target: np.ndarray) -> None:
    """numba's answer is the reference's and the floor's, bit for bit (its decline: the automatic one's)."""
    try:
        index, distance = ops.nearest_neighbours(source, target, backend="numba")
    except RuntimeError as exc:  # a decline: crowded targets only, at these sizes
        assert "crowd" in str(exc), exc
        index, distance = ops.nearest_neighbours(source, target)
    expected_index, expected_distance = reference_nearest(source, target)
    assert np.array_equal(index, expected_index)
    assert distance.tobytes() == expected_distance.tobytes()
    floor_index, floor_distance = ops.nearest_neighbours(source, target, backend="numpy")
    assert np.array_equal(index, floor_index)
    assert distance.tobytes() == floor_distance.tobytes()


def _on_lattice(points: np.ndarray, step: float) -> np.ndarray:
    return np.round(points / step) * step  # equal distances everywhere: the lowest index must win


@st.composite
def far_sources(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    dims = draw(st.integers(1, 3))
    width = draw(st.sampled_from([1.0, 100.0, 2048.0, 1e5]))
    away = draw(st.sampled_from([0.6, 1.5, 2.0, 10.0, 1e3, 1e6]))  # from the field's centre, in widths
    rng = np.random.default_rng(draw(st.integers(0, 2**63)))
    target = rng.uniform(0, width, (draw(st.integers(1, 300)), dims))
    direction = rng.standard_normal((draw(st.integers(1, 120)), dims))
    direction /= np.maximum(np.linalg.norm(direction, axis=1, keepdims=True), 1e-12)
    source = width / 2 + direction * width * (away + rng.random((len(direction), 1)))
    if draw(st.booleans()):
        step = width / 16
        target, source = _on_lattice(target, step), _on_lattice(source, step)
    return source.astype(np.float32), target.astype(np.float32)


@st.composite
def hole_sources(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    dims = draw(st.integers(1, 3))
    width = draw(st.sampled_from([1.0, 2048.0]))
    radius = draw(st.floats(0.05, 0.45)) * width
    rng = np.random.default_rng(draw(st.integers(0, 2**63)))
    centre = rng.uniform(0.3, 0.7, dims) * width
    target = rng.uniform(0, width, (draw(st.integers(20, 600)), dims))
    target = target[np.linalg.norm(target - centre, axis=1) > radius]
    if len(target) == 0:
        target = np.zeros((1, dims))
    direction = rng.standard_normal((draw(st.integers(1, 150)), dims))
    direction /= np.maximum(np.linalg.norm(direction, axis=1, keepdims=True), 1e-12)
    source = centre + direction * radius * rng.random((len(direction), 1))
    if draw(st.booleans()):
        step = width / 64
        target, source = _on_lattice(target, step), _on_lattice(source, step)
    return source.astype(np.float32), target.astype(np.float32)


@settings(max_examples=80, deadline=None)
@given(points=far_sources())
def test_far_sources_are_the_reference_and_the_floor_bit_for_bit(points: tuple[np.ndarray, np.ndarray]) -> None:
    _exact(*points)


@settings(max_examples=80, deadline=None)
@given(points=hole_sources())
def test_sources_in_an_empty_hole_are_the_reference_and_the_floor_bit_for_bit(
        points: tuple[np.ndarray, np.ndarray]) -> None:
    _exact(*points)


@settings(max_examples=40, deadline=None)
@given(points=far_sources() | hole_sources())
def test_sources_left_to_the_brute_force_get_the_same_answers(points: tuple[np.ndarray, np.ndarray]) -> None:
    source, target = (np.ascontiguousarray(p, dtype=np.float64) for p in points)
    walked = _neighbours_kernels.grid_nearest(source, target)
    brute = _neighbours_kernels.grid_nearest(source, target, budget=0)  # every walk gives up after its first cell
    assert np.array_equal(walked[0], brute[0]) and walked[1].tobytes() == brute[1].tobytes()
    expected_index, _ = reference_nearest(*points)
    assert np.array_equal(walked[0], expected_index)


def _no_brute_force(*args: object) -> None:
    raise AssertionError("a source was left to the brute force")


@pytest.mark.parametrize(("name", "offset", "dims"), [
    ("1.5 heights above", (0.0, 2.5), 2),
    ("2 heights aside", (3.0, 0.0), 2),
    ("2 heights off a corner", (-3.0, -3.0), 2),
    ("1.5 edges above, in 3-D", (0.0, 0.0, 2.5), 3),
    ("100 heights below", (0.0, -101.0), 2),
])
def test_far_sources_settle_within_a_short_walk(name: str, offset: tuple[float, ...], dims: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # The walk used to cross the whole grid for them (every cell passed its bound): 10-600 times
    # the floor's time. Its bound now counts the gap to the targets' box.
    rng = np.random.default_rng(dims)
    target = rng.uniform(0, 2048, (20_000, dims))
    source = rng.uniform(0, 2048, (500, dims)) + np.asarray(offset) * 2048
    expected = _neighbours_kernels.grid_nearest(source, target, budget=0)
    monkeypatch.setattr(_neighbours_kernels, "brute_rows", _no_brute_force)
    index, squared = _neighbours_kernels.grid_nearest(source, target, budget=400)
    assert np.array_equal(index, expected[0]) and squared.tobytes() == expected[1].tobytes(), name


@pytest.mark.parametrize(("radius", "dims", "budget"), [(0.25, 2, 800), (0.45, 2, 1500), (0.3, 3, 2000), (0.45, 1, 50)])
def test_sources_in_an_empty_hole_settle_within_a_short_walk(radius: float, dims: int, budget: int,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # The walk used to look at every cell of the hole around each source (a 2-D hole of radius
    # 0.45 here: ~6,600 cells); it now starts at the ring of the nearest occupied cell and leaps
    # over the empty stretches of each ring, so it pays for the cells around the hole.
    rng = np.random.default_rng(dims)
    target = rng.uniform(0, 2048, (60_000, dims))
    target = target[np.linalg.norm(target - 1024, axis=1) > radius * 2048][:20_000]
    direction = rng.standard_normal((2000, dims))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    source = 1024 + direction * radius * 2048 * rng.random((2000, 1))
    expected = _neighbours_kernels.grid_nearest(source, target, budget=0)
    monkeypatch.setattr(_neighbours_kernels, "brute_rows", _no_brute_force)
    index, squared = _neighbours_kernels.grid_nearest(source, target, budget=budget)
    assert np.array_equal(index, expected[0]) and squared.tobytes() == expected[1].tobytes()


@settings(max_examples=60, deadline=None)
@given(shape=st.tuples(st.integers(1, 12), st.integers(1, 12), st.integers(1, 6)),
       fill=st.floats(0.0, 0.3), state=st.integers(0, 2**63))
def test_the_empty_distance_is_the_chebyshev_distance_to_the_nearest_occupied_cell(
        shape: tuple[int, int, int], fill: float, state: int) -> None:
    rng = np.random.default_rng(state)
    occupied = rng.random(shape) < fill
    occupied.flat[rng.integers(occupied.size)] = True
    counts = occupied.ravel().astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])
    got = _neighbours_kernels.grid_empty(starts, np.asarray(shape, dtype=np.int64)).reshape(shape)
    cells = np.indices(shape).reshape(3, -1).T
    full = cells[occupied.ravel()]
    expected = np.abs(cells[:, None, :] - full[None, :, :]).max(axis=2).min(axis=1).reshape(shape)
    assert np.array_equal(got, expected)


def test_no_call_compiles_after_the_warm_up() -> None:
    # A call that compiles waits seconds, and for numba's compiler lock: the warm-up compiles
    # every kernel on exactly the types the drivers pass, read-only inputs included.
    assert spacr_accel_numba.warm(timeout=600)

    def signatures() -> int:
        return sum(len(value.signatures) for value in vars(_neighbours_kernels).values()
                   if hasattr(value, "signatures"))

    before = signatures()
    rng = np.random.default_rng(5)
    target = rng.uniform(0, 100, (3000, 2))
    far = np.concatenate([target[:100] + 1e4, [[1e30, 0.0]]])
    read_only = target.copy()
    read_only.flags.writeable = False
    for source, points in ((far, target), (read_only, read_only), (far[:, :1].copy(), target[:, :1].copy()),
                           (np.c_[far, far[:, :1]], np.c_[target, target[:, :1]])):
        ops.nearest_neighbours(source, points, backend="numba")
        assert last_dispatch().backend == "numba"  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record
        spacr_accel_numba.nearest(source, points)
    for dtype in (np.float32, np.float64):
        wide = rng.standard_normal((300, 16)).astype(dtype)
        wide.flags.writeable = False
        spacr_accel_numba.nearest(wide[:40], wide)
    assert signatures() == before
