"""The numba backend's tests wait for its kernels first: until they are compiled it declines every
call (the floor answers), which would make these tests check the floor instead of the kernels."""

from __future__ import annotations

import pytest

import spacr_accel_numba


@pytest.fixture(autouse=True, scope="session")
def _compiled() -> None:
    assert spacr_accel_numba.warm(timeout=600), f"the numba kernels did not compile: {spacr_accel_numba.failure()}"
