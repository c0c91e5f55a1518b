"""The NumPy backend's integer products: multiplied exactly, then rounded once to float32 (an
integer beside a float multiplies in float64)."""

import numpy as np

from spacr_accel_core import ops


def test_integer_operands_multiply_exactly_then_round_once():
    x = 2 ** 62 + 2 ** 38 + 1
    assert int(ops.matmul([[x]], [[1]], backend="numpy")[0, 0]) == 2 ** 62 + 2 ** 39
    big = np.array([[2 ** 40, 3], [5, -(2 ** 41)]], dtype=np.int64)
    exact = big.astype(object) @ big.astype(object)
    assert np.array_equal(ops.matmul(big, big, backend="numpy"), np.array(exact.tolist(), dtype=np.float32))
    # An integer beside a float multiplies in float64 (the float is not an integer product).
    mixed = ops.matmul(np.array([[3]], dtype=np.int64), np.array([[0.5]]), backend="numpy")
    assert mixed.dtype == np.float32 and mixed[0, 0] == 1.5
