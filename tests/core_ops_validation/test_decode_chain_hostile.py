"""Edges an adversarial review of the decode chain's inputs found: kernels no array can hold,
numbers beyond float64's range, 0-d arrays given as numbers, expected shifts past int64's
arithmetic, points of the wrong shape or kind, the ``stack`` argument named as itself, and fields
whose scale underflows or overflows the transform. Each is checked on the backends forced by name
and on automatic dispatch, so the rule is the core's, not one backend's luck."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from spacr_accel_core import ops

BACKENDS = ["numpy", "numba", None]
FIELD = np.random.default_rng(3).random((9, 11)).astype(np.float32)
PAIR = np.random.default_rng(5).random((12, 10))
SHIFTED = np.roll(PAIR, (2, -3), axis=(0, 1))


# ---- phase_correlate: options ------------------------------------------------------------------


@pytest.mark.parametrize("expected", [(2**63, 0), (0, 10**30), (1e300, 0), (2**62 + 1, 0), (-(2**63), 0)])
def test_an_expected_shift_beyond_int64_arithmetic_is_refused(expected: tuple[object, object]) -> None:
    """``(2**63 - 1, 0)`` came back as a shift of -9223372036854775806 (the unwrap overflowed int64
    silently); ``(2**63, 0)`` raised a bare OverflowError."""
    with pytest.raises(ValueError, match=r"expected\[[01]\] must be within"):
        ops.phase_correlate(PAIR, SHIFTED, expected=expected)


@pytest.mark.parametrize("about", [2**62, -(2**62), 2**62 - 5])
def test_an_expected_shift_at_the_bound_unwraps_exactly(about: int) -> None:
    found = ops.phase_correlate(PAIR, SHIFTED, expected=(about, -about))
    assert (found.dy - (-2)) % 12 == 0 and abs(found.dy - about) <= 6
    assert (found.dx - 3) % 10 == 0 and abs(found.dx + about) <= 5


def test_a_zero_d_tolerance_is_the_number_it_holds() -> None:
    """``np.array(2.0)`` raised ``TypeError: len() of unsized object``, naming nothing."""
    assert ops.phase_correlate(PAIR, SHIFTED, tolerance=np.array(4.0)) == ops.phase_correlate(PAIR, SHIFTED,
                                                                                               tolerance=4.0)
    assert ops.phase_correlate(PAIR, SHIFTED, min_peak_ratio=np.array(80.0)).accepted is False


@pytest.mark.parametrize(("keywords", "accepted"), [({"tolerance": 10**400}, True),
                                                    ({"tolerance": (0, 10**400)}, False),
                                                    ({"min_peak_ratio": 10**400}, False),
                                                    ({"min_peak_ratio": -(10**400)}, True)])
def test_bounds_beyond_float64_are_infinite(keywords: dict[str, object], accepted: bool) -> None:
    """Past float64's range a tolerance or a ratio floor is larger than every shift or ratio, as
    ``max_distance`` is: it raised a bare OverflowError."""
    assert ops.phase_correlate(PAIR, SHIFTED, **keywords).accepted is accepted  # type: ignore[arg-type]


# ---- phase_correlate: the fields' scale --------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e-160, 2.0**-1000, 1e160, 1e200, 1e300, 2.0**1000])
def test_registration_does_not_depend_on_the_fields_scale(backend: str | None, scale: float) -> None:
    """Finite, varying fields of 1e-200 came back as "no variation" (the product of the transforms
    underflowed to zero), 1e-160 differently on numpy and numba, and 1e200 raised an overflow
    warning inside the NumPy backend; the normalised spectrum does not depend on the scale."""
    want = ops.phase_correlate(PAIR, SHIFTED, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        both = ops.phase_correlate(PAIR * scale, SHIFTED * scale, backend=backend)
        one = ops.phase_correlate(PAIR * scale, SHIFTED, backend=backend)
    for found in (both, one):
        assert (found.dy, found.dx, found.accepted) == (want.dy, want.dx, want.accepted) == (-2, 3, True)
        assert found.peak_ratio == pytest.approx(want.peak_ratio, rel=1e-9)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_power_of_two_scale_is_the_same_registration_bit_for_bit(backend: str | None) -> None:
    want = ops.phase_correlate(PAIR, SHIFTED, backend=backend)
    for power in (-900, 900):
        found = ops.phase_correlate(PAIR * 2.0**power, SHIFTED * 2.0**power, backend=backend)
        assert found.peak_ratio == want.peak_ratio and found.shift == want.shift


def test_a_stack_and_a_broadcast_reference_are_rescaled_field_by_field() -> None:
    cycles = np.stack([PAIR * 1e-250, PAIR, PAIR * 1e250])
    moved = np.stack([SHIFTED * 1e250, SHIFTED, SHIFTED * 1e-250])
    found = ops.phase_correlate(cycles, moved)
    np.testing.assert_array_equal(found.dy, [-2, -2, -2])
    np.testing.assert_array_equal(found.accepted, [True, True, True])
    reference = np.broadcast_to(PAIR * 1e-250, (3, *PAIR.shape))
    again = ops.phase_correlate(reference, moved)
    np.testing.assert_array_equal(again.dx, [3, 3, 3])
    assert again.accepted.all()
    still = ops.phase_correlate(np.full((2, 4, 4), 1e-300), np.full((2, 4, 4), 1e300))
    assert not still.accepted.any() and not still.peak_ratio.any()  # no variation, at any scale


def test_zero_d_arrays_are_numbers_for_every_option() -> None:
    """What ``np.ndim`` calls a scalar: a size of ``np.array(3.0)`` was a TypeError."""
    assert ops.maximum_filter(FIELD, np.array(3.0)).tobytes() == ops.maximum_filter(FIELD, 3).tobytes()
    assert ops.gaussian_filter(FIELD, 1.0, truncate=np.array(2)).tobytes() == ops.gaussian_filter(
        FIELD, 1.0, truncate=2.0).tobytes()
    assert ops.phase_correlate(PAIR, SHIFTED, expected=(np.array(12), 0)).dy == 10
    rng = np.random.default_rng(5)
    cells, others = rng.random((30, 2)), rng.random((40, 2))
    for k, bound in ((np.array(2), np.array(0.2)), (np.array(1), np.array(np.inf))):
        got, want = (ops.nearest_neighbours(cells, others, k=k, max_distance=bound),
                     ops.nearest_neighbours(cells, others, k=int(k), max_distance=float(bound)))
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    assert np.array_equal(ops.local_maxima(FIELD, 3, threshold=np.array(0.5, dtype=np.float32)),
                          ops.local_maxima(FIELD, 3, threshold=np.float32(0.5)))


def test_a_zero_d_expected_is_named_not_a_len_error() -> None:
    """``expected=np.array(5)`` raised ``TypeError: len() of unsized object``, naming nothing."""
    with pytest.raises(ValueError, match=r"expected must be a \(rows, columns\) pair"):
        ops.phase_correlate(PAIR, SHIFTED, expected=np.array(5))


# ---- integers too long to print ----------------------------------------------------------------

HUGE = 10**5000
"""Past Python's 4300-digit limit on ``str(int)``: a message quoting it with ``!r`` raised "Exceeds
the limit (4300 digits) for integer string conversion" instead of naming the argument."""


