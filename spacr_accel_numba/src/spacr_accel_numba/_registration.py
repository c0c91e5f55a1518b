"""The registration family on numba: phase correlation on SciPy's transforms, its passes between
them compiled.

The compiled loops and their driver live in :mod:`._registration_kernels` (it imports numba),
loaded by the hook once the kernel is ready: the plugin imports this module, and its import stays as
cheap as the hook alone. Until the kernel is ready its calls decline (:mod:`._warm`) and the NumPy
floor answers them with the same answers.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from . import _warm


@hookimpl
def spacr_accel_phase_correlate(first: np.ndarray, second: np.ndarray,
                                pairing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    _warm.require("science:decode")  # declines while the warm-up compiles it (with the window gather)
    from ._registration_kernels import phase_correlate

    return phase_correlate(first, second, pairing)
