"""The numba backend's tests wait for its kernels first: until they are compiled it declines every
call (the floor answers), which would make these tests check the floor instead of the kernels."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _compiled(numba_compiled: None) -> None:
    """Every test here starts with the kernels compiled (``numba_compiled``)."""
