"""Window maxima on Dask equal the in-memory op for every chunking, with the whole field's points
(windows crossing block edges)."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import dask as sad
from spacr_accel_core import ops

QUICK = settings(max_examples=20, deadline=None)


@QUICK
@given(lead=st.sampled_from([(), (2,), (2, 3)]), height=st.integers(1, 17), width=st.integers(1, 17),
       size=st.integers(0, 7), seed=st.integers(0, 2 ** 32 - 1), data=st.data())
def test_window_maxima_matches_ops_for_every_chunking(lead: tuple[int, ...], height: int, width: int, size: int,
                                                      seed: int, data: st.DataObject) -> None:
    rng = np.random.default_rng(seed)
    stack = rng.choice(np.array([-1.0, -0.0, 0.0, 2.0, np.nan], np.float32), size=(*lead, height, width))
    points = np.stack([rng.integers(0, height, 9), rng.integers(0, width, 9)], axis=1)
    chunks = tuple(data.draw(st.integers(1, n)) for n in stack.shape)
    with dask.config.set(scheduler="threads"):
        got = sad.window_maxima(da.from_array(stack, chunks=chunks), points, size).compute()
    want = ops.window_maxima(stack, points, size)
    assert got.shape == want.shape and got.tobytes() == want.tobytes()
