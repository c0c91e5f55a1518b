"""The products family on the card: ``matmul`` in IEEE float32 where float32 holds the inputs
exactly, in float64 otherwise, rounded once.

The primitives live in :mod:`._products_kernels` (written against the kit), imported by the hook at
its first call: the plugin imports this module, and its import stays as cheap as the hook alone.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from ._runtime import run


@hookimpl
def spacr_accel_matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    from ._products_kernels import matmul

    return run("matmul", matmul, first, second)
