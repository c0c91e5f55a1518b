"""``spacr_accel_core.dask.nearest_neighbours`` bit for bit with the in-memory op for every chunking
(threaded scheduler: the same graphs a cluster runs, computed here); a Dask target is one chunk,
and the in-memory target one key of the graph."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import dask as sad
from spacr_accel_core import ops

QUICK = settings(max_examples=20, deadline=None)


def identical(got: np.ndarray, want: np.ndarray) -> bool:
    return got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()


@st.composite
def point_sets(draw):
    n, m, width = draw(st.integers(0, 300)), draw(st.integers(0, 60)), draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    grid = draw(st.booleans())  # a coarse grid: many exact ties, the lowest index must win
    source = rng.integers(0, 4, (n, width)).astype(np.float64) if grid else rng.standard_normal((n, width))
    target = rng.integers(0, 4, (m, width)).astype(np.float64) if grid else rng.standard_normal((m, width))
    return source, target, draw(st.integers(1, max(1, n))), draw(st.integers(1, width)), draw(st.integers(1, 50))


@QUICK
@given(point_sets())
def test_nearest_neighbours_matches_ops(case):
    source, target, rows, cols, chunk = case
    lazy = sad.nearest_neighbours(da.from_array(source, chunks=(rows, cols)), target, chunk=chunk)
    index, distance = dask.compute(*lazy, scheduler="threads")
    want_index, want_distance = ops.nearest_neighbours(source, target)
    assert identical(index, want_index) and identical(distance, want_distance)


def test_a_dask_target_is_one_chunk_and_gives_the_same_answer():
    rng = np.random.default_rng(3)
    source, target = rng.standard_normal((200, 2)), rng.standard_normal((50, 2))
    lazy = sad.nearest_neighbours(da.from_array(source, chunks=30), da.from_array(target, chunks=7))
    index, distance = dask.compute(*lazy)
    want_index, want_distance = ops.nearest_neighbours(source, target)
    assert identical(index, want_index) and identical(distance, want_distance)


def test_the_in_memory_operand_is_one_key_of_the_graph():
    import pickle

    rng = np.random.default_rng(1)
    target = rng.standard_normal((5000, 2))
    source = da.random.default_rng(2).standard_normal((40000, 2), chunks=(1000, 2))
    index, _ = sad.nearest_neighbours(source, target)
    sizes = sorted(len(pickle.dumps(task)) for task in dict(index.__dask_graph__()).values())
    big = [s for s in sizes if s >= target.size * 4]
    assert len(big) == 1  # the float32 target, once
    assert max(s for s in sizes if s < target.size * 4) < 2048  # every block task: a few hundred bytes
