"""The window maxima reference against an independent definition: SciPy's filter read at the
points; NaN poisons its window and a maximum of zero is positive."""

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
