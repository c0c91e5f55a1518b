"""Registration's finiteness and variation check reads big stacks in bands of rows shared between
threads: a NaN or an infinity in any band is found, and a field varies when any band varies."""

from __future__ import annotations

import numpy as np
import pytest

from spacr_accel_core import ops
from spacr_accel_core.operations._registration_fields import field_ranges, finite_and_in_range

# three fields of 200 x 480: 288,000 pixels, enough to be read in bands
SHAPE = (3, 200, 480)


@pytest.fixture(params=["1", "2"], ids=["one-thread", "two-threads"])
def threads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OMP_NUM_THREADS", request.param)
    return str(request.param)


@pytest.mark.parametrize("row", [0, 99, 100, 199])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_pixel_in_any_band_is_found(threads: str, row: int, bad: float) -> None:
    data = np.ones(SHAPE, dtype=np.float32)
    data[2, row, 479] = bad
    with pytest.raises(ValueError, match="second holds NaN or infinite pixels"):
        finite_and_in_range(np.zeros(SHAPE, dtype=np.float32), data)


@pytest.mark.parametrize("row", [0, 100, 199])
def test_a_field_varies_when_one_row_of_any_band_does(threads: str, row: int) -> None:
    data = np.full(SHAPE, 5.0)
    data[1, row, 7] = -0.5
    assert finite_and_in_range(data, data)[2].tolist() == [False, True, False]
    flipped = data[:, ::-1, ::-2]
    low, high = field_ranges(flipped)
    assert np.array_equal(low, flipped.min(axis=(-2, -1))) and np.array_equal(high, flipped.max(axis=(-2, -1)))


def test_a_broadcast_reference_is_read_as_one_field(threads: str) -> None:
    field = np.random.default_rng(3).normal(size=SHAPE[1:])
    stack = np.broadcast_to(field, (4, *SHAPE[1:]))
    low, high = field_ranges(stack[(slice(0, 1),)])
    assert low.shape == (1,) and low[0] == field.min() and high[0] == field.max()
    first, _, varies = finite_and_in_range(stack, stack)
    assert varies.shape == (4,) and varies.all()
    # handed on as it came: still one field under a stride-0 axis, never 4 copies of it
    assert first.strides[0] == 0 and np.shares_memory(first, field)
    dead = field.copy()
    dead[-1, -1] = np.nan
    with pytest.raises(ValueError, match="first holds NaN"):
        finite_and_in_range(np.broadcast_to(dead, stack.shape), stack)


def test_a_constant_field_in_a_big_stack_is_refused_not_raised(threads: str) -> None:
    rng = np.random.default_rng(4)
    first = rng.normal(size=SHAPE).astype(np.float32)
    second = np.roll(first, (3, -5), axis=(-2, -1))
    second[1] = 7.0
    found = ops.phase_correlate(first, second, backend="numpy")
    assert found.accepted.tolist() == [True, False, True]
    assert found.peak_ratio[1] == 0.0
    assert (found.dy[0], found.dx[0]) == (-3, 5)


def test_a_broadcast_reference_out_of_range_is_rescaled_once_and_stays_a_broadcast() -> None:
    """spaCR's reference cycle, broadcast against 11 cycles and far out of range, is rescaled per
    distinct field: the result is still a view of 4 fields, not 44 copies handed to the backend."""
    rng = np.random.default_rng(6)
    reference = rng.normal(size=(4, 16, 16)) * 1e-300
    cycles = rng.normal(size=(11, 4, 16, 16)) * 1e300
    first, second, varies = finite_and_in_range(np.broadcast_to(reference, cycles.shape), cycles)
    assert first.strides[0] == 0 and first.shape == cycles.shape
    magnitude = np.abs(first[0]).max(axis=(-2, -1))
    assert ((magnitude >= 0.5) & (magnitude < 1)).all()
    for field, given in zip(first[0], reference, strict=True):  # each field times one exact power of two
        factor = np.unique(field / given)
        assert factor.size == 1 and np.frexp(factor)[0][0] == 0.5
    assert np.abs(second).max() < 1 and varies.all() and varies.shape == (44,)
