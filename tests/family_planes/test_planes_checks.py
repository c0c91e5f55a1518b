"""ops.translate and ops.spot_score: the input rules (refused before any backend, naming the
argument), the answers the core gives itself, the shift rule, and the two against spaCR's own."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given

from spacr_accel_core import last_dispatch, ops, reference
from spacr_accel_core.testing._planes import _SETTINGS, same_bits, score_stacks, spacr_score, spacr_translate

FIELD = np.arange(30, dtype=np.float32).reshape(5, 6)


@pytest.mark.parametrize(("shifts", "error", "words"), [
    ((1.5, 0), ValueError, "shifts must be whole numbers of pixels; got a fractional one"),
    ((np.nan, 0), ValueError, "NaN or infinity"),
    ((1, 2, 3), ValueError, r"pairs shaped \(..., 2\)"),
    (3, ValueError, "one \\(dy, dx\\) pair"),
    (np.zeros((4, 2)), ValueError, "do not broadcast"),
    ((True, False), TypeError, "shifts must hold whole numbers"),
    (("1", "2"), TypeError, "shifts must hold whole numbers"),
    (np.array([1, "a"], dtype=object), TypeError, "shifts must hold whole numbers"),
    (np.ma.masked_array([1, 2], mask=[0, 1]), TypeError, "shifts is a masked array"),
])
def test_bad_shifts_are_refused_naming_shifts(shifts: object, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        ops.translate(FIELD, shifts, backend="numpy")


@pytest.mark.parametrize(("stack", "error", "words"), [
    (np.zeros(4), ValueError, "stack must be a 2-D array"),
    (np.zeros((3, 3), dtype=complex), TypeError, "stack must hold real numbers"),
    (np.ma.masked_array(np.zeros((3, 3))), TypeError, "stack is a masked array"),
])
def test_bad_stacks_are_refused_naming_stack(stack: object, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        ops.translate(stack, (1, 1))


def test_bad_score_stacks_are_refused_naming_stack() -> None:
    with pytest.raises(ValueError, match=r"stack must be \(cycles, channels, Y, X\); got 3-D"):
        ops.spot_score(np.zeros((2, 3, 4)))
    with pytest.raises(TypeError, match="stack must hold real numbers"):
        ops.spot_score(np.array([[[["a"]]]]))
    with pytest.raises(TypeError, match="gpu must be True or False"):
        ops.spot_score(np.zeros((2, 1, 2, 2)), gpu="yes")


def test_whole_floats_huge_and_unsigned_shifts_are_taken() -> None:
    want = spacr_translate(FIELD, 2, -3)
    for shifts in ((2.0, -3.0), np.array([2, -3], dtype=np.int8), [np.int64(2), -3]):
        np.testing.assert_array_equal(ops.translate(FIELD, shifts), want)
    for shifts in (np.array([10**30, 0], dtype=object), np.array([2**63, 1], dtype=np.uint64), (1e300, 0.0)):
        got = ops.translate(FIELD, shifts)
        assert got.dtype == FIELD.dtype and not got.any()
        assert last_dispatch().backend == "core"  # type: ignore[union-attr]  # every field moved out


def test_the_core_answers_no_move_and_every_field_moved_out() -> None:
    stack = np.stack([FIELD, FIELD + 1])
    moved = ops.translate(stack, (0, 0))
    assert last_dispatch().backend == "core" and moved is not stack  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record
    np.testing.assert_array_equal(moved, stack)
    assert not ops.translate(stack, [[5, 0], [0, -6]]).any()
    assert ops.translate(np.zeros((0, 4, 4), np.uint16), (1, 1)).shape == (0, 4, 4)
    half = ops.translate(stack, [[0, 0], [1, 1]])
    assert last_dispatch().backend != "core"  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record
    np.testing.assert_array_equal(half[1], spacr_translate(stack[1], 1, 1))


def test_shifts_broadcast_per_cycle_against_the_leading_axes() -> None:
    stack = np.arange(3 * 2 * 4 * 5, dtype=np.int32).reshape(3, 2, 4, 5)
    shifts = np.array([[[1, 0]], [[0, -2]], [[-3, 4]]])  # (3, 1, 2): each cycle's channels together
    got = ops.translate(stack, shifts)
    for cycle, channel in np.ndindex(3, 2):
        np.testing.assert_array_equal(got[cycle, channel], spacr_translate(stack[cycle, channel], *shifts[cycle, 0]))
    np.testing.assert_array_equal(got, reference.translate(stack, shifts))


def test_the_score_of_one_pixel_and_of_empty_axes_is_numpys() -> None:
    one = np.array([1e8, 1, 1, 1, 1, 1, 1, 1, 1, -1e8, 3, 5], np.float32).reshape(12, 1, 1, 1)
    assert same_bits(ops.spot_score(one), spacr_score(one))  # NumPy sums a lone pixel pairwise
    assert last_dispatch().backend == "core"  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record
    for shape in ((0, 2, 3, 3), (3, 0, 3, 3), (1, 0, 2, 2), (3, 2, 0, 4)):
        assert same_bits(ops.spot_score(np.zeros(shape, np.float32)), spacr_score(np.zeros(shape, np.float32)))


@_SETTINGS
@given(stack=score_stacks())
def test_the_score_is_spacrs_own_function(stack: np.ndarray) -> None:
    sbs = pytest.importorskip("spacr.ops_sbs")
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # spaCR's NumPy warns on an empty axis
        want = sbs.estimate_read_locations(stack)
    assert same_bits(ops.spot_score(stack), want)


def test_translate_is_spacrs_own_function_on_real_shapes() -> None:
    cycles = pytest.importorskip("spacr.ops_cycles")
    rng = np.random.default_rng(8)
    stack = rng.normal(100, 10, size=(4, 148, 148)).astype(np.float32)
    stack[1, 5, 7] = np.nan
    for dy, dx in ((3, -5), (-14, 9), (0, 0), (148, 0), (-1, 147), (200, -300)):
        assert ops.translate(stack, (dy, dx)).tobytes() == cycles._translate(stack, dy, dx).tobytes()
        assert ops.translate(stack[2], (dy, dx)).tobytes() == cycles._translate(stack[2], dy, dx).tobytes()
