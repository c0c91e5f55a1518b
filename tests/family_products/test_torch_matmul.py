"""The torch backend's product on its own paths: NumPy's answer, no float64 sent to a device that
refuses it, and out-of-memory injected to show a tile is retried smaller."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import ops
from spacr_accel_torch import _products_kernels, _runtime

CPU = _runtime.Device(torch.device("cpu"), True)
NO_DOUBLES = _runtime.Device(torch.device("cpu"), False)
"""The CPU posing as a device that refuses float64 (Metal): the verdict must run on the host."""


def oom(message: str = "CUDA out of memory. Tried to allocate 2.00 GiB") -> torch.OutOfMemoryError:
    return torch.OutOfMemoryError(message)


# ---- matmul --------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from([np.float32, np.float64, np.int64, np.uint8, np.bool_]),
       device=st.sampled_from([CPU, NO_DOUBLES]),
       shapes=st.sampled_from([((7, 3), (3, 5)), ((3,), (3, 4)), ((6, 3), (3,)), ((2, 5, 3), (3, 2)),
                               ((5, 3), (2, 3, 4)), ((4,), (4,))]))
def test_matmul_matches_numpy(dtype: type, device: _runtime.Device,
                              shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    rng = np.random.default_rng(0)
    first: np.ndarray = (rng.standard_normal(shapes[0]) * 10).astype(dtype)
    second: np.ndarray = (rng.standard_normal(shapes[1]) * 10).astype(dtype)
    got = _products_kernels.matmul(first, second, device)
    expected = np.matmul(first.astype(np.float64), second.astype(np.float64))
    assert got.dtype == np.float32 and got.shape == np.shape(expected)
    assert np.allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_no_double_reaches_a_device_that_refuses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[torch.dtype] = []
    product = _products_kernels._product

    def spy(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        seen.extend([first.dtype, second.dtype])
        return product(first, second)

    monkeypatch.setattr(_products_kernels, "_product", spy)
    first = np.arange(12, dtype=np.float64).reshape(4, 3)
    _products_kernels.matmul(first, first.T.copy(), NO_DOUBLES)
    assert seen and torch.float64 not in seen
    seen.clear()
    _products_kernels.matmul(first, first.T.copy(), CPU)  # a device that takes doubles keeps them
    assert torch.float64 in seen


def test_matmul_retries_smaller_tiles_after_out_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    rows: list[int] = []
    product = _products_kernels._product

    def flaky(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        rows.append(int(first.shape[-2]))
        if first.shape[-2] > 1000:
            raise oom()
        return product(first, second)

    monkeypatch.setattr(_products_kernels, "_product", flaky)
    first = np.random.default_rng(1).standard_normal((5000, 8)).astype(np.float32)
    second = np.random.default_rng(2).standard_normal((8, 8)).astype(np.float32)
    got = ops.matmul(first, second, backend="torch")
    assert np.allclose(got, first @ second, rtol=1e-5, atol=1e-5)
    assert rows[:4] == [5000, 2500, 1250, 625]
    assert sum(rows[3:]) == 5000
