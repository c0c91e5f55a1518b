"""The point operations on dask.array: the in-memory answer for every chunking."""

from __future__ import annotations

import numpy as np
import pytest

from spacr_accel_core import ops

da = pytest.importorskip("dask.array")
sad = pytest.importorskip("spacr_accel_core.dask")


@pytest.mark.parametrize("chunks", [1, 7, 250, 1000])
def test_attribution_of_chunked_reads_is_the_whole_answer(chunks: int) -> None:
    rng = np.random.default_rng(chunks)
    peaks, centroids, areas = rng.uniform(0, 300, (1000, 2)), rng.uniform(0, 300, (90, 2)), rng.uniform(0, 300, 90)
    owner, ambiguous = sad.attribute_reads(da.from_array(peaks, chunks=(chunks, 1)), centroids, areas, tie=2.0)
    expected = ops.attribute_reads(peaks, centroids, areas, tie=2.0)
    assert owner.dtype == np.int64 and ambiguous.dtype == bool
    assert owner.chunks[0] == da.from_array(peaks, chunks=(chunks, 1)).chunks[0]
    np.testing.assert_array_equal(owner.compute(), expected[0])
    np.testing.assert_array_equal(ambiguous.compute(), expected[1])


@pytest.mark.parametrize("chunks", [(1, 1, 10, 1), (2, 3, 40, 2), (5, 3, 40, 2)])
def test_counts_of_chunked_sets_are_the_whole_answer(chunks: tuple[int, ...]) -> None:
    rng = np.random.default_rng(3)
    moved, target = rng.uniform(0, 300, (5, 3, 40, 2)), rng.uniform(0, 300, (60, 2))
    got = sad.count_within(da.from_array(moved, chunks=chunks), target, 15.0)
    assert got.shape == (5, 3) and got.dtype == np.int64
    np.testing.assert_array_equal(got.compute(), ops.count_within(moved, target, 15.0))
    one = sad.count_within(da.from_array(moved[0, 0], chunks=(7, 1)), target, 15.0)
    assert one.shape == () and int(one.compute()) == int(ops.count_within(moved[0, 0], target, 15.0))


def test_bad_input_is_refused_before_the_graph_runs() -> None:
    with pytest.raises(ValueError, match="peaks must be"):
        sad.attribute_reads(da.zeros((4, 3)), np.zeros((1, 2)), [1.0])
    with pytest.raises(ValueError, match="footprint"):
        sad.attribute_reads(da.zeros((4, 2)), np.zeros((1, 2)), [1.0], footprint=-2)
    with pytest.raises(ValueError, match="radius"):
        sad.count_within(da.zeros((4, 2)), np.zeros((1, 2)), -1.0)
