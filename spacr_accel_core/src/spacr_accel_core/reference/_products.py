"""The products family's reference: the product taken in float64 and rounded once to float32, which
every float32 product approximates.
"""

from __future__ import annotations

import numpy as np


def matmul(first: object, second: object) -> np.ndarray:
    """``first @ second`` in float64, rounded once to float32: what a float32 product approximates."""
    product: np.ndarray = np.matmul(np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64))
    return product.astype(np.float32)
