"""The real spaCR (``pip install --no-deps spacr==1.5.1.5``), patched and not, on the same inputs.

Every test here needs spaCR; without it they are skipped, saying how to install it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("spacr", reason="spaCR is not installed (pip install --no-deps spacr==1.5.1.5)")

from spacr_accel_core import patch  # after the skip: these tests need spaCR


@pytest.fixture
def patched() -> Iterator[None]:
    """spaCR patched, with the check mode on (every served call compared with spaCR's own), for
    one test; unpatched and counted afresh after it."""
    patch.reset()
    assert patch.install(check=True)
    try:
        yield
    finally:
        patch.uninstall()
        patch.install()  # modes back to their defaults ...
        patch.uninstall()  # ... and spaCR as it was
        patch.reset()


@pytest.fixture
def served_only() -> Iterator[None]:
    """spaCR patched without the check mode: what a user's run does."""
    patch.reset()
    assert patch.install()
    try:
        yield
    finally:
        patch.uninstall()
        patch.reset()


@pytest.fixture(scope="session", autouse=True)
def _compiled_backends() -> None:
    """The compiled backends ready before the first test: while numba compiles, the patch hands
    the Gaussian seams to spaCR's own SciPy calls (the floor would be no faster), and these tests
    check what the seams serve once it is ready."""
    import spacr_accel_core

    spacr_accel_core.warm_up(timeout=900)
