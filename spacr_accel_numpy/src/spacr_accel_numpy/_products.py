"""The products family on the floor: ``matmul`` by NumPy's own, every pair of dtypes rounded once to float32.

float32 inputs take NumPy's float32 product (BLAS, IEEE); inputs every value of which float32 holds
exactly are cast to it; two integer operands of which one is wider take their exact integer product
(``toolkit.integer_matmul``), rounded once; anything else is multiplied in float64 and rounded once
to float32 (``toolkit.EXACT_IN_FLOAT32`` says why).
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl
from spacr_accel_core.toolkit import EXACT_IN_FLOAT32, integer_matmul

_F32 = np.dtype(np.float32)


@hookimpl
def spacr_accel_matmul(first: np.ndarray, second: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    if first.dtype is _F32 and second.dtype is _F32:  # the per-tile case, first and cheap
        if out is not None:  # into the caller's buffer: no fresh result's page faults
            return np.matmul(first, second, out=out)
        product = np.matmul(first, second)
    elif first.dtype in EXACT_IN_FLOAT32 and second.dtype in EXACT_IN_FLOAT32:
        product = np.matmul(first if first.dtype == _F32 else first.astype(_F32),
                            second if second.dtype == _F32 else second.astype(_F32))
    elif first.dtype.kind in "biu" and second.dtype.kind in "biu":
        product = integer_matmul(first, second)  # the exact integer product, rounded once
    else:
        product = np.matmul(first.astype(np.float64, copy=False),
                            second.astype(np.float64, copy=False)).astype(_F32)
    # Two vectors give a NumPy scalar; the contract is always an array.
    product = product if type(product) is np.ndarray else np.asarray(product, dtype=_F32)
    if out is not None:
        out[...] = product
        return out
    return product
