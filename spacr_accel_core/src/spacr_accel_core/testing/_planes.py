"""The conformance checks of the whole-plane steps: the integer translation and the spot score, each
compared with spaCR's own NumPy lines on hypothesis input.

Translations are drawn on stacks of every real dtype (NaN and signed zeros in the floats), one shift
for all fields or one per field (or broadcast per cycle), shifts negative, zero, at and far past the
edge, integral floats among them, empty stacks and non-contiguous views. Scores are drawn on
``(cycles, channels, Y, X)`` stacks of values spread over many magnitudes (so the order of the
float32 sums shows), with NaN, infinities and signed zeros, one cycle, one pixel and empty axes.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .. import ops

_SETTINGS = settings(max_examples=40, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                            HealthCheck.differing_executors])  # one test, many backend classes

_DTYPES = (np.float32, np.float64, np.uint8, np.uint16, np.int16, np.int32, np.int64, np.bool_)


def spacr_translate(image: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """spaCR 1.5's ``ops_cycles._translate``, line for line: what ``ops.translate`` must equal."""
    dy, dx = int(dy), int(dx)
    out = np.zeros_like(image)
    height, width = image.shape[-2:]
    if abs(dy) >= height or abs(dx) >= width:
        return out
    out[..., max(dy, 0):height + min(dy, 0), max(dx, 0):width + min(dx, 0)] = \
        image[..., max(-dy, 0):height + min(-dy, 0), max(-dx, 0):width + min(-dx, 0)]
    return out


def spacr_score(stack: np.ndarray) -> np.ndarray:
    """spaCR 1.5's ``ops_sbs.estimate_read_locations``, line for line (its warnings for an empty
    axis silenced): what ``ops.spot_score`` must equal on a C-ordered stack."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        array = np.asarray(stack, dtype=np.float32)  # a float64 beyond float32's range: inf, quietly
        score: np.ndarray = (array[0].std(axis=0) if array.shape[0] == 1
                             else array.std(axis=0).mean(axis=0)).astype(np.float32, copy=False)
        return score


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """The same dtype, shape and bytes, any NaN matching any NaN (NumPy's NaN may differ in sign)."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if got.dtype.kind != "f":
        return bool(np.array_equal(got, want))
    nan = np.isnan(got)
    return bool((nan == np.isnan(want)).all() and got[~nan].tobytes() == want[~nan].tobytes())


@st.composite
def translation_cases(draw: st.DrawFn) -> tuple[np.ndarray, Any, np.ndarray]:
    """A stack, the caller's shifts (one pair, one per field, or per cycle) and the per-field shifts."""
    lead = draw(st.sampled_from([(), (1,), (3,), (2, 2), (0,)]))
    height, width = draw(st.integers(0, 9)), draw(st.integers(0, 9))
    dtype = draw(st.sampled_from(_DTYPES))
    if np.dtype(dtype).kind == "f":
        values = st.one_of(st.floats(-1e6, 1e6, width=32), st.sampled_from([np.nan, -0.0, np.inf]))
        stack = draw(hnp.arrays(dtype, (*lead, height, width), elements=values))
    else:
        stack = draw(hnp.arrays(dtype, (*lead, height, width)))
    if draw(st.booleans()) and stack.ndim >= 2:
        stack = np.swapaxes(np.ascontiguousarray(np.swapaxes(stack, -1, -2)), -1, -2)  # a Fortran-ordered view
    shift = st.one_of(st.integers(-12, 12), st.sampled_from([10**6, -(10**6), 2**40]))
    kind = draw(st.sampled_from(["one", "each", "cycle"] if len(lead) == 2 else ["one", "each"]))
    shape = {"one": (2,), "each": (*lead, 2), "cycle": (lead[0], 1, 2) if lead else (2,)}[kind]
    moves = draw(hnp.arrays(np.int64, shape, elements=shift))
    given_shifts: Any = moves.astype(np.float64) if draw(st.booleans()) else moves
    return stack, given_shifts, np.broadcast_to(moves, (*lead, 2))


@st.composite
def score_stacks(draw: st.DrawFn) -> np.ndarray:
    """``(cycles, channels, Y, X)`` stacks whose float32 sums round differently in another order."""
    shape = (draw(st.integers(0, 12)), draw(st.integers(0, 5)), draw(st.integers(0, 6)), draw(st.integers(1, 6)))
    if draw(st.integers(0, 5)) == 0:
        return draw(hnp.arrays(draw(st.sampled_from([np.uint16, np.int16, np.float64])), shape))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    stack = (rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 7, size=shape)).astype(np.float32)
    for special in draw(st.lists(st.sampled_from([np.nan, np.inf, -np.inf, -0.0, 0.0]), max_size=3)):
        if stack.size:
            stack.flat[draw(st.integers(0, stack.size - 1))] = special
    return stack


