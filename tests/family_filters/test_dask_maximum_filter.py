"""``spacr_accel_core.dask.maximum_filter`` bit for bit with the in-memory op on the whole array,
for every chunking, stacks field by field (threaded scheduler: the same graphs a cluster runs,
computed here)."""

from __future__ import annotations

import dask.array as da
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import dask as sad
from spacr_accel_core import ops

QUICK = settings(max_examples=20, deadline=None)


def identical(got: np.ndarray, want: np.ndarray) -> bool:
    return got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()


@st.composite
def fields(draw, leading=0):
    """A small field (or stack) with NaNs, signed zeros and ties, and a chunking of it."""
    stack = [draw(st.integers(1, 3)) for _ in range(leading)]
    shape = (*stack, draw(st.integers(1, 17)), draw(st.integers(1, 17)))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    values = rng.choice(np.array([-2.0, -0.0, 0.0, 1.0, 3.5, np.nan, -np.inf], dtype=np.float32), size=shape,
                        p=[0.2, 0.2, 0.2, 0.2, 0.12, 0.04, 0.04])
    values = values if draw(st.booleans()) else rng.integers(-300, 300, size=shape).astype(draw(
        st.sampled_from([np.int16, np.int64, np.float64])))
    chunks = tuple(draw(st.integers(1, max(1, n))) for n in shape)
    return values, chunks


@QUICK
@given(fields(), st.integers(0, 60))
def test_maximum_filter_matches_ops_for_every_chunking(case, size):
    field, chunks = case
    got = sad.maximum_filter(da.from_array(field, chunks=chunks), size).compute(scheduler="threads")
    assert identical(got, ops.maximum_filter(field, size))


@QUICK
@given(fields(leading=2), st.integers(0, 30))
def test_a_stack_is_filtered_field_by_field(case, size):
    stack, chunks = case
    got = sad.maximum_filter(da.from_array(stack, chunks=chunks), size).compute(scheduler="threads")
    want = np.empty(stack.shape, dtype=np.float32)
    for index in np.ndindex(*stack.shape[:-2]):
        want[index] = ops.maximum_filter(stack[index], size)
    assert identical(got, want)
