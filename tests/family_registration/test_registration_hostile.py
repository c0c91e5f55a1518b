"""Edges an adversarial review of phase correlation's inputs found: expected shifts past int64's
arithmetic (and at its bound), 0-d arrays given as numbers, bounds beyond float64's range, and
fields whose scale underflows or overflows the transform (stacks and broadcast references
rescaled field by field). Each is checked on the backends forced by name and on automatic
dispatch, so the rule is the core's, not one backend's luck."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from spacr_accel_core import ops

BACKENDS = ["numpy", "numba", None]
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
    assert ops.phase_correlate(PAIR, SHIFTED, **keywords).accepted is accepted  # type: ignore[arg-type]  # keywords of odd types on purpose: how they are read is the test


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


def test_a_zero_d_expected_is_named_not_a_len_error() -> None:
    """``expected=np.array(5)`` raised ``TypeError: len() of unsized object``, naming nothing."""
    with pytest.raises(ValueError, match=r"expected must be a \(rows, columns\) pair"):
        ops.phase_correlate(PAIR, SHIFTED, expected=np.array(5))
