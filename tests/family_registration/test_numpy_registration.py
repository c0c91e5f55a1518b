"""The NumPy floor's phase correlation beyond the conformance suite: a reference field shared by
many pairs (every cycle registered to one reference cycle) gives each pair the answer it gives
alone."""

from __future__ import annotations

import numpy as np

from spacr_accel_core import reference
from spacr_accel_numpy import _registration_kernels


def test_pairs_sharing_reference_fields_answer_as_alone() -> None:
    rng = np.random.default_rng(6)
    references = rng.random((4, 20, 24))
    references[3] = references[1] + 1e-9  # nearly, not exactly, another reference: its own field
    pairing = np.array([0, 1, 2, 0, 1, 2, 0, 3, 1, 2])
    first = references[pairing]
    second = np.stack([np.roll(first[i], (i, -i), axis=(0, 1)) + 0.01 * rng.random((20, 24)) for i in range(10)])
    peaks, ratios = _registration_kernels.phase_correlate(references, second, pairing)
    for number in range(10):
        alone = _registration_kernels.phase_correlate(first[number:number + 1], second[number:number + 1],
                                                      np.zeros(1, np.int64))
        assert (peaks[number], ratios[number]) == (alone[0][0], alone[1][0])
        dy, dx, ratio, _ = reference.phase_correlation(first[number], second[number])
        assert divmod(int(peaks[number]), 24) == (dy % 20, dx % 24)
        assert abs(ratios[number] - ratio) <= 1e-9 * ratio
