"""numba's local maxima against the NumPy floor (bit for bit) and the reference, in one pass and in
threaded bands over the fields of a stack."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import reference
from spacr_accel_numpy import _peaks as floor_peaks

pytest.importorskip("numba")

from spacr_accel_numba import _peaks_kernels as numba_peaks


@st.composite
def _stacks(draw: st.DrawFn) -> np.ndarray:
    lead = draw(st.sampled_from([(), (3,), (2, 2)]))
    shape = (*lead, draw(st.integers(1, 30)), draw(st.integers(1, 30)))
    if draw(st.booleans()):
        return draw(hnp.arrays(np.uint16, shape, elements=st.integers(0, 3)))
    elements = st.sampled_from([0.0, -0.0, 1.0, 2.0, 0.1, -math.inf, math.nan, math.inf])
    return draw(hnp.arrays(np.float32, shape, elements=elements))


@settings(max_examples=80, deadline=None)
@given(_stacks(), st.integers(1, 9), st.sampled_from([None, 0.0, 0.1, 1.5, -math.inf]))
def test_local_maxima_equals_the_floor_and_the_reference(field: np.ndarray, size: int,
                                                         threshold: float | None) -> None:
    got = numba_peaks.local_maxima(field, size, threshold)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, floor_peaks.local_maxima(field, size, threshold))
    np.testing.assert_array_equal(got, reference.local_maxima(field, size, threshold).reshape(got.shape))


@pytest.mark.parametrize("shape", [(700, 650), (5, 130, 170), (2, 520, 530)])
def test_local_maxima_threaded_bands_and_fields(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(15)
    field = rng.random(shape).astype(np.float32)
    field[..., 100:140, 200:260] = np.float32(0.75)  # a plateau: every pixel of it a maximum
    for size, threshold in ((7, 0.5), (4, None), (31, 0.1)):
        np.testing.assert_array_equal(numba_peaks.local_maxima(field, size, threshold),
                                      floor_peaks.local_maxima(field, size, threshold))
