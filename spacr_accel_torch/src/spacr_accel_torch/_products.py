"""The products family on torch: the matrix product, tiled over the rows, in IEEE float32 (or
float64) whatever the process allowed.

The torch code lives in :mod:`._products_kernels`, imported by the hook at its first call: the
plugin imports this module, and its import stays as cheap as the hook alone.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from ._on_device import run


@hookimpl
def spacr_accel_matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:  # out= is copied in by the core
    from ._products_kernels import matmul

    return run("matmul", matmul, first, second)
