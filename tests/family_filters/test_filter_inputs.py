"""The rules the core applies itself to the window maximum: a stack filtered field by field, the
sign of zero of a copy (sizes 0 and 1), and float64 beyond float32's range become infinities
quietly (the local maxima on it too)."""

from __future__ import annotations

import warnings

import numpy as np

from spacr_accel_core import ops
from spacr_accel_core.testing import reference_maximum_filter

RNG = np.random.default_rng(21)


def test_a_stack_is_filtered_field_by_field():
    stack = RNG.random((2, 3, 9, 8), dtype=np.float32)
    stack[1, 2, 0, 0] = np.nan
    got = ops.maximum_filter(stack, 3)
    for index in np.ndindex(2, 3):
        np.testing.assert_array_equal(got[index], reference_maximum_filter(stack[index], 3))


def test_a_copy_keeps_the_sign_of_zero_rule():
    zeros = np.full((4, 4), -0.0, np.float32)
    for size in (0, 1):
        assert not np.signbit(ops.maximum_filter(zeros, size)).any()


def test_float64_beyond_float32_becomes_inf_quietly():
    big = np.full((5, 5), 1e300)
    big[0, 0] = -1e300
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for size in (1, 3, 50):
            got = ops.maximum_filter(big, size)
            assert np.isinf(got).all()
        assert len(ops.local_maxima(big, 3)) > 0
