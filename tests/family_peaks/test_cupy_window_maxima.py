"""CuPy's window maxima, every line run on the NumPy kit and compared with the plain reference
(NaN, signed zeros, groups of fields)."""

from __future__ import annotations

import numpy as np
from hypothesis import given

from spacr_accel_core import reference
from spacr_accel_core.testing._decode import _SETTINGS, gather_cases
from spacr_accel_cupy import _kit, _peaks_kernels

KIT = _kit.numpy_kit()


@_SETTINGS
@given(case=gather_cases())
def test_window_maxima_on_the_kit_matches_reference(case: tuple[np.ndarray, np.ndarray, int]) -> None:
    stack, points, size = case
    flat = stack.reshape(-1, *stack.shape[-2:])
    got = _peaks_kernels.window_maxima(KIT, flat, points, size)
    want = reference.window_maxima(flat, points, size)
    assert got.tobytes() == want.tobytes()
