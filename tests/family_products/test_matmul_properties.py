"""Property tests: ``ops.matmul`` on the default backend against a plain reference written here
(the float64 product), integer products exact, empty operands and two vectors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import ops

SETTINGS = settings(deadline=None, max_examples=80, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def reference_matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    return np.matmul(np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64))


# ---- matmul -----------------------------------------------------------------------------------------

MATMUL_DTYPES = st.sampled_from([np.float32, np.float64, np.int16, np.int64, np.uint8, np.bool_])


@st.composite
def operands(draw) -> tuple[np.ndarray, np.ndarray]:
    inner = draw(st.integers(1, 6))
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    first_shape = draw(st.sampled_from([(inner,), (draw(st.integers(1, 6)), inner),
                                        (*batch, draw(st.integers(1, 5)), inner)]))
    second_shape = draw(st.sampled_from([(inner,), (inner, draw(st.integers(1, 6))),
                                         (*batch[1:], inner, draw(st.integers(1, 5)))]))
    arrays = []
    for shape in (first_shape, second_shape):
        dtype = np.dtype(draw(MATMUL_DTYPES))
        if dtype.kind == "f":
            elements = st.floats(-1e3, 1e3, width=32)
        elif dtype.kind == "b":
            elements = st.booleans()
        else:
            elements = st.integers(0 if dtype.kind == "u" else -100, 100)
        arrays.append(draw(hnp.arrays(dtype, shape, elements=elements)))
    return arrays[0], arrays[1]


@SETTINGS
@given(pair=operands())
def test_matmul_matches_float64_reference(pair):
    first, second = pair
    want = reference_matmul(first, second)
    result = ops.matmul(first, second)
    assert isinstance(result, np.ndarray) and result.dtype == np.float32
    assert result.shape == np.shape(want)
    scale = reference_matmul(np.abs(first.astype(np.float64)), np.abs(second.astype(np.float64)))
    np.testing.assert_array_less(np.abs(result - want), scale * 1e-6 + 1e-30 + np.abs(want) * 1e-6)


def test_matmul_integer_products_are_exact():
    rng = np.random.default_rng(3)
    first = rng.integers(-50, 50, size=(40, 7))
    second = rng.integers(-50, 50, size=(7, 5)).astype(np.int16)
    np.testing.assert_array_equal(ops.matmul(first, second), (first @ second).astype(np.float32))


@pytest.mark.parametrize(("first", "second", "shape"), [
    ((0, 3), (3, 4), (0, 4)),
    ((2, 0), (0, 3), (2, 3)),
    ((3, 0), (0,), (3,)),
    ((0,), (0,), ()),
    ((2, 0, 4), (4, 5), (2, 0, 5)),
])
def test_matmul_empty_operands(first, second, shape):
    result = ops.matmul(np.ones(first), np.ones(second))
    assert result.shape == shape == np.matmul(np.ones(first), np.ones(second)).shape
    assert result.dtype == np.float32
    assert not result.any()


def test_matmul_two_vectors_give_a_0d_array():
    result = ops.matmul(np.array([1.0, 2.0, 3.0]), np.array([4, 5, 6]))
    assert isinstance(result, np.ndarray) and result.shape == () and result.dtype == np.float32
    assert float(result) == 32.0
