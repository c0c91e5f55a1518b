"""The Gaussians' hostile inputs on Dask: a kernel no array can hold (or a sigma that is not finite)
refused when the function is called, before any graph runs, with the in-memory call's words."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from spacr_accel_core import dask as sad

FIELDS = np.random.default_rng(8).random((2, 12, 10))


def lazy(array: np.ndarray) -> da.Array:
    return da.from_array(array, chunks=(1, 5, 4))


@pytest.mark.parametrize("operation", ["gaussian_filter", "gaussian_laplace"])
def test_a_kernel_no_array_can_hold_is_refused_at_the_call(operation: str) -> None:
    with pytest.raises(ValueError, match="sigma and truncate give a kernel radius"):
        getattr(sad, operation)(lazy(FIELDS), 1e300)
    with pytest.raises(ValueError, match="sigma must be finite"):
        getattr(sad, operation)(lazy(FIELDS), 10**400)
