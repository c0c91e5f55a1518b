"""The NumPy backend's window maximum driven directly on hypothesis input, against SciPy and the
plain reference, in one pass and in threaded stripes."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import ndimage

from spacr_accel_core import ops
from spacr_accel_core.testing import assert_same_field, reference_maximum_filter
from spacr_accel_numpy import window_maximum


@settings(max_examples=60, deadline=None)
@given(field=hnp.arrays(np.float32, st.tuples(st.integers(1, 40), st.integers(1, 40)),
                        elements=st.floats(allow_nan=False, allow_infinity=False, width=32)),
       size=st.integers(1, 20).map(lambda k: 2 * k + 1))
def test_window_maximum_equals_scipy_on_finite_fields(field, size):
    # Bit for bit through ops, scipy's zeros given the contract's sign (+0.0).
    got = ops.maximum_filter(field, size, backend="numpy")
    assert_same_field(got, ndimage.maximum_filter(field, size, mode="nearest") + np.float32(0.0))
    assert np.array_equal(window_maximum(field, size), ndimage.maximum_filter(field, size, mode="nearest"))


def test_window_maximum_threaded_stripes_match_the_reference():
    rng = np.random.default_rng(4)
    field = rng.standard_normal((700, 530)).astype(np.float32)  # several stripes, threaded
    field[350, 17] = np.nan
    assert np.array_equal(window_maximum(field, 11), reference_maximum_filter(field, 11), equal_nan=True)
