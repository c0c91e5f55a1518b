"""The local maxima's inputs and the rules the core applies itself: the threshold compared exactly
with float32 pixels (huge integers and numbers beyond float32 included), the sizes the core
answers and those a backend does, a vector refused."""

from __future__ import annotations

import numpy as np
import pytest

from spacr_accel_core import ops, reference

RNG = np.random.default_rng(21)


def test_the_threshold_is_exact_against_float32_pixels():
    # float32(0.1) is 0.100000001..., above the Python float 0.1; rounding the threshold to the
    # nearest float32 would call it equal and lose the peak.
    field = np.zeros((5, 5), np.float32)
    field[2, 2] = np.float32(0.1)
    assert ops.local_maxima(field, 3, threshold=0.1).tolist() == [[2, 2]]
    assert ops.local_maxima(field, 3, threshold=float(np.float32(0.1))).tolist() == []
    with pytest.raises(ValueError, match="threshold is NaN"):
        ops.local_maxima(field, 3, threshold=float("nan"))
    with pytest.raises(TypeError, match="threshold must be a real number"):
        ops.local_maxima(field, 3, threshold="0.1")


@pytest.mark.parametrize("size", [0, 1, 2, 5, 100])
def test_local_maxima_where_the_core_answers_and_where_a_backend_does(size):
    field = RNG.integers(0, 3, (2, 7, 9)).astype(np.float32)
    field[0, 1, 1] = np.nan
    for threshold in (None, 1.0):
        got = ops.local_maxima(field, size, threshold=threshold)
        # a window of 0 is a window of 1, as for maximum_filter
        np.testing.assert_array_equal(got, reference.local_maxima(field, max(size, 1), threshold))
        assert got.dtype == np.int64 and got.shape[1] == 3


def test_local_maxima_refuses_a_vector():
    with pytest.raises(ValueError, match="2-D"):
        ops.local_maxima(np.zeros(5), 3)


@pytest.mark.parametrize("threshold", [2**60 - 1, 10**400, -(10**400), 1e39, float("inf"), 0.1])
def test_the_threshold_is_exact_for_huge_integers_and_beyond_float32(threshold):
    """``v > threshold`` is decided exactly: an integer above 2**53 is not rounded first, and a
    threshold beyond float32's range keeps inf (and only inf) above it."""
    from fractions import Fraction

    values = [2.0**60, np.inf, 3.4028235e38, float(np.float32(0.1)), -np.inf]

    def above(v):
        if np.isinf(v):
            return v > 0 and threshold != float("inf")
        return threshold != float("inf") and Fraction(v) > Fraction(threshold)

    field = np.array([values], np.float32)  # size 1: every pixel is its own window
    expected = [[0, i] for i, v in enumerate(values) if above(v)]
    assert ops.local_maxima(field, 1, threshold=threshold).tolist() == expected
