"""The real spaCR (``pip install --no-deps spacr==1.5.1.5``), patched and not, on the triangle consensus.

Every test here needs spaCR; without it they are skipped, saying how to install it.
"""

from __future__ import annotations

import pytest

pytest.importorskip("spacr", reason="spaCR is not installed (pip install --no-deps spacr==1.5.1.5)")
pytest.importorskip("scipy.spatial")
