"""The numba backend's decode steps beyond the conformance suite: pairs sharing reference fields,
one pair's passes split between the threads, and the gather of many points in every field."""

from __future__ import annotations

import numpy as np
import pytest

from spacr_accel_core import reference
from spacr_accel_numba import _peaks_kernels, _registration_kernels, warm


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


def test_the_gather_of_many_points_matches_the_reference(compiled: None) -> None:
    rng = np.random.default_rng(10)
    stack = rng.random((6, 50, 40)).astype(np.float32)
    stack[2, 10, 10] = np.nan
    stack[3] = -0.0
    points = np.stack([rng.integers(0, 50, 5000), rng.integers(0, 40, 5000)], axis=1)
    got = _peaks_kernels.window_maxima(stack, points, 5)
    assert got.tobytes() == reference.window_maxima(stack, points, 5).tobytes()


@pytest.mark.parametrize("arrangement", ["sorted", "reversed", "repeated"])
def test_the_gather_in_any_point_order_matches_the_reference(compiled: None, arrangement: str) -> None:
    # Row-major points skip the sort, others are sorted for the walk; both answer in the caller's order,
    # with NaN windows, the edges and the prefetch distance's tail (fewer points than it) covered.
    rng = np.random.default_rng(11)
    stack = rng.random((5, 33, 27)).astype(np.float32)
    stack[1, 0, 0] = stack[4, 32, 26] = stack[2, 16, 13] = np.nan
    for count in (3, 700):
        points = np.stack([rng.integers(0, 33, count), rng.integers(0, 27, count)], axis=1)
        points = points[np.lexsort((points[:, 1], points[:, 0]))]
        if arrangement == "reversed":
            points = points[::-1]
        elif arrangement == "repeated":
            points = np.concatenate([points, points[:1], [[0, 0], [32, 26]]])
        for size in (1, 3, 7):
            got = _peaks_kernels.window_maxima(stack, points, size)
            assert got.tobytes() == reference.window_maxima(stack, points, size).tobytes()


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
