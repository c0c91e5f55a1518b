"""The NumPy floor's window maxima beyond the conformance suite: the gather of the windows at the
points is the reference's, alone and shared between threads."""

from __future__ import annotations

import numpy as np

from spacr_accel_core import reference
from spacr_accel_numpy import _peaks_kernels


def test_the_gather_is_the_reference_alone_and_shared_between_threads() -> None:
    rng = np.random.default_rng(7)
    stack = rng.normal(size=(8, 40, 50)).astype(np.float32)
    stack[3, 10, 10] = np.nan
    for count in (5, 600):  # 40 windows on one thread, 4800 shared between the threads
        points = np.stack([rng.integers(0, 40, count), rng.integers(0, 50, count)], axis=1)
        for size in (1, 3, 7):
            np.testing.assert_array_equal(_peaks_kernels.window_maxima(stack, points, size),
                                          reference.window_maxima(stack, points, size))
