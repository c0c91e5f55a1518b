"""The NumPy floor's stack filter against the plain reference: each field of a stack filtered on
its own."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core.testing import assert_same_field, reference_maximum_filter
from spacr_accel_numpy import _filters


@st.composite
def _stacks(draw: st.DrawFn) -> np.ndarray:
    lead = draw(st.sampled_from([(), (3,), (2, 2)]))
    shape = (*lead, draw(st.integers(1, 20)), draw(st.integers(1, 20)))
    dtype = draw(st.sampled_from([np.float32, np.uint16, np.uint8, np.float64]))
    if np.dtype(dtype).kind == "f":
        elements = st.sampled_from([0.0, -0.0, 1.0, 2.0, 0.1, math.nan, math.inf])
    else:
        elements = st.integers(0, 3)
    return draw(hnp.arrays(dtype, shape, elements=elements))


@settings(max_examples=40, deadline=None)
@given(_stacks(), st.integers(1, 8))
def test_stack_filter_is_each_field_on_its_own(field: np.ndarray, size: int) -> None:
    got = _filters.maximum_filter_stack(field, size) + np.float32(0.0)  # the sign of zero is the core's to fix
    planes = field.reshape((-1, *field.shape[-2:]))
    expected = np.stack([reference_maximum_filter(plane, size) for plane in planes]).reshape(field.shape)
    expected += np.float32(0.0)  # the contract's +0.0, which the reference adds only for size > 1
    assert_same_field(got, expected)
