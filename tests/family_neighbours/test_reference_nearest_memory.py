"""``spacr_accel_core.testing.reference_nearest`` holds a bounded block of distances, whatever the
size of the check, and its answers are those of every pair at once, bit for bit, for any block."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core.testing import reference_nearest, tie_heavy_point_sets

MiB = 2**20


def _every_pair_at_once(source: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The whole N x M float64 matrix, coordinates summed in order, the first minimum."""
    s = source.astype(np.float32).astype(np.float64)
    t = target.astype(np.float32).astype(np.float64)
    squared = np.zeros((s.shape[0], t.shape[0]))
    for axis in range(s.shape[1]):
        squared += np.square(s[:, None, axis] - t[None, :, axis])
    index = np.argmin(squared, axis=1)
    return index, np.sqrt(squared[np.arange(s.shape[0]), index]).astype(np.float32)


_PEAKS = """
import sys, tracemalloc
import numpy as np
from spacr_accel_core.testing import reference_nearest
rng = np.random.default_rng(0)
source = rng.uniform(0, 100, (3_000, 2)).astype(np.float32)
target = rng.uniform(0, 100, (20_000, 2)).astype(np.float32)
for memory in (64 * 2**20, 4 * 2**20):
    tracemalloc.start()
    reference_nearest(source, target, memory=memory)
    print(tracemalloc.get_traced_memory()[1])
    tracemalloc.stop()
"""
"""Measured in a fresh interpreter: tracemalloc counts every thread's allocations, and in the test
process a plugin's background warm-up (numba compiling its kernels) may be allocating meanwhile."""


def test_a_large_check_holds_a_bounded_block_of_distances() -> None:
    # 3,000 x 20,000 pairs: 480 MB of float64 distances at once (three times that with temporaries);
    # the default block is 64 MB of them, the running sum and one difference.
    done = subprocess.run([sys.executable, "-c", _PEAKS], capture_output=True, text=True, timeout=120, check=True)
    default, small = (int(line) for line in done.stdout.split())
    assert default < 80 * MiB
    assert small < 6 * MiB


@settings(max_examples=80, deadline=None)
@given(points=tie_heavy_point_sets(), memory=st.integers(1, 40_000))
def test_any_block_gives_the_answers_of_every_pair_at_once(points: tuple[np.ndarray, np.ndarray],
                                                           memory: int) -> None:
    source, target = points
    index, distance = reference_nearest(source, target, memory=memory)
    expected_index, expected_distance = _every_pair_at_once(source, target)
    assert index.dtype == np.int64 and distance.dtype == np.float32
    assert np.array_equal(index, expected_index)
    assert distance.tobytes() == expected_distance.tobytes()


def test_empty_sets_keep_their_answers() -> None:
    points = np.ones((3, 2), np.float32)
    index, distance = reference_nearest(points, points[:0])
    assert index.tolist() == [-1, -1, -1] and np.isinf(distance).all()
    index, distance = reference_nearest(points[:0], points)
    assert index.shape == (0,) and distance.shape == (0,) and index.dtype == np.int64


@pytest.mark.parametrize("memory", [0, -1, 1.5, True, "64"])
def test_memory_must_be_a_positive_number_of_bytes(memory: object) -> None:
    points = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="memory"):
        reference_nearest(points, points, memory=memory)  # type: ignore[arg-type]  # a wrong type on purpose: its refusal is the test