class PlanesConformance:
    """Mixed into :class:`~spacr_accel_core.testing.BackendConformance`; uses its ``_forced``."""

    backend: ClassVar[str]
    _forced: Callable[..., Any]

    @_SETTINGS
    @given(case=translation_cases())
    def test_translate_matches_spacr(self, case: tuple[np.ndarray, Any, np.ndarray]) -> None:
        stack, shifts, moves = case
        before = stack.copy()
        height, width = stack.shape[-2:]
        flat = moves.reshape(-1, 2)
        core = stack.size == 0 or not flat.any() or bool(((np.abs(flat[:, 0]) >= height)
                                                         | (np.abs(flat[:, 1]) >= width)).all())
        got = self._forced("translate", ops.translate, stack, shifts, core_may_answer=core)
        want = np.empty_like(stack)
        for index in np.ndindex(*stack.shape[:-2]):
            want[index] = spacr_translate(stack[index], *moves[index])
        assert got.dtype == stack.dtype and got.shape == stack.shape
        assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()
        np.testing.assert_array_equal(stack, before)

    def test_translate_moves_each_field_by_its_own_shift(self) -> None:
        stack = np.arange(2 * 3 * 5 * 6, dtype=np.uint16).reshape(2, 3, 5, 6)
        shifts = np.array([[[1, 2], [0, -3], [-4, 0]], [[5, 0], [-1, -1], [2, 6]]])
        got = self._forced("translate", ops.translate, stack, shifts)
        for index in np.ndindex(2, 3):
            np.testing.assert_array_equal(got[index], spacr_translate(stack[index], *shifts[index]))

    @_SETTINGS
    @given(stack=score_stacks())
    def test_spot_score_matches_spacr(self, stack: np.ndarray) -> None:
        before = stack.copy()
        cycles, channels, height, width = stack.shape
        core = cycles == 0 or channels == 0 or height * width < 2
        got = self._forced("spot_score", ops.spot_score, stack, core_may_answer=core)
        want = spacr_score(stack)
        assert got.dtype == np.float32 and got.shape == (height, width)
        assert same_bits(got, want), (got, want)
        np.testing.assert_array_equal(stack, before)

    def test_spot_score_of_one_cycle_is_the_spread_over_channels(self) -> None:
        rng = np.random.default_rng(4)
        stack = (rng.standard_normal((1, 4, 9, 11)) * 1e4).astype(np.float32)
        got = self._forced("spot_score", ops.spot_score, stack)
        assert same_bits(got, stack[0].std(axis=0))

    def test_spot_score_adds_the_cycles_in_order(self) -> None:
        # 1e8 + 1 + ... + 1 - 1e8: in order every 1 is lost against 1e8; another order keeps some.
        stack = np.ones((11, 2, 3, 4), dtype=np.float32)
        stack[0], stack[-1] = 1e8, -1e8
        got = self._forced("spot_score", ops.spot_score, stack)
        assert same_bits(got, spacr_score(stack))
