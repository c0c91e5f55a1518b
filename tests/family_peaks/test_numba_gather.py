"""numba's window maxima beyond the conformance suite: the threaded gather of many points in every
field, in any order of the points, against the reference."""

from __future__ import annotations

import numpy as np
import pytest

from spacr_accel_core import reference
from spacr_accel_numba import _peaks_kernels, warm

pytestmark = pytest.mark.usefixtures("numba_compiled")  # the kernels, not the floor, under test


@pytest.fixture(scope="module")
def compiled() -> None:
    assert warm(600)


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
