"""``ops.phase_correlate`` as a drop-in for spaCR's registration, on the edges: the unwrap's ties on
even sizes, ``expected`` periods away, thin fields, a tolerance met exactly, a peak at the origin,
a ratio equal to ``min_peak_ratio``, which field moves, the answer's types.

Each edge is checked on the backends forced by name, on automatic dispatch, and on torch forced
onto the CPU, against literal answers worked out from spaCR's definition (the reasoning is in each
test) and against :func:`spacr_rules`, that definition restated here independently: NumPy's 2-D
transforms, Python's ``round`` of the float quotient in the unwrap (ties to even), and ``int()`` of
the expected shift. The differences that are deliberate are tested as such and written down in
the decisions page's drop-in section."""

from __future__ import annotations

import importlib.util
import logging
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import ops

Run = tuple[str | None, bool]
HAVE_TORCH = importlib.util.find_spec("torch") is not None
EVERY: list[Run] = [("numpy", True), ("numba", True), (None, True)] + ([("torch", False)] if HAVE_TORCH else [])
"""Each backend forced by name, automatic dispatch, and torch forced onto the CPU (``gpu=False``)."""
RUNS = [pytest.param(run, id=str(run[0] or "automatic")) for run in EVERY]
RNG = np.random.default_rng(17)


def spacr_rules(first: np.ndarray, second: np.ndarray, expected: tuple[Any, Any] = (0, 0), tolerance: Any = None,
                min_peak_ratio: float = 3.0) -> tuple[int, int, float, bool]:
    """spaCR's registration, restated: ``(dy, dx, peak_ratio, accepted)``."""
    one, two = np.asarray(first, np.float64), np.asarray(second, np.float64)
    cross = np.fft.rfft2(one) * np.conj(np.fft.rfft2(two))
    size = np.abs(cross)
    unit = np.divide(cross, size, out=np.zeros_like(cross), where=size > 0)
    unit[0, 0] = 0
    surface = np.fft.irfft2(unit, s=one.shape)
    rows, columns = divmod(int(np.argmax(surface)), one.shape[1])
    mean = float(np.abs(surface).mean())
    ratio = float(surface[rows, columns]) / mean if mean > 0 else 0.0

    def near(value: int, extent: int, about: Any) -> int:
        return value + extent * round((int(about) - value) / extent)  # Python's round: ties to even

    dy, dx = near(rows, one.shape[0], expected[0]), near(columns, one.shape[1], expected[1])
    if tolerance is None:
        accepted = ratio >= min_peak_ratio and (rows, columns) != (0, 0)
    else:
        across = (tolerance, tolerance) if isinstance(tolerance, (int, float)) else tolerance
        accepted = abs(dy - expected[0]) <= across[0] and abs(dx - expected[1]) <= across[1]
    return dy, dx, ratio, bool(accepted)


def register(run: Run, first: np.ndarray, second: np.ndarray, **options: Any) -> Any:
    backend, gpu = run
    return ops.phase_correlate(first, second, backend=backend, gpu=gpu, **options)


def assert_spacrs_answer(run: Run, first: np.ndarray, second: np.ndarray, **options: Any) -> Any:
    """Ours equals :func:`spacr_rules` (the ratio to the float64 rounding the contract allows)."""
    found = register(run, first, second, **options)
    dy, dx, ratio, accepted = spacr_rules(first, second, **options)
    assert (found.dy, found.dx, found.accepted) == (dy, dx, accepted)
    assert found.peak_ratio == pytest.approx(ratio, rel=1e-9, abs=1e-12)
    return found


