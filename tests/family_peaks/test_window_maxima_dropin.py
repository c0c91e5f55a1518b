"""``ops.window_maxima`` as a drop-in for spaCR's base extraction, on the edges: windows clipped at
the field's edges, repeated points in their order, any dtype read as float32, a maximum of zero
positive, and the points spaCR would read past the field refused.

Each edge is checked on the backends forced by name, on automatic dispatch, and on torch forced
onto the CPU, against :func:`spacr_bases`, spaCR's base extraction restated here independently
(the window clipped to the field, never padded)."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest

from spacr_accel_core import ops

Run = tuple[str | None, bool]
HAVE_TORCH = importlib.util.find_spec("torch") is not None
EVERY: list[Run] = [("numpy", True), ("numba", True), (None, True)] + ([("torch", False)] if HAVE_TORCH else [])
"""Each backend forced by name, automatic dispatch, and torch forced onto the CPU (``gpu=False``)."""
RUNS = [pytest.param(run, id=str(run[0] or "automatic")) for run in EVERY]
RNG = np.random.default_rng(17)


# ---- base extraction -----------------------------------------------------------------------------


def spacr_bases(stack: np.ndarray, peaks: Any, radius: int) -> np.ndarray:
    """spaCR's base extraction, restated: ``(N, cycles, channels)`` float32, each read's maximum over
    the ``2 * radius + 1`` square around it, cut off at the field's edges (never padded)."""
    data = np.asarray(stack, dtype=np.float32)
    height, width = data.shape[-2:]
    rows = np.asarray(peaks, dtype=np.int64).reshape(-1, 2)
    out = np.zeros((rows.shape[0], *data.shape[:2]), np.float32)
    for index, (y, x) in enumerate(rows):
        down = slice(max(y - radius, 0), min(y + radius + 1, height))
        across = slice(max(x - radius, 0), min(x + radius + 1, width))
        out[index] = data[..., down, across].max(axis=(-2, -1))
    return out


def bases(run: Run, stack: np.ndarray, points: Any, radius: int) -> np.ndarray:
    """Ours, with spaCR's half-width ``radius`` as the window edge ``2 * radius + 1``."""
    backend, gpu = run
    return ops.window_maxima(stack, points, 2 * radius + 1, backend=backend, gpu=gpu)


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("shape", [(2, 3, 7, 9), (1, 4, 1, 12), (3, 2, 12, 1), (1, 1, 1, 1), (2, 2, 5, 5)])
@pytest.mark.parametrize("radius", [0, 1, 2, 7, 100])
def test_a_window_at_the_edge_is_clipped_as_spacrs(run: Run, shape: tuple[int, ...], radius: int) -> None:
    """Corners, edges and the centre, windows from one pixel to wider than the field: spaCR cuts the
    window at the edge, which for a maximum is the filter's repeated border. The layout is spaCR's
    ``(N, cycles, channels)`` float32, bit for bit (NaN and infinities included)."""
    stack = (RNG.random(shape) * 100 - 50).astype(np.float32)
    stack.flat[::7] = np.nan
    stack.flat[3::11] = np.inf
    height, width = shape[-2:]
    points = [(0, 0), (0, width - 1), (height - 1, 0), (height - 1, width - 1), (height // 2, width // 2)]
    got = bases(run, stack, points, radius)
    want = spacr_bases(stack, points, radius)
    assert got.dtype == np.float32 and got.shape == (len(points), *shape[:2])
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("dtype", [np.float64, np.uint16, np.uint8, np.int16, np.int64, np.bool_])
def test_repeated_points_keep_their_order_and_any_dtype_reads_as_float32(run: Run, dtype: type) -> None:
    stack = (RNG.random((2, 4, 9, 8)) * (2**25 if dtype in (np.float64, np.int64) else 200)).astype(dtype)
    points = RNG.integers(0, (9, 8), size=(30, 2))
    points = np.concatenate([points, points[:4], points[::-1]])
    np.testing.assert_array_equal(bases(run, stack, points, 1), spacr_bases(stack, points, 1))
    assert bases(run, stack, np.empty((0, 2), np.int64), 1).shape == (0, 2, 4)


@pytest.mark.parametrize("run", RUNS)
def test_a_maximum_of_zero_is_positive_zero(run: Run) -> None:
    """Deliberate: spaCR's ``max`` over a window of ``-0.0`` keeps ``-0.0``; here a maximum of zero is
    ``+0.0`` on every backend (equal as a value, the same bits everywhere)."""
    stack = np.full((1, 2, 4, 4), -0.0, np.float32)
    stack[0, 1, 1, 1] = 0.0
    want = spacr_bases(stack, [(0, 0), (3, 3)], 1)
    assert np.signbit(want).any()
    got = bases(run, stack, [(0, 0), (3, 3)], 1)
    np.testing.assert_array_equal(got, want)
    assert not np.signbit(got).any()


@pytest.mark.parametrize(("points", "words"), [
    ([[6, 0]], "outside the 6 x 7 field"),    # spaCR reads the clipped window's last row
    ([[-1, 3]], "outside the 6 x 7 field"),   # spaCR reads row 0, columns 2 to 4
    ([[1.7, 2.2]], "whole pixel coordinates"),  # spaCR truncates to (1, 2)
    ([1, 2], r"\(N, 2\)"),                    # spaCR reads one point (1, 2)
    ([[True, False]], "integer pixel coordinates"),  # spaCR reads (1, 0)
])
def test_points_spacr_would_read_are_refused(points: Any, words: str) -> None:
    """Deliberate: spaCR reads a point up to ``radius`` outside the field (its window cut to the part
    inside), truncates a fractional one, and reshapes a flat pair into one point; a read that is
    not a pixel of the field is refused here, naming ``points``."""
    stack = RNG.random((2, 2, 6, 7)).astype(np.float32)
    assert spacr_bases(stack, points, 1).shape == (1, 2, 2)
    for run in EVERY:
        with pytest.raises(ValueError, match=words) as raised:
            bases(run, stack, points, 1)
        assert "points" in str(raised.value)
