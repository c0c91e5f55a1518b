"""The planes family on numba: the spot score in NumPy's float32 order, one compiled pass per band of
rows (the translation is left to the floor: :mod:`._planes_kernels` says why).

The compiled loop and its driver live in :mod:`._planes_kernels` (it imports numba), loaded by the
hook once the kernel is ready: the plugin imports this module, and its import stays as cheap as the
hook alone. Until the kernel is ready its calls decline (:mod:`._warm`) and the NumPy floor answers
them with the same bits.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from . import _warm


@hookimpl
def spacr_accel_spot_score(stack: np.ndarray) -> np.ndarray:
    _warm.require("science:planes")  # declines while the warm-up compiles it
    from ._planes_kernels import spot_score

    return spot_score(stack)
