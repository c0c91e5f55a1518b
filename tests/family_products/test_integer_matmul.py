"""``exact.integer_matmul`` (the exact integer product rounded once) against a plain, independently
written reference, and the one double rounding it documents."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core.exact import integer_matmul


def correctly_rounded(value: int) -> np.float32:
    """The float32 nearest to an integer (ties to even), by integer arithmetic alone."""
    magnitude = abs(value)
    drop = magnitude.bit_length() - 24
    if drop > 0:
        kept, rest = divmod(magnitude, 1 << drop)
        half = 1 << (drop - 1)
        if rest > half or (rest == half and kept % 2 == 1):
            kept += 1
        magnitude = kept << drop
    with np.errstate(over="ignore"):
        return np.float32(float(magnitude) if value >= 0 else -float(magnitude))


def exact_product(first: np.ndarray, second: np.ndarray) -> list[list[int]]:
    a, b = first.tolist(), second.tolist()
    return [[sum(int(a[i][k]) * int(b[k][j]) for k in range(len(b))) for j in range(len(b[0]))]
            for i in range(len(a))]


INT_DTYPES = [np.int64, np.uint64, np.int32, np.uint32, np.int8, np.bool_]


@st.composite
def integer_operands(draw):
    rows, inner, cols = draw(st.integers(1, 4)), draw(st.integers(1, 5)), draw(st.integers(1, 4))
    arrays = []
    for shape in ((rows, inner), (inner, cols)):
        dtype = np.dtype(draw(st.sampled_from(INT_DTYPES)))
        if dtype == np.bool_:
            elements = st.booleans()
        else:
            info = np.iinfo(dtype)
            # Near the ends of the range, near powers of two and small: every one of the three paths.
            special = st.sampled_from([int(info.max), int(info.min), 0, 1, -1 if info.min < 0 else 2,
                                       min(int(info.max), 2 ** 62 + 2 ** 38 + 1), min(int(info.max), 2 ** 53 + 1)])
            elements = st.one_of(special, st.integers(int(info.min), int(info.max)), st.integers(-3, 3).filter(
                lambda v, lo=int(info.min): v >= lo))
        arrays.append(draw(hnp.arrays(dtype, shape, elements=elements)))
    return arrays


@settings(max_examples=300, deadline=None)
@given(operands=integer_operands())
def test_integer_matmul_is_the_exact_product_rounded_once(operands):
    first, second = operands
    got = integer_matmul(first, second)
    expected = np.array([[correctly_rounded(v) for v in row] for row in exact_product(first, second)],
                        dtype=np.float32)
    assert got.dtype == np.float32
    assert np.array_equal(got, expected), (first, second, got, expected)


def test_integer_matmul_the_documented_double_rounding_case():
    x = 2 ** 62 + 2 ** 38 + 1
    got = integer_matmul(np.array([[x]]), np.array([[1]]))
    assert int(got[0, 0]) == 2 ** 62 + 2 ** 39  # the nearest float32; float64 first gives 2**62
    assert integer_matmul(np.array([x, x]), np.array([3, -1])).shape == ()
