"""The registration family on the card: batches of float64 phase correlations, two numbers back
per pair.

The primitives live in :mod:`._registration_kernels` (written against the kit), imported by the hook
at its first call: the plugin imports this module, and its import stays as cheap as the hook alone.
The hook calls them inside :func:`._runtime.on_the_card` (the card, its errors translated): the
fields go from here to the kernels, never through another module and back.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl

from ._runtime import on_the_card


@hookimpl
def spacr_accel_phase_correlate(first: np.ndarray, second: np.ndarray,
                                pairing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from ._registration_kernels import phase_correlate

    with on_the_card("phase_correlate") as kit:
        return phase_correlate(kit, first, second, pairing)
