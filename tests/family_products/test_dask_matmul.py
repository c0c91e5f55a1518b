"""``spacr_accel_core.dask.matmul`` against the in-memory op for every chunking (threaded scheduler:
the same graphs a cluster runs, computed here): bit for bit where the products are exact, to
float32's rounding on real data, chunked like its first operand, batches of tall operands."""

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
def products(draw):
    rows, inner, cols = draw(st.integers(0, 200)), draw(st.integers(0, 9)), draw(st.integers(0, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    vector = draw(st.booleans())
    first = rng.integers(-50, 50, (rows, inner))  # integer-valued: every product is exact in float32
    second = rng.integers(-50, 50, (inner,) if vector else (inner, cols))
    return first, second, draw(st.integers(1, max(1, rows))), draw(st.integers(1, max(1, inner)))


@QUICK
@given(products())
def test_matmul_matches_ops_exactly_when_the_products_are_exact(case):
    first, second, rows, cols = case
    got = sad.matmul(da.from_array(first, chunks=(rows, cols)), second).compute(scheduler="threads")
    assert identical(got, ops.matmul(first, second))


def test_matmul_of_real_data_agrees_to_float32_rounding_and_is_chunked_like_first():
    rng = np.random.default_rng(7)
    first = rng.standard_normal((1000, 16), dtype=np.float32)
    second = rng.standard_normal((16, 4), dtype=np.float32)
    lazy = sad.matmul(da.from_array(first, chunks=(128, 5)), second)
    assert lazy.chunks[0] == da.from_array(first, chunks=(128, 5)).chunks[0] and lazy.chunks[1] == (4,)
    got, want = lazy.compute(), ops.matmul(first, second)
    bound = 16 * np.finfo(np.float32).eps * (np.abs(first) @ np.abs(second))
    assert got.dtype == np.float32 and (np.abs(got - want) <= bound).all()


def test_a_batch_of_tall_operands():
    first = np.arange(2 * 30 * 3, dtype=np.float64).reshape(2, 30, 3) % 7
    second = np.arange(6.0).reshape(3, 2)
    got = sad.matmul(da.from_array(first, chunks=(1, 8, 3)), second).compute()
    assert identical(got, ops.matmul(first, second))
