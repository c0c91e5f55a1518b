"""The registration family on torch: batches of phase correlations whose transforms never leave the
device.

The torch code lives in :mod:`._registration_kernels`, imported by the hook at its first call: the
plugin imports this module, and its import stays as cheap as the hook alone.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from ._on_device import run


@hookimpl
def spacr_accel_phase_correlate(first: np.ndarray, second: np.ndarray,
                                pairing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from ._registration_kernels import phase_correlate

    return run("phase_correlate", phase_correlate, first, second, pairing)
