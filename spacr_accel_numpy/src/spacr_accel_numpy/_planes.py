"""The planes family on the floor: the translation as slice copies, the spot score as NumPy's own
expression on bands of rows.

The arithmetic lives in :mod:`._planes_kernels`, imported by each hook at its first call: the plugin
imports this module, and its import stays as cheap as the hooks alone.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl


@hookimpl
def spacr_accel_translate(stack: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    from ._planes_kernels import translate

    return translate(stack, shifts)


@hookimpl
def spacr_accel_spot_score(stack: np.ndarray) -> np.ndarray:
    from ._planes_kernels import spot_score

    return spot_score(stack)