@pytest.mark.parametrize(("call", "name"), [
    (lambda: ops.gaussian_filter(FIELD, 1.0, truncate=HUGE), "truncate"),
    (lambda: ops.gaussian_filter(FIELD, -HUGE), "sigma"),
    (lambda: ops.gaussian_filter(FIELD, (1.0, HUGE)), "sigma"),
    (lambda: ops.phase_correlate(PAIR, PAIR, expected=(0, -HUGE)), r"expected\[1\]"),
    (lambda: ops.phase_correlate(PAIR, PAIR, tolerance=-HUGE), "tolerance"),
    (lambda: ops.nearest_neighbours(FIELD[:4, :2], FIELD[:4, :2], k=1, max_distance=-HUGE), "max_distance"),
    (lambda: ops.phase_correlate(PAIR, PAIR, expected=(HUGE,)), "expected"),
    (lambda: ops.phase_correlate(PAIR, PAIR, tolerance=[HUGE]), "tolerance"),
])
def test_an_integer_too_long_to_print_is_named(call: Any, name: str) -> None:
    with pytest.raises(ValueError, match=f"^{name} .*( integer of 16610 bits| too long to print)"):
        call()


def test_a_max_distance_too_long_to_print_is_no_bound() -> None:
    """``max_distance`` beyond float64's range is no bound; one past 4300 digits raised while the
    refusal message for NaN was formatted, before the value was even read."""
    points = FIELD[:5, :2]
    want = ops.nearest_neighbours(points, points, k=2)
    found = ops.nearest_neighbours(points, points, k=2, max_distance=HUGE)
    np.testing.assert_array_equal(found[0], want[0])
    np.testing.assert_array_equal(found[1], want[1])
