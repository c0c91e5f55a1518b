"""The phase correlation reference against an independent definition: a known circular shift,
recovered with spaCR's sign, and the expectation and tolerance deciding the verdict."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import reference


@settings(max_examples=40, deadline=None)
@given(height=st.integers(3, 30), width=st.integers(3, 30), seed=st.integers(0, 2 ** 32 - 1))
def test_a_roll_is_recovered_with_spacrs_sign(height: int, width: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    first = rng.random((height, width))
    dy, dx = int(rng.integers(-(height // 2) + 1, height // 2)), int(rng.integers(-(width // 2) + 1, width // 2))
    second = np.roll(first, (-dy, -dx), axis=(0, 1))
    got = reference.phase_correlation(first, second)
    assert got[:2] == (dy, dx)  # np.roll(second, (dy, dx)) lands on first
    assert got[3] == (got[2] >= 3.0 and (dy, dx) != (0, 0))


def test_expectation_and_tolerance_decide() -> None:
    rng = np.random.default_rng(1)
    first = rng.random((20, 24))
    second = np.roll(first, (-3, 0), axis=(0, 1))
    assert reference.phase_correlation(first, second, expected=(20, 0))[:2] == (23, 0)  # the period nearest 20
    assert reference.phase_correlation(first, second, tolerance=(0, 5))[3] is False
    assert reference.phase_correlation(first, second, tolerance=3)[3] is True
    constant = np.full((20, 24), 4.0)
    assert reference.phase_correlation(constant, second, tolerance=100, min_peak_ratio=0) == (0, 0, 0.0, False)
