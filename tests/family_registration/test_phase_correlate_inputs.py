"""Phase correlation's inputs: every wrong call refused with the argument named, before any
backend; the answers the core gives itself (an empty stack of pairs); the record (frozen, giving
the shift), a stack answered pair by pair, spaCR's unwrap and a broadcast reference judged as its
materialised copy."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import Registration, ops
from spacr_accel_core.contract._registration import nearest_representative

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
        ops.phase_correlate(PAIR[0], PAIR[1], **keywords)  # type: ignore[arg-type]  # keywords of odd types on purpose: how they are read is the test


def test_an_empty_stack_of_pairs_is_the_cores_answer() -> None:
    found = ops.phase_correlate(np.ones((0, 3, 8, 8)), np.ones((0, 3, 8, 8)))
    assert found.backend == "core" and found.dy.shape == (0, 3) and found.accepted.dtype == bool


def test_the_record_is_frozen_and_gives_the_shift() -> None:
    first = PAIR[0]
    found = ops.phase_correlate(first, np.roll(first, (2, -3), axis=(0, 1)))
    assert isinstance(found, Registration) and found.shift == (-2, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.dy = 0  # type: ignore[misc]  # the assignment a frozen record must refuse
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
