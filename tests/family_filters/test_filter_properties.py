"""Property tests: ``ops.maximum_filter`` on the default backend against a plain reference written
here (edge-padded sliding windows, whose ``max`` propagates NaN: the NaN rule) and against SciPy
on finite input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import ops

SETTINGS = settings(deadline=None, max_examples=80, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def reference_filter(field: np.ndarray, size: int) -> np.ndarray:
    """Edge-padded sliding windows; ``max`` propagates NaN, which is the NaN rule."""
    field = np.asarray(field).astype(np.float32)
    size = size + 1 if size % 2 == 0 else size
    if size <= 1:
        return field.copy()
    radius = size // 2
    padded = np.pad(field, radius, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, (size, size))
    return windows.max(axis=(-2, -1))


# ---- maximum_filter -------------------------------------------------------------------------------

FIELD_DTYPES = st.sampled_from([np.float32, np.float64, np.int32, np.uint8, np.int64, np.float16, np.bool_])
shapes_2d = st.tuples(st.integers(1, 24), st.integers(1, 24))


@st.composite
def fields(draw, allow_nan: bool = True) -> np.ndarray:
    dtype = np.dtype(draw(FIELD_DTYPES))
    shape = draw(shapes_2d)
    if dtype.kind == "f":
        elements = st.floats(-1e4, 1e4, width=16 if dtype.itemsize == 2 else 32)
        if allow_nan:
            elements = elements | st.sampled_from([np.nan, np.inf, -np.inf])
        return draw(hnp.arrays(dtype, shape, elements=elements))
    return draw(hnp.arrays(dtype, shape))


@SETTINGS
@given(field=fields(), size=st.integers(0, 9))
def test_maximum_filter_matches_padded_windows_with_the_nan_rule(field, size):
    result = ops.maximum_filter(field, size)
    assert result.dtype == np.float32 and result.shape == field.shape
    assert not np.shares_memory(result, field)
    np.testing.assert_array_equal(result, reference_filter(field, size))  # NaN positions too


@SETTINGS
@given(field=fields(allow_nan=False), size=st.integers(0, 9))
def test_maximum_filter_matches_scipy_on_finite_input(field, size):
    result = ops.maximum_filter(field, size)
    odd = size + 1 if size % 2 == 0 else size
    want = scipy.ndimage.maximum_filter(field.astype(np.float32), max(odd, 1), mode="nearest")
    np.testing.assert_array_equal(result, want)


@settings(deadline=None, max_examples=8, database=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.sampled_from([3, 5, 15, 31]),
       shape=st.tuples(st.integers(620, 700), st.integers(440, 520)))
def test_maximum_filter_large_fields_match_scipy(seed, size, shape):
    """Big enough for the striped, threaded path; a few NaNs checked against the window rule."""
    rng = np.random.default_rng(seed)
    field = rng.standard_normal(shape).astype(np.float32)
    result = ops.maximum_filter(field, size)
    np.testing.assert_array_equal(result, scipy.ndimage.maximum_filter(field, size, mode="nearest"))
    field[rng.integers(0, shape[0], 3), rng.integers(0, shape[1], 3)] = np.nan
    np.testing.assert_array_equal(ops.maximum_filter(field, size), reference_filter(field, size))


def test_maximum_filter_nan_rule_examples():
    field = np.zeros((5, 5), np.float32)
    field[0, 0] = np.nan
    result = ops.maximum_filter(field, 3)
    assert np.isnan(result[:2, :2]).all()
    assert not np.isnan(result[2:, :]).any() and not np.isnan(result[:, 2:]).any()


def test_maximum_filter_size_one_and_zero_return_a_copy():
    field = np.arange(6, dtype=np.float64).reshape(2, 3)
    for size in (0, 1, np.int64(1)):
        result = ops.maximum_filter(field, size)
        assert result.dtype == np.float32
        np.testing.assert_array_equal(result, field)
        assert not np.shares_memory(result, field)
    same = np.ones((2, 2), np.float32)
    assert not np.shares_memory(ops.maximum_filter(same, 1), same)


def test_maximum_filter_even_size_means_next_odd():
    field = np.random.default_rng(1).standard_normal((9, 11)).astype(np.float32)
    np.testing.assert_array_equal(ops.maximum_filter(field, 4), ops.maximum_filter(field, 5))
    np.testing.assert_array_equal(ops.maximum_filter(field, 2),
                                  scipy.ndimage.maximum_filter(field, 3, mode="nearest"))


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 0)])
def test_maximum_filter_empty_field(shape):
    result = ops.maximum_filter(np.zeros(shape), 3)
    assert result.shape == shape and result.dtype == np.float32


def test_maximum_filter_non_contiguous_input_is_not_modified():
    base = np.random.default_rng(2).standard_normal((20, 30)).astype(np.float32)
    view = base[::2, 1::3]
    before = base.copy()
    np.testing.assert_array_equal(ops.maximum_filter(view, 3), reference_filter(view, 3))
    np.testing.assert_array_equal(base, before)
