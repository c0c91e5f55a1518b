"""The decode references against independent definitions: SciPy's filter for the window maxima,
and a known circular shift for the phase correlation (spaCR's sign)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import ndimage

from spacr_accel_core import reference


@settings(max_examples=60, deadline=None)
@given(stack=hnp.arrays(np.float32, st.sampled_from([(7, 9), (3, 5, 6), (2, 2, 4, 11)]),
                        elements=st.floats(-50, 50, width=32)),
       size=st.integers(1, 9), seed=st.integers(0, 1000))
def test_window_maxima_is_scipys_filter_at_the_points(stack: np.ndarray, size: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    points = np.stack([rng.integers(0, stack.shape[-2], 9), rng.integers(0, stack.shape[-1], 9)], axis=1)
    edge = size + 1 if size % 2 == 0 else size
    window = (1,) * (stack.ndim - 2) + (edge, edge)
    filtered = ndimage.maximum_filter(stack, size=window, mode="nearest") + np.float32(0.0)
    want = np.moveaxis(filtered[..., points[:, 0], points[:, 1]], -1, 0)
    np.testing.assert_array_equal(reference.window_maxima(stack, points, size), want)


def test_window_maxima_nan_rule_and_positive_zero() -> None:
    stack = np.array([[[-0.0, -0.0], [-0.0, -1.0]], [[np.nan, 1.0], [2.0, 3.0]]], dtype=np.float32)
    got = reference.window_maxima(stack, [[0, 1]], 1)
    assert got.tolist() == [[0.0, 1.0]] and not np.signbit(got[0, 0])
    assert np.isnan(reference.window_maxima(stack, [[1, 1]], 3)[0, 1])


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
