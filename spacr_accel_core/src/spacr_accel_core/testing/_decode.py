"""The conformance checks of the decode chain's two steps: window maxima at the reads, and phase
correlation of cycles, each compared with :mod:`spacr_accel_core.reference` on hypothesis input.

Window maxima are drawn on stacks full of plateaus, NaN and signed zeros (the rules), in camera
dtypes too. Phase correlations are drawn as random fields and their circular shifts with noise
(a clear peak, so the shift is a property of the input, not of rounding), stacks of pairs among
them, with expectations and tolerances on both sides of the answer, and fields without variation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .. import ops, reference

_SETTINGS = settings(max_examples=25, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                            HealthCheck.differing_executors])  # one test, many backend classes

RATIO_RTOL = 1e-9
"""How far a float64 backend's peak ratio may lie from the reference's (rounding of the transforms)."""


@st.composite
def gather_cases(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int]:
    """A stack with plateaus, NaN and signed zeros (or a camera dtype), points inside it, a size."""
    shape = draw(st.sampled_from([(1, 1), (5, 7), (2, 6, 8), (3, 2, 9, 4), (1, 12, 3)]))
    if draw(st.booleans()):
        values = st.one_of(st.integers(0, 3).map(float), st.sampled_from([np.nan, -0.0, 2.5]))
        stack = draw(hnp.arrays(np.float32, shape, elements=values))
    else:
        stack = draw(hnp.arrays(draw(st.sampled_from([np.uint8, np.uint16, np.int16])), shape))
    count = draw(st.integers(1, 12))
    ys = draw(hnp.arrays(np.int64, count, elements=st.integers(0, shape[-2] - 1)))
    xs = draw(hnp.arrays(np.int64, count, elements=st.integers(0, shape[-1] - 1)))
    return stack, np.stack([ys, xs], axis=1), draw(st.integers(1, 8))


@st.composite
def shifted_pairs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Random fields and noisy circular shifts of them: one pair, or a stack of pairs."""
    height, width = draw(st.integers(4, 40)), draw(st.integers(4, 40))
    lead = draw(st.sampled_from([(), (1,), (3,), (2, 2)]))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    first = rng.standard_normal((*lead, height, width))
    shifts = rng.integers(-height, height, size=(*lead, 2)) if lead else rng.integers(-height, height, size=2)
    second = np.empty_like(first)
    for index in np.ndindex(*lead):
        dy, dx = shifts[index]
        second[index] = np.roll(first[index], (-dy, -dx), axis=(0, 1)) + 0.1 * rng.standard_normal((height, width))
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    return first.astype(dtype), second.astype(dtype)


def assert_registration(got: Any, first: np.ndarray, second: np.ndarray, expected: tuple[int, int],
                        tolerance: Any, min_peak_ratio: float, rtol: float = RATIO_RTOL) -> None:
    """``got`` equals the reference pair by pair: the shift and the verdict exactly, the ratio to ``rtol``."""
    lead = first.shape[:-2]
    for index in np.ndindex(*lead):
        dy, dx, ratio, accepted = reference.phase_correlation(first[index], second[index], expected, tolerance,
                                                              min_peak_ratio)
        values = [np.asarray(getattr(got, name))[index] for name in ("dy", "dx", "peak_ratio", "accepted")]
        assert (int(values[0]), int(values[1]), bool(values[3])) == (dy, dx, accepted), (index, values, ratio)
        assert abs(float(values[2]) - ratio) <= rtol * max(abs(ratio), 1e-300), (index, values[2], ratio)
    if not lead:
        assert isinstance(got.dy, int) and isinstance(got.accepted, bool) and isinstance(got.peak_ratio, float)
    else:
        assert np.shape(got.dy) == lead and np.shape(got.accepted) == lead


class DecodeConformance:
    """Mixed into :class:`~spacr_accel_core.testing.BackendConformance`; uses its ``_forced``."""

    backend: ClassVar[str]
    _forced: Callable[..., Any]

    @_SETTINGS
    @given(case=gather_cases())
    def test_window_maxima_matches_reference(self, case: tuple[np.ndarray, np.ndarray, int]) -> None:
        stack, points, size = case
        before = stack.copy()
        got = self._forced("window_maxima", ops.window_maxima, stack, points, size)
        expected = reference.window_maxima(stack, points, size)
        assert got.dtype == np.float32 and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
        assert not np.signbit(got[got == 0]).any(), "a maximum of zero must be +0.0"
        np.testing.assert_array_equal(stack, before)

    @_SETTINGS
    @given(pair=shifted_pairs(), near=st.integers(-3, 3), tolerance=st.sampled_from([None, 0, 2, (1, 30)]),
           floor=st.sampled_from([3.0, 1e6]))
    def test_phase_correlate_matches_reference(self, pair: tuple[np.ndarray, np.ndarray], near: int,
                                               tolerance: Any, floor: float) -> None:
        first, second = pair
        expected = (near, -near)
        got = self._forced("phase_correlate", ops.phase_correlate, first, second, expected=expected,
                           tolerance=tolerance, min_peak_ratio=floor)
        assert_registration(got, first, second, expected, tolerance, floor)

    def test_phase_correlate_with_one_reference_cycle_for_every_cycle(self) -> None:
        """The reference cycle broadcast against every cycle (or repeated in value) reaches the
        backend once per distinct field, with each pair's index into them: the same answers."""
        rng = np.random.default_rng(5)
        reference_cycle = rng.standard_normal((1, 3, 20, 24))
        shifts = rng.integers(-10, 10, size=(4, 3, 2))
        cycles = np.empty((4, 3, 20, 24))
        for cycle, channel in np.ndindex(4, 3):
            moved = np.roll(reference_cycle[0, channel], tuple(-shifts[cycle, channel]), axis=(0, 1))
            cycles[cycle, channel] = moved + 0.1 * rng.standard_normal((20, 24))
        for first in (np.broadcast_to(reference_cycle, cycles.shape), np.repeat(reference_cycle, 4, axis=0)):
            got = self._forced("phase_correlate", ops.phase_correlate, first, cycles, tolerance=0)
            assert_registration(got, np.array(first), cycles, (0, 0), 0, 3.0)
            np.testing.assert_array_equal(np.stack([got.dy, got.dx], axis=-1), shifts)

    def test_phase_correlate_recovers_a_roll_with_spacrs_sign(self) -> None:
        rng = np.random.default_rng(7)
        first = rng.random((48, 64))
        second = np.roll(first, (-5, 9), axis=(0, 1))  # second is first moved by (-5, 9)
        got = self._forced("phase_correlate", ops.phase_correlate, first, second)
        assert got.shift == (5, -9) and got.accepted
        np.testing.assert_array_equal(np.roll(second, got.shift, axis=(0, 1)), first)

    def test_a_field_without_variation_is_never_accepted(self) -> None:
        rng = np.random.default_rng(3)
        first = np.stack([np.full((16, 16), 7.0), rng.random((16, 16)), np.zeros((16, 16))])
        second = np.stack([rng.random((16, 16)), np.full((16, 16), 2.0), np.zeros((16, 16))])
        for tolerance in (None, 100):
            got = self._forced("phase_correlate", ops.phase_correlate, first, second, tolerance=tolerance,
                               min_peak_ratio=0.0)
            assert not np.asarray(got.accepted).any()
            np.testing.assert_array_equal(got.peak_ratio, 0.0)
            np.testing.assert_array_equal(got.dy, 0)
