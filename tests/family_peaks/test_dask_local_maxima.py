"""The Dask layer's local maxima: exactly the in-memory answer for every chunking (each peak once,
in row-major order), and bad input refused before any graph."""

from __future__ import annotations

import dask
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

da = pytest.importorskip("dask.array")

from spacr_accel_core import dask as sad  # noqa: E402  (after the importorskip above)
from spacr_accel_core import ops  # noqa: E402  (after the importorskip above, as the import before it)


@st.composite
def chunked_plates(draw: st.DrawFn) -> tuple[np.ndarray, tuple[int, ...]]:
    """A plate (or one mosaic) of small-integer values (plateaus: ties on block edges), and a chunking."""
    shape = draw(st.sampled_from([(9, 11), (2, 13, 7), (3, 6, 5), (2, 2, 8, 6)]))
    values = st.one_of(st.integers(0, 3).map(float), st.just(np.nan))
    field = draw(hnp.arrays(np.float32, shape, elements=values))
    chunks = tuple(draw(st.integers(1, n)) for n in shape)
    return field, chunks


@settings(max_examples=40, deadline=None)
@given(plate=chunked_plates(), size=st.integers(0, 9), threshold=st.sampled_from([None, 0.5, 2.0]))
def test_local_maxima_on_blocks_are_the_whole_arrays_once_each(plate, size, threshold):
    field, chunks = plate
    with dask.config.set(scheduler="synchronous"):
        got = sad.local_maxima(da.from_array(field, chunks=chunks), size, threshold=threshold).compute()
    np.testing.assert_array_equal(got, ops.local_maxima(field, size, threshold=threshold))


def test_local_maxima_refuses_bad_input_before_any_graph():
    with pytest.raises(ValueError, match="2-D"):
        sad.local_maxima(da.zeros(5), 3)
    with pytest.raises(ValueError, match="threshold is NaN"):
        sad.local_maxima(da.zeros((4, 4)), 3, threshold=float("nan"))


@pytest.mark.parametrize("chunks", [(2, 1, 8, 6), (2, 3, 4, 6), (1, 2, 8, 3), (2, 2, 3, 6)])
def test_local_maxima_keep_row_major_order_when_an_inner_lead_axis_is_split(chunks):
    """A block holding fields 0 and 1 of the outer axis, split along the inner one, would list field
    (1, 0) before field (0, 1): the peaks must still come in the in-memory call's row-major order."""
    field = np.random.default_rng(3).integers(0, 3, (2, 3, 8, 6)).astype(np.float32)
    with dask.config.set(scheduler="synchronous"):
        got = sad.local_maxima(da.from_array(field, chunks=chunks), 3).compute()
    np.testing.assert_array_equal(got, ops.local_maxima(field, 3))