# ---- the unwrap ----------------------------------------------------------------------------------


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize(("peak", "expected", "want"), [
    # (raw peak row, column), expected, spaCR's shift. Rows of 8: a raw 4 is +4 or -4 (halfway), and
    # round((e - 4) / 8) decides: round(-0.5) = 0 keeps +4 (spaCR's record says "[-height/2,
    # height/2)", which would be -4: its code, not that sentence, is the definition).
    ((4, 3), (0, 0), (4, 3)),
    ((4, 3), (8, 6), (4, 3)),        # round(0.5) = 0; columns of 6: round(0.5) = 0
    ((4, 3), (-8, -6), (-12, -9)),   # round(-1.5) = -2
    ((4, 3), (16, 12), (20, 15)),    # round(1.5) = 2
    ((4, 3), (-4, -3), (-4, -3)),    # not a tie: the expectation is a representative
    ((6, 1), (2, -2), (6, 1)),       # 6 and -2 both 4 rows from 2: round(-0.5) = 0; 1 and -5 are 3 from -2
    ((2, 5), (14, 8), (18, 5)),      # 10 and 18 both 4 from 14: round(1.5) = 2; 5 and 11 both 3 from 8
    ((6, 2), (-6, 5), (-10, 2)),     # -2 and -10 both 4 from -6: round(-1.5) = -2; 2 and 8 both 3 from 5
])
def test_a_shift_of_half_the_field_folds_as_spacrs_round(run: Run, peak: tuple[int, int], expected: tuple[int, int],
                                                          want: tuple[int, int]) -> None:
    first = RNG.random((8, 6))
    second = np.roll(first, (-peak[0], -peak[1]), axis=(0, 1))  # the surface peaks at ``peak``
    found = assert_spacrs_answer(run, first, second, expected=expected)
    assert found.shift == want


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize(("expected", "want"), [
    ((120, -100), (117, -98)),                       # -3 + 12 * 10, 2 - 10 * 10
    ((1203, 997), (1209, 1002)),                     # ties: 1197 or 1209 (round(99.5) = 100), 992 or 1002
    ((-10**9, 10**9), (-999_999_999, 1_000_000_002)),
])
def test_an_expected_shift_periods_away_picks_the_nearest_representative(run: Run, expected: tuple[int, int],
                                                                        want: tuple[int, int]) -> None:
    first = RNG.random((12, 10))
    found = assert_spacrs_answer(run, first, np.roll(first, (3, -2), axis=(0, 1)), expected=expected)
    assert found.shift == want


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize(("shape", "roll", "expected", "want"), [
    ((1, 9), (0, 2), (5, -2), (5, -2)),    # one row: every row shift is the same, folded onto expected
    ((9, 1), (2, 0), (-2, -7), (-2, -7)),
    ((1, 8), (0, 4), (3, 0), (3, 4)),      # a half-width tie on a thin field: round(-0.5) = 0
    ((8, 1), (4, 0), (0, 11), (4, 11)),
    ((1, 2), (0, 1), (0, 0), (0, 1)),      # two pixels: the only shift is a tie
    ((7, 9), (-3, 4), (0, 0), (3, -4)),    # odd sizes have no ties
    ((9, 7), (4, -3), (-50, 50), (-49, 52)),
])
def test_thin_odd_and_oblong_fields(run: Run, shape: tuple[int, int], roll: tuple[int, int],
                                    expected: tuple[int, int], want: tuple[int, int]) -> None:
    first = RNG.random(shape)
    second = np.roll(first, roll, axis=(0, 1))
    found = assert_spacrs_answer(run, first, second, expected=expected)
    assert found.shift == want
    assert_spacrs_answer(run, first, second, expected=expected, tolerance=0)


def test_an_expected_shift_past_float64s_integers_is_still_the_nearest() -> None:
    """Deliberate: spaCR divides in floating point, ``round((e - v) / n)``; past ``2**53`` the quotient
    is rounded first. Identical 8-row fields peak at row 0, so the representatives near
    ``e = 2**53 + 5`` are ``2**53`` (5 away) and ``2**53 + 8`` (3 away): the quotient ``2**50 + 0.625``
    is stored as ``2**50 + 0.5``, rounded to even, and spaCR answers ``2**53``. Here the unwrap is
    integer arithmetic and answers the nearest."""
    field = RNG.random((8, 8))
    assert spacr_rules(field, field, expected=(2**53 + 5, 0))[0] == 2**53
    for run in EVERY:
        assert register(run, field, field, expected=(2**53 + 5, 0)).dy == 2**53 + 8


# ---- the verdict ---------------------------------------------------------------------------------


FIRST = RNG.random((12, 10))
SECOND = np.roll(FIRST, (3, -2), axis=(0, 1))  # lands by (dy, dx) = (-3, 2)


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize(("expected", "tolerance", "accepted"), [
    ((0, 0), 3, True),                   # inclusive: 3 rows away with a tolerance of 3
    ((0, 0), 2.999999, False),
    ((0, 0), (3, 2), True),
    ((0, 0), (3, 1.999), False),
    ((-3, 0), (0, 2), True),             # a zero tolerance on one axis: exactly there
    ((-3, 2), 0, True),
    ((-3, 1), (0, 0), False),
    ((-2, 2), (0, 5), False),            # one row off with that axis at 0
    ((-2, 2), (1, 0), True),
    ((0, 0), [3, 2], True),
    ((0, 0), np.array([3.0, 2.0]), True),
])
def test_a_tolerance_is_inclusive_and_per_axis(run: Run, expected: tuple[int, int], tolerance: Any,
                                               accepted: bool) -> None:
    found = assert_spacrs_answer(run, FIRST, SECOND, expected=expected, tolerance=tolerance)
    assert found.accepted is accepted
    assert found.peak_ratio == register(run, FIRST, SECOND, expected=expected).peak_ratio  # recorded, not gated


@pytest.mark.parametrize("run", RUNS)
def test_a_peak_at_the_origin(run: Run) -> None:
    """Identical fields peak at the origin, spaCR's no-overlap signature: never accepted on the ratio
    (not even with ``min_peak_ratio=0``), but a tolerance is the test and the origin may meet it."""
    field = RNG.random((10, 10))
    assert assert_spacrs_answer(run, field, field.copy()).shift == (0, 0)
    assert not assert_spacrs_answer(run, field, field.copy(), min_peak_ratio=0.0).accepted
    assert assert_spacrs_answer(run, field, field.copy(), tolerance=0).accepted
    assert assert_spacrs_answer(run, field, field.copy(), expected=(1, 1), tolerance=1).accepted
    assert not assert_spacrs_answer(run, field, field.copy(), expected=(2, 0), tolerance=1).accepted


