"""numba's phase correlation beyond the conformance suite: pairs sharing reference fields, one
pair's passes split between the threads, and the compiled surface peak (the first maximum) and
mean (NumPy's)."""

from __future__ import annotations

import numpy as np
import pytest

from spacr_accel_core import reference
from spacr_accel_numba import _registration_kernels, warm

pytestmark = pytest.mark.usefixtures("numba_compiled")  # the kernels, not the floor, under test


@pytest.fixture(scope="module")
def compiled() -> None:
    assert warm(600)


def test_pairs_sharing_reference_fields_match_the_reference(compiled: None) -> None:
    rng = np.random.default_rng(9)
    references = rng.random((4, 18, 30))
    pairing = np.arange(9) % 4
    first = references[pairing]
    second = np.stack([np.roll(first[i], (-i, 2 * i), axis=(0, 1)) + 0.01 * rng.random((18, 30)) for i in range(9)])
    for batch in (slice(0, 9), slice(0, 1)):  # threads sharing the pairs, and one pair split by rows
        peaks, ratios = _registration_kernels.phase_correlate(references, second[batch], pairing[batch])
        for number, (peak, ratio) in enumerate(zip(peaks, ratios, strict=True)):
            dy, dx, want, _ = reference.phase_correlation(first[number], second[number])
            assert divmod(int(peak), 30) == (dy % 18, dx % 30)
            assert abs(ratio - want) <= 1e-9 * want


@pytest.mark.parametrize("threads", [1, 3])
def test_the_surface_peak_is_the_first_maximum_and_the_mean_is_numpys(compiled: None, threads: int) -> None:
    # Row maxima then the row's first maximum: ties within a row and across rows go to the first, row-major.
    rng = np.random.default_rng(12)
    surface = rng.random((37, 29)) - 0.5
    for spots in ([(20, 3)], [(20, 3), (20, 1)], [(30, 0), (5, 28), (5, 27)]):
        tied = surface.copy()
        for spot in spots:
            tied[spot] = 2.0
        peak, ratio = _registration_kernels._peak(tied, threads)
        assert peak == int(np.argmax(tied))
        assert abs(ratio - 2.0 / float(np.abs(tied).mean())) <= 1e-12 * ratio
