"""numba's warm-up and its cache, in this process and in the ones it starts: each test starts with
the kernels compiled here, so what it changes (a damaged cache, a fork, a failed compile) is the
only thing that differs from a warm process."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _compiled(numba_compiled: None) -> None:
    """Every test here starts with the kernels compiled (``numba_compiled``)."""