@pytest.mark.parametrize("run", RUNS)
def test_a_ratio_equal_to_min_peak_ratio_is_accepted(run: Run) -> None:
    ratio = register(run, FIRST, SECOND).peak_ratio
    assert register(run, FIRST, SECOND, min_peak_ratio=ratio).accepted is True
    assert register(run, FIRST, SECOND, min_peak_ratio=math.nextafter(ratio, math.inf)).accepted is False


@pytest.mark.parametrize("run", RUNS)
def test_unrelated_fields_are_judged_on_the_ratio(run: Run) -> None:
    first, second = RNG.random((16, 16)), RNG.random((16, 16))
    for floor in (3.0, 0.0, 10.0):
        assert_spacrs_answer(run, first, second, min_peak_ratio=floor)


@pytest.mark.parametrize("run", RUNS)
def test_second_moves_onto_first_and_the_answer_has_spacrs_types(run: Run) -> None:
    found = register(run, FIRST, SECOND)
    assert np.array_equal(np.roll(SECOND, found.shift, axis=(0, 1)), FIRST)
    assert (type(found.dy), type(found.dx), type(found.peak_ratio), type(found.accepted)) == (int, int, float, bool)
    stack = RNG.random((2, 3, 8, 6))
    moved = np.roll(stack, (1, -2), axis=(-2, -1))
    many = register(run, stack, moved, expected=(-1, 2), tolerance=(0, 0))
    assert [(value.dtype, value.shape) for value in (many.dy, many.dx, many.peak_ratio, many.accepted)] == [
        (np.dtype(np.int64), (2, 3)), (np.dtype(np.int64), (2, 3)), (np.dtype(np.float64), (2, 3)),
        (np.dtype(bool), (2, 3))]
    assert many.accepted.all() and many.shift[0].tolist() == [[-1] * 3] * 2
    assert np.array_equal(np.roll(moved[1, 2], (int(many.dy[1, 2]), int(many.dx[1, 2])), axis=(0, 1)), stack[1, 2])


@pytest.mark.parametrize("run", RUNS)
def test_a_field_without_variation_is_never_accepted(run: Run) -> None:
    """Deliberate: a constant field's transform is zero off the origin (exactly, for ``np.ones``), so
    spaCR's surface is zero, its peak the origin, its ratio 0, and a tolerance covering the origin's
    representative accepts it: ``(0, 0, 0.0, True)``. Here it is never accepted."""
    flat, other = np.ones((5, 5)), RNG.random((5, 5))
    assert spacr_rules(flat, other, tolerance=10) == (0, 0, 0.0, True)
    found = register(run, flat, other, tolerance=10)
    assert (found.shift, found.peak_ratio, found.accepted) == ((0, 0), 0.0, False)


@settings(max_examples=25, deadline=None)
@given(shape=st.sampled_from([(8, 6), (7, 9), (1, 12), (11, 1), (6, 6), (2, 5)]),
       roll=st.tuples(st.integers(-12, 12), st.integers(-12, 12)),
       expected=st.tuples(st.integers(-40, 40), st.integers(-40, 40)),
       tolerance=st.none() | st.tuples(st.integers(0, 6), st.integers(0, 6)),
       noise=st.sampled_from([0.0, 0.3]), seed=st.integers(0, 2**16))
def test_any_rolled_pair_gets_spacrs_answer_everywhere(shape: tuple[int, int], roll: tuple[int, int],
                                                        expected: tuple[int, int], tolerance: Any, noise: float,
                                                        seed: int) -> None:
    rng = np.random.default_rng(seed)
    first = rng.random(shape)
    second = np.roll(first, roll, axis=(0, 1)) + noise * rng.random(shape)
    for run in EVERY:
        assert_spacrs_answer(run, first, second, expected=expected, tolerance=tolerance)


# ---- the default expectation ---------------------------------------------------------------------


@pytest.mark.parametrize("run", RUNS)
def test_the_default_expected_folds_a_far_shift_silently(run: Run, caplog: pytest.LogCaptureFixture) -> None:
    """Deliberate: spaCR logs a WARNING when ``expected`` is ``(0, 0)`` and a shift is more than a
    sixteenth of its axis (-10 rows of 64 may be a neighbour's +54); the operations here do not log
    on the data path. The fold itself is spaCR's."""
    field = RNG.random((64, 48))
    with caplog.at_level(logging.DEBUG, logger="spacr_accel_core"):
        found = assert_spacrs_answer(run, field, np.roll(field, (10, -24), axis=(0, 1)))
    assert found.shift == (-10, 24)
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]
