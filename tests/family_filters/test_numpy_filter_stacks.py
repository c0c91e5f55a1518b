"""The NumPy floor's stack filter against the plain reference: each field of a stack filtered on
its own."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core.testing import assert_same_field, filter_stacks, reference_maximum_filter
from spacr_accel_numpy import _filters


@settings(max_examples=40, deadline=None)
@given(filter_stacks(), st.integers(1, 8))
def test_stack_filter_is_each_field_on_its_own(field: np.ndarray, size: int) -> None:
    got = _filters.maximum_filter_stack(field, size) + np.float32(0.0)  # the sign of zero is the core's to fix
    planes = field.reshape((-1, *field.shape[-2:]))
    expected = np.stack([reference_maximum_filter(plane, size) for plane in planes]).reshape(field.shape)
    expected += np.float32(0.0)  # the contract's +0.0, which the reference adds only for size > 1
    assert_same_field(got, expected)
