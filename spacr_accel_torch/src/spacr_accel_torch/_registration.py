"""The registration family on torch: batches of phase correlations whose transforms never leave the
device.

The torch code lives in :mod:`._registration_kernels`, imported by the hook at its first call: the
plugin imports this module, and its import stays as cheap as the hook alone. The hook calls it
inside :func:`._on_device.on_device` (the device, its errors translated): the fields go from here
to the kernels, never through another module and back.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from ._on_device import on_device


@hookimpl
def spacr_accel_phase_correlate(first: np.ndarray, second: np.ndarray,
                                pairing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from ._registration_kernels import phase_correlate

    with on_device("phase_correlate") as device:
        return phase_correlate(first, second, pairing, device)
