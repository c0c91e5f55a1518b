"""The NumPy backend's product: float32 operands are not copied, and wide integers are exact in
float64."""

import numpy as np

from spacr_accel_core import ops


def test_matmul_float32_operands_are_not_copied():
    """The per-tile product: float32 in, NumPy's own @ out, no conversion of the big operand."""
    first = np.arange(12, dtype=np.float32).reshape(6, 2)
    second = np.eye(2, dtype=np.float32)
    out = ops.matmul(first, second, backend="numpy")
    assert np.array_equal(out, first) and out.dtype == np.float32
    assert not np.shares_memory(out, first)


def test_matmul_wide_integers_are_exact_in_float64():
    first = np.array([[2**40, 1]], dtype=np.int64)
    second = np.array([[1], [1]], dtype=np.int64)
    assert ops.matmul(first, second, backend="numpy")[0, 0] == np.float32(2**40 + 1)
