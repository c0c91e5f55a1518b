"""The NumPy backend filters camera dtypes (uint8, int8, uint16, int16) in their own dtype and casts
once; the result must be bit-identical to filtering the float32 cast, which is what the core asks."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import ndimage

from spacr_accel_core.testing import assert_same_field, reference_maximum_filter
from spacr_accel_numpy import _filters, window_maximum

NARROW = [np.uint8, np.int8, np.uint16, np.int16]


@settings(max_examples=120, deadline=None)
@given(dtype=st.sampled_from(NARROW), data=st.data(), size=st.integers(1, 12).map(lambda k: 2 * k + 1))
def test_narrow_fields_equal_the_float32_filter(dtype, data, size):
    shape = data.draw(st.tuples(st.integers(1, 40), st.integers(1, 40)))
    field = data.draw(hnp.arrays(dtype, shape))
    got = window_maximum(field, size)
    assert_same_field(got, reference_maximum_filter(field.astype(np.float32), size))


def test_a_camera_field_through_the_threaded_stripes():
    rng = np.random.default_rng(0)
    for dtype in NARROW:
        info = np.iinfo(dtype)
        field = rng.integers(info.min, int(info.max) + 1, (700, 900)).astype(dtype)  # above the threading size
        for size in (3, 5, 31):
            expected = ndimage.maximum_filter(field.astype(np.float32), size, mode="nearest") + np.float32(0)
            assert_same_field(window_maximum(field, size), expected)


def test_other_dtypes_are_filtered_as_float32():
    field = np.array([[1.5, -2.0], [np.nan, 4.0]], dtype=np.float64)
    assert np.dtype(np.float64) not in _filters.NARROW
    assert_same_field(window_maximum(field, 3), reference_maximum_filter(field, 3))
