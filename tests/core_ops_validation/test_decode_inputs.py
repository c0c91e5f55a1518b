"""The decode chain's inputs: every wrong call refused with the argument named, before any backend;
the answers the core gives itself (no points, an empty stack); the shapes of the answers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import Registration, last_dispatch, ops
from spacr_accel_core.contract._registration import nearest_representative

STACK = np.arange(2 * 3 * 6 * 7, dtype=np.float32).reshape(2, 3, 6, 7)


@pytest.mark.parametrize(("points", "words"), [
    ([[6, 0]], "outside the 6 x 7 field"),
    ([[0, -1]], "outside the 6 x 7 field"),
    ([[0.5, 1]], "whole pixel coordinates"),
    ([[np.nan, 1]], "whole pixel coordinates"),
    ([[1, 2, 3]], r"\(N, 2\)"),
    ([1, 2], r"\(N, 2\)"),
    ([["a", "b"]], "integer pixel coordinates"),
    ([[True, False]], "integer pixel coordinates"),
])
def test_window_maxima_refuses_bad_points_naming_them(points: object, words: str) -> None:
    with pytest.raises(ValueError, match=f"points.*{words}|{words}.*") as raised:
        ops.window_maxima(STACK, points, 3)
    assert "points" in str(raised.value)


def test_window_maxima_refuses_a_bad_stack_and_size() -> None:
    with pytest.raises(ValueError, match="stack must be a 2-D array"):
        ops.window_maxima(np.ones(5), [[0, 0]], 3)
    with pytest.raises(ValueError, match="size must be a non-negative"):
        ops.window_maxima(STACK, [[0, 0]], -1)
    with pytest.raises(TypeError, match="must hold real numbers"):
        ops.window_maxima(np.array([["a"]]), [[0, 0]], 3)


def test_window_maxima_shapes_and_the_core_answers() -> None:
    assert ops.window_maxima(STACK[0, 0], [[1, 1], [5, 6]], 3).shape == (2,)
    assert ops.window_maxima(STACK, [[1, 1]], 3).shape == (1, 2, 3)
    empty = ops.window_maxima(STACK, np.empty((0, 2), np.int64), 3)
    assert empty.shape == (0, 2, 3) and empty.dtype == np.float32
    assert last_dispatch().backend == "core"
    assert ops.window_maxima(STACK, [], 3).shape == (0, 2, 3)
    # Even sizes are raised to odd, as maximum_filter's; a float holding a whole number is a size.
    np.testing.assert_array_equal(ops.window_maxima(STACK, [[2, 2]], 4), ops.window_maxima(STACK, [[2, 2]], 5.0))


@settings(max_examples=40, deadline=None)
@given(stack=hnp.arrays(np.float32, st.sampled_from([(9, 11), (2, 5, 4), (2, 2, 3, 8)]),
                        elements=st.sampled_from([0.0, -0.0, 1.0, 2.5, np.nan, -3.0])),
       size=st.integers(0, 9), seed=st.integers(0, 1000))
def test_window_maxima_is_the_filtered_stack_at_the_points(stack: np.ndarray, size: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    points = np.stack([rng.integers(0, stack.shape[-2], 7), rng.integers(0, stack.shape[-1], 7)], axis=1)
    want = np.moveaxis(ops.maximum_filter(stack, size)[..., points[:, 0], points[:, 1]], -1, 0)
    got = ops.window_maxima(stack, points, size)
    assert got.tobytes() == want.tobytes()  # bit for bit: NaN where a window holds one, +0.0


PAIR = np.random.default_rng(0).random((2, 12, 10))


@pytest.mark.parametrize(("first", "second", "words"), [
    (PAIR, PAIR[0], "one shape"),
    (np.ones(5), np.ones(5), "2-D fields"),
    (np.ones((0, 4)), np.ones((0, 4)), "empty fields"),
])
def test_phase_correlate_refuses_bad_shapes(first: np.ndarray, second: np.ndarray, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ops.phase_correlate(first, second)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_phase_correlate_refuses_non_finite_pixels(bad: float) -> None:
    second = PAIR.copy()
    second[1, 3, 4] = bad
    with pytest.raises(ValueError, match="second holds NaN or infinite pixels"):
        ops.phase_correlate(PAIR, second)
    with pytest.raises(ValueError, match="first holds NaN or infinite pixels"):
        ops.phase_correlate(second, PAIR)


@pytest.mark.parametrize(("keywords", "error", "words"), [
    ({"expected": (1,)}, ValueError, "expected must be a"),
    ({"expected": "ab"}, ValueError, "expected must be a"),
    ({"expected": (0.5, 0)}, ValueError, "expected"),
    ({"tolerance": -1}, ValueError, "tolerance must be a non-negative"),
    ({"tolerance": (1, 2, 3)}, ValueError, "tolerance must be one number"),
    ({"tolerance": "2"}, TypeError, "tolerance must be a non-negative number"),
    ({"tolerance": (1, np.nan)}, ValueError, r"tolerance\[1\]"),
    ({"min_peak_ratio": np.nan}, ValueError, "min_peak_ratio is NaN"),
    ({"min_peak_ratio": None}, TypeError, "min_peak_ratio must be a number"),
    ({"gpu": "yes"}, TypeError, "gpu must be"),
])
def test_phase_correlate_refuses_bad_options(keywords: dict[str, object], error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        ops.phase_correlate(PAIR[0], PAIR[1], **keywords)  # type: ignore[arg-type]


def test_an_empty_stack_of_pairs_is_the_cores_answer() -> None:
    found = ops.phase_correlate(np.ones((0, 3, 8, 8)), np.ones((0, 3, 8, 8)))
    assert found.backend == "core" and found.dy.shape == (0, 3) and found.accepted.dtype == bool


def test_the_record_is_frozen_and_gives_the_shift() -> None:
    first = PAIR[0]
    found = ops.phase_correlate(first, np.roll(first, (2, -3), axis=(0, 1)))
    assert isinstance(found, Registration) and found.shift == (-2, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.dy = 0  # type: ignore[misc]
    integers = ops.phase_correlate((first * 100).astype(np.int32), np.roll((first * 100).astype(np.int32), 1, 0))
    assert integers.shift == (-1, 0)


def test_a_stack_of_pairs_answers_each_pair() -> None:
    rng = np.random.default_rng(5)
    first = rng.random((2, 3, 16, 20))
    shifts = rng.integers(-8, 8, size=(2, 3, 2))
    second = np.empty_like(first)
    for index in np.ndindex(2, 3):
        second[index] = np.roll(first[index], tuple(-shifts[index]), axis=(0, 1))
    found = ops.phase_correlate(first, second)
    np.testing.assert_array_equal(np.stack([found.dy, found.dx], axis=-1), shifts)
    assert found.accepted.all() and found.peak_ratio.shape == (2, 3)


@settings(max_examples=200, deadline=None)
@given(value=st.integers(0, 99), extent=st.integers(1, 100), about=st.integers(-300, 300))
def test_the_unwrap_is_spacrs_nearest_representative(value: int, extent: int, about: int) -> None:
    value %= extent
    # spaCR's rule: value + extent * round((about - value) / extent), Python's round (half to even).
    want = value + extent * round((about - value) / extent)
    assert int(nearest_representative(np.array([value]), extent, about)[0]) == want


def test_a_broadcast_reference_is_judged_as_its_materialised_copy() -> None:
    """Each distinct field of a broadcast reference is read once (a zero-stride axis), with the same
    answer, variation and refusal as the materialised stack."""
    rng = np.random.default_rng(11)
    cycles = rng.random((3, 2, 24, 20))
    cycles[1, 1] = 5.0  # a field without variation: never accepted
    reference = np.broadcast_to(cycles[:1], cycles.shape)
    for first in (reference, np.broadcast_to(cycles[:1, :1], cycles.shape)):
        got = ops.phase_correlate(first, cycles, backend="numpy")
        want = ops.phase_correlate(np.array(first), cycles, backend="numpy")
        for field in ("dy", "dx", "peak_ratio", "accepted"):
            np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
        assert not got.accepted[1, 1]
    broken = cycles[:1].copy()
    broken[0, 1, 3, 4] = np.nan
    with pytest.raises(ValueError, match="first holds NaN"):
        ops.phase_correlate(np.broadcast_to(broken, cycles.shape), cycles)
