"""The Dask layer's k-nearest keywords (``k`` within a distance, Hamming): exactly the in-memory
answer for every chunking."""

from __future__ import annotations

import dask
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

da = pytest.importorskip("dask.array")

from spacr_accel_core import dask as sad  # noqa: E402  (after the importorskip above)
from spacr_accel_core import ops  # noqa: E402  (after the importorskip above, as the import before it)


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 60), chunk=st.integers(1, 25), k=st.integers(1, 4),
       bound=st.sampled_from([None, 0.0, 1.0, 2.0]), seed=st.integers(0, 2**16))
def test_k_nearest_within_a_distance_on_blocks(rows, chunk, k, bound, seed):
    rng = np.random.default_rng(seed)
    source = rng.integers(-3, 4, (rows, 2)).astype(np.float32)  # lattice: ties everywhere
    target = rng.integers(-3, 4, (17, 2)).astype(np.float32)
    with dask.config.set(scheduler="synchronous"):
        index, distance = dask.compute(*sad.nearest_neighbours(da.from_array(source, chunks=chunk), target,
                                                               k=k, max_distance=bound))
    expected_index, expected_distance = ops.nearest_neighbours(source, target, k=k, max_distance=bound)
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(distance, expected_distance)


def test_hamming_on_blocks():
    rng = np.random.default_rng(3)
    source = rng.integers(0, 256, (90, 32), dtype=np.uint8)
    target = np.repeat(rng.integers(0, 256, (10, 32), dtype=np.uint8), 3, axis=0)  # equal descriptors
    with dask.config.set(scheduler="synchronous"):
        index, distance = dask.compute(*sad.nearest_neighbours(da.from_array(source, chunks=20), target,
                                                               k=2, metric="hamming"))
    expected_index, expected_distance = ops.nearest_neighbours(source, target, k=2, metric="hamming")
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(distance, expected_distance)
    with pytest.raises(TypeError, match="uint8"):
        sad.nearest_neighbours(da.from_array(source.astype(np.float32), chunks=20), target, metric="hamming")
