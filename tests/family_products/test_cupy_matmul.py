"""The CuPy backend's product, its algorithm run on the NumPy-compatible kit: NumPy's answer, and an
injected out-of-memory retried until it finishes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_cupy import _kit, _products_kernels

KIT = _kit.numpy_kit()


class CupyOutOfMemory(MemoryError):
    """Stands in for ``cupy.cuda.memory.OutOfMemoryError``, which is a MemoryError."""


@settings(max_examples=30, deadline=None)
@given(dtype=st.sampled_from([np.float32, np.float64, np.int64, np.uint8, np.bool_]),
       shapes=st.sampled_from([((7, 3), (3, 5)), ((3,), (3, 4)), ((6, 3), (3,)), ((2, 5, 3), (3, 2)),
                               ((5, 3), (2, 3, 4)), ((4,), (4,))]))
def test_matmul_matches_numpy(dtype: type, shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    rng = np.random.default_rng(0)
    first: np.ndarray = (rng.standard_normal(shapes[0]) * 10).astype(dtype)
    second: np.ndarray = (rng.standard_normal(shapes[1]) * 10).astype(dtype)
    got = _products_kernels.matmul(KIT, first, second)
    expected = np.matmul(first.astype(np.float64), second.astype(np.float64))
    assert got.dtype == np.float32 and got.shape == np.shape(expected)
    assert np.allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_matmul_retries_then_finishes(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    class FlakyNumpy:
        """NumPy whose matmul fails on tiles over 500 rows, as a shared card would."""

        def __getattr__(self, name: str) -> object:
            return getattr(np, name)

        @staticmethod
        def matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
            calls.append(first.shape[0])
            if first.shape[0] > 500:
                raise CupyOutOfMemory("Out of memory")
            product: np.ndarray = np.matmul(first, second)
            return product

    kit = _kit.Kit("numpy", FlakyNumpy(), KIT.ndimage, np.asarray, np.asarray,  # type: ignore[arg-type]  # a module stand-in
                   lambda: None, lambda: None)
    first = np.random.default_rng(2).standard_normal((3000, 8)).astype(np.float32)
    second = np.random.default_rng(3).standard_normal((8, 8)).astype(np.float32)
    got = _products_kernels.matmul(kit, first, second)
    assert np.allclose(got, first @ second, rtol=1e-5, atol=1e-5)
    assert calls[:4] == [3000, 1500, 750, 375]
