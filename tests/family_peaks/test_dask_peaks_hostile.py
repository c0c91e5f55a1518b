"""Window maxima's hostile inputs on Dask: refused when the function is called, before any graph
runs, with the in-memory call's words."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from spacr_accel_core import dask as sad

FIELDS = np.random.default_rng(8).random((2, 12, 10))


def lazy(array: np.ndarray) -> da.Array:
    return da.from_array(array, chunks=(1, 5, 4))


def test_window_maxima_names_its_stack_and_refuses_pointless_points() -> None:
    with pytest.raises(ValueError, match="stack must be a 2-D array"):
        sad.window_maxima(da.ones(5), [[0, 0]], 3)
    with pytest.raises(ValueError, match=r"points must be an \(N, 2\) array"):
        sad.window_maxima(lazy(FIELDS), np.zeros((2, 0)), 3)
