"""The window maxima's inputs: every wrong call refused with the argument named, before any
backend; the answers the core gives itself (no points); the shapes of the answers, and the answer
as the filtered stack read at the points."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import last_dispatch, ops

STACK = np.arange(2 * 3 * 6 * 7, dtype=np.float32).reshape(2, 3, 6, 7)


@pytest.mark.parametrize(("points", "words"), [
    ([[6, 0]], "outside the 6 x 7 field"),
    ([[0, -1]], "outside the 6 x 7 field"),
    ([[0.5, 1]], "whole pixel coordinates"),
    ([[np.nan, 1]], "whole pixel coordinates"),
    ([[1, 2, 3]], r"\(N, 2\)"),
    ([1, 2], r"\(N, 2\)"),
    ([["a", "b"]], "integer pixel coordinates"),
    ([[True, False]], "integer pixel coordinates"),
])
def test_window_maxima_refuses_bad_points_naming_them(points: object, words: str) -> None:
    with pytest.raises(ValueError, match=f"points.*{words}|{words}.*") as raised:
        ops.window_maxima(STACK, points, 3)
    assert "points" in str(raised.value)


def test_window_maxima_refuses_a_bad_stack_and_size() -> None:
    with pytest.raises(ValueError, match="stack must be a 2-D array"):
        ops.window_maxima(np.ones(5), [[0, 0]], 3)
    with pytest.raises(ValueError, match="size must be a non-negative"):
        ops.window_maxima(STACK, [[0, 0]], -1)
    with pytest.raises(TypeError, match="must hold real numbers"):
        ops.window_maxima(np.array([["a"]]), [[0, 0]], 3)


def test_window_maxima_shapes_and_the_core_answers() -> None:
    assert ops.window_maxima(STACK[0, 0], [[1, 1], [5, 6]], 3).shape == (2,)
    assert ops.window_maxima(STACK, [[1, 1]], 3).shape == (1, 2, 3)
    empty = ops.window_maxima(STACK, np.empty((0, 2), np.int64), 3)
    assert empty.shape == (0, 2, 3) and empty.dtype == np.float32
    assert last_dispatch().backend == "core"
    assert ops.window_maxima(STACK, [], 3).shape == (0, 2, 3)
    # Even sizes are raised to odd, as maximum_filter's; a float holding a whole number is a size.
    np.testing.assert_array_equal(ops.window_maxima(STACK, [[2, 2]], 4), ops.window_maxima(STACK, [[2, 2]], 5.0))


@settings(max_examples=40, deadline=None)
@given(stack=hnp.arrays(np.float32, st.sampled_from([(9, 11), (2, 5, 4), (2, 2, 3, 8)]),
                        elements=st.sampled_from([0.0, -0.0, 1.0, 2.5, np.nan, -3.0])),
       size=st.integers(0, 9), seed=st.integers(0, 1000))
def test_window_maxima_is_the_filtered_stack_at_the_points(stack: np.ndarray, size: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    points = np.stack([rng.integers(0, stack.shape[-2], 7), rng.integers(0, stack.shape[-1], 7)], axis=1)
    want = np.moveaxis(ops.maximum_filter(stack, size)[..., points[:, 0], points[:, 1]], -1, 0)
    got = ops.window_maxima(stack, points, size)
    assert got.tobytes() == want.tobytes()  # bit for bit: NaN where a window holds one, +0.0
