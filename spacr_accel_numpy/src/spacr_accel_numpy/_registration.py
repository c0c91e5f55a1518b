"""The registration family on the floor: phase correlation on ``scipy.fft``.

The arithmetic lives in :mod:`._registration_kernels`, imported by the hook at its first call: the
plugin imports this module, and its import stays as cheap as the hook alone.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl


@hookimpl
def spacr_accel_phase_correlate(first: np.ndarray, second: np.ndarray,
                                pairing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from ._registration_kernels import phase_correlate

    return phase_correlate(first, second, pairing)
