"""The kit's copy of NumPy's percentile arithmetic (``kit/_quantiles.py``): the index plan and the
interpolation, applied to order statistics selected by a plain sort, give ``np.percentile``'s bits;
``percentile_q`` keeps the type that decides NumPy's arithmetic and refuses what NumPy refuses."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core.kit._quantiles import lerp, percentile_q, quantile_plan


def _bits(value: Any) -> tuple[str, tuple[int, ...], bytes]:
    array = np.asarray(value)
    return array.dtype.str, array.shape, array.tobytes()


@settings(max_examples=120, deadline=None)
@given(dtype=st.sampled_from([np.float32, np.float64, np.int16, np.uint8]), count=st.integers(1, 40),
       data=st.data(), q=st.one_of(st.floats(0, 100), st.integers(0, 100),
                                   st.lists(st.floats(0, 100), min_size=1, max_size=4),
                                   st.floats(0, 100).map(np.float64), st.floats(0, 100).map(np.float32)))
def test_the_plan_and_the_interpolation_are_numpys(dtype: Any, count: int, data: st.DataObject, q: Any) -> None:
    """Whatever the type of ``q`` (a weak Python number, a NumPy scalar, a list), the answer's dtype,
    shape and bits are ``np.percentile``'s."""
    elements = st.floats(-1e6, 1e6, width=32) if np.dtype(dtype).kind == "f" else None
    field = data.draw(hnp.arrays(dtype, count, elements=elements))
    # Which of two equal zeros a selection puts at a rank is the selection's (np.sort's here,
    # np.partition's in np.percentile): the sign of a zero answer is ops.percentiles' rule, checked
    # against np.percentile in test_levels_ops. This test holds the plan and the interpolation.
    field = field + field.dtype.type(0) if field.dtype.kind == "f" else field
    checked = percentile_q(q)
    plan = quantile_plan(count, checked)
    ordered = np.sort(field)[plan.ranks]
    got = lerp(ordered[plan.lower], ordered[plan.upper], plan.gamma)
    expected = np.percentile(field, q)
    if plan.scalar:
        got = got[0]
    assert _bits(got) == _bits(expected)


def test_the_ranks_are_the_order_statistics_read() -> None:
    plan = quantile_plan(11, [0.0, 50.0, 95.0, 100.0])
    assert plan.ranks.dtype == np.int64 and plan.ranks.tolist() == [0, 1, 5, 6, 9, 10]
    assert plan.ranks[plan.lower].tolist() == [0, 5, 9, 10] and plan.ranks[plan.upper].tolist() == [1, 6, 10, 10]
    assert not plan.scalar and quantile_plan(11, 50).scalar and isinstance(quantile_plan(11, 50).gamma, float)


def test_percentile_q_keeps_the_type_and_refuses_what_numpy_refuses() -> None:
    assert percentile_q(90) == 90 and type(percentile_q(90)) is int
    assert type(percentile_q(np.float32(5))) is np.ndarray
    for bad, error in ((True, TypeError), ("90", TypeError), (1j, TypeError), ([[1.0]], ValueError),
                       (101, ValueError), (float("nan"), ValueError), ([-1.0, 5.0], ValueError)):
        with pytest.raises(error, match=r"percentile|real numbers"):
            percentile_q(bad, "percentile")
