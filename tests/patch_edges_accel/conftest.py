"""The real spaCR (``pip install --no-deps spacr==1.5.1.5``), patched and not, on edge inputs: every
seam's answer, layout, warnings and errors against spaCR's own.

Every test here needs spaCR; without it they are skipped, saying how to install it.
"""

from __future__ import annotations

import pytest

pytest.importorskip("spacr", reason="spaCR is not installed (pip install --no-deps spacr==1.5.1.5)")


@pytest.fixture(scope="session", autouse=True)
def _ready(compiled_backends: None) -> None:
    """Every test here starts with the compiled backends ready (``compiled_backends``)."""
