"""The input rules every operation shares: ``out=`` by NumPy's convention (never overlapping an
input nor read-only, written and returned), and ``gpu`` as 0/1 or a bool, nothing else (torch
forced with ``gpu=False`` runs on the CPU)."""

from __future__ import annotations

import numpy as np
import pytest

import spacr_accel_core
from spacr_accel_core import ops

RNG = np.random.default_rng(21)
FIELD = RNG.random((20, 30), dtype=np.float32)
POINTS = RNG.integers(-3, 4, (40, 2)).astype(np.float32)
OTHER = RNG.integers(-3, 4, (25, 2)).astype(np.float32)


@pytest.mark.parametrize(("out", "error", "words"), [
    (np.empty((20, 30), np.float64), TypeError, "float32"),
    (np.empty((30, 20), np.float32), ValueError, "shape"),
    (np.empty((20, 60), np.float32)[:, ::2], ValueError, "C-contiguous"),
    ([[0.0]], TypeError, "NumPy array"),
])
def test_out_is_checked_by_numpys_convention(out, error, words):
    with pytest.raises(error, match=words):
        ops.maximum_filter(FIELD, 3, out=out)


def test_out_may_not_overlap_an_input_nor_be_read_only():
    field = FIELD.copy()
    with pytest.raises(ValueError, match="overlaps"):
        ops.maximum_filter(field, 3, out=field)
    frozen = np.empty((20, 30), np.float32)
    frozen.setflags(write=False)
    with pytest.raises(ValueError, match="writable"):
        ops.maximum_filter(FIELD, 3, out=frozen)
    first = RNG.random((6, 6), dtype=np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        ops.matmul(first, first, out=first)


@pytest.mark.parametrize("size", [0, 1, 3, 7, 200])
def test_out_is_written_and_returned(size):
    out = np.full(FIELD.shape, np.nan, np.float32)
    assert ops.maximum_filter(FIELD, size, out=out) is out
    np.testing.assert_array_equal(out, ops.maximum_filter(FIELD, size))
    product = np.full((20, 20), np.nan, np.float32)
    assert ops.matmul(FIELD, FIELD.T, out=product) is product
    np.testing.assert_array_equal(product, ops.matmul(FIELD, FIELD.T))
    empty = np.full((20, 20), np.nan, np.float32)
    assert ops.matmul(np.zeros((20, 0), np.float32), np.zeros((0, 20), np.float32), out=empty) is empty
    assert (empty == 0).all()


@pytest.mark.parametrize("flag", [0, 1, np.int64(1), np.bool_(False)])
def test_gpu_takes_zero_and_one(flag):
    ops.matmul(FIELD, FIELD.T, gpu=flag)
    ops.nearest_neighbours(POINTS, OTHER, gpu=flag)


@pytest.mark.parametrize("flag", [2, -1, "yes", None, 1.0])
def test_gpu_refuses_anything_else(flag):
    with pytest.raises(TypeError, match="gpu must be True or False"):
        ops.matmul(FIELD, FIELD.T, gpu=flag)


def test_torch_forced_with_gpu_false_runs_on_the_cpu():
    pytest.importorskip("torch")
    got = ops.matmul(FIELD, FIELD.T, backend="torch", gpu=False)
    assert spacr_accel_core.last_dispatch().backend == "torch"
    np.testing.assert_allclose(got, FIELD @ FIELD.T, rtol=1e-6)
