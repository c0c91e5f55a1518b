"""The real spaCR (``pip install --no-deps spacr==1.5.1.5``), patched and not, on its level settings.

Every test here needs spaCR; without it they are skipped, saying how to install it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("spacr", reason="spaCR is not installed (pip install --no-deps spacr==1.5.1.5)")

from spacr_accel_core import patch, warm_up  # after the skip: these tests need spaCR


@pytest.fixture(scope="session", autouse=True)
def _numba_ready() -> None:
    warm_up("numba")


@pytest.fixture
def levels_patched() -> Iterator[None]:
    """spaCR patched without the check mode (each test compares with spaCR's own itself)."""
    patch.reset()
    assert patch.install()
    try:
        yield
    finally:
        patch.uninstall()
        patch.reset()
