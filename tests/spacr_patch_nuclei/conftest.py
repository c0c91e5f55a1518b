"""spaCR's ``nuclear_points`` patched and not: answers, layouts, warnings and errors against spaCR's own.

Every test here needs spaCR and scikit-image; without them they are skipped, saying how to install them.
"""

from __future__ import annotations

import pytest

pytest.importorskip("spacr", reason="spaCR is not installed (pip install --no-deps spacr==1.5.1.5)")
pytest.importorskip("skimage", reason="scikit-image is not installed (spaCR's peak finder)")


@pytest.fixture(scope="session", autouse=True)
def _ready(compiled_backends: None) -> None:
    """Every test here starts with the compiled backends ready (``compiled_backends``)."""
