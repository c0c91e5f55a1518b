"""The NumPy floor's local maxima against the plain reference: single fields, threaded stacks
(with the filtered stack written to ``out``), and the float32 floor that makes the threshold's
comparison exact."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import reference
from spacr_accel_core.testing import assert_same_field, filter_stacks, reference_maximum_filter
from spacr_accel_numpy import _filters, _peaks


@settings(max_examples=80, deadline=None)
@given(filter_stacks(), st.integers(1, 8), st.sampled_from([None, 0.0, 0.1, 1.5, -math.inf, 1e300]))
def test_local_maxima_matches_the_reference(field: np.ndarray, size: int, threshold: float | None) -> None:
    got = _peaks.local_maxima(field, size, threshold)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, reference.local_maxima(field, size, threshold).reshape(got.shape))


@pytest.mark.parametrize("shape", [(9, 130, 140), (2, 600, 500)])
def test_threaded_stacks_and_out(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(7)
    stack = rng.random(shape).astype(np.float32)
    out = np.full(shape, np.nan, np.float32)
    assert _filters.maximum_filter_stack(stack, 5, out=out) is out
    assert_same_field(out + np.float32(0.0), np.stack([reference_maximum_filter(plane, 5) for plane in stack]))
    np.testing.assert_array_equal(_peaks.local_maxima(stack, 5, 0.9), reference.local_maxima(stack, 5, 0.9))


def test_float32_floor_makes_the_comparison_exact() -> None:
    for threshold in (0.1, -0.1, 1.0, 1e300, -1e300, 3.4028235e38):
        cut = _peaks.float32_floor(threshold)
        assert float(cut) <= threshold
        with np.errstate(over="ignore"):  # the step above float32's largest is inf
            assert float(np.nextafter(cut, np.float32(np.inf))) > threshold
