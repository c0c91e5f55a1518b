"""spacr_accel_core.dask.translate and .spot_score: bit-identical to ops on the whole stack for every
chunking (fields split between blocks with their own shifts; the score's rows and columns split,
down to blocks of one pixel), and the same refusals."""

from __future__ import annotations

import numpy as np
import pytest

from spacr_accel_core import ops

da = pytest.importorskip("dask.array")
sad = pytest.importorskip("spacr_accel_core.dask")


@pytest.mark.parametrize("chunks", [(1, 1, 4, 4), (2, 2, -1, -1), (3, 1, 7, 2)])
def test_translate_per_field_shifts_follow_the_blocks(chunks: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    stack = rng.integers(0, 4000, size=(3, 2, 9, 11)).astype(np.uint16)
    for shifts in (rng.integers(-12, 12, size=(3, 2, 2)), rng.integers(-5, 5, size=(3, 1, 2)), (2, -3)):
        got = sad.translate(da.from_array(stack, chunks=chunks), shifts).compute()
        assert got.dtype == stack.dtype
        assert got.tobytes() == ops.translate(stack, shifts).tobytes()


def test_translate_refuses_as_ops_does() -> None:
    stack = da.zeros((2, 4, 4), chunks=1)
    with pytest.raises(ValueError, match="fractional"):
        sad.translate(stack, (0.5, 0))
    with pytest.raises(ValueError, match="do not broadcast"):
        sad.translate(stack, np.zeros((3, 2)))


@pytest.mark.parametrize("chunks", [(-1, -1, 3, 4), (2, 1, 1, 1), (-1, -1, 5, 1)])
def test_the_score_is_the_whole_stacks_for_every_chunking(chunks: tuple[int, ...]) -> None:
    rng = np.random.default_rng(1)
    stack = (rng.standard_normal((11, 3, 5, 6)) * 10.0 ** rng.uniform(-3, 7, (11, 3, 5, 6))).astype(np.float32)
    stack[:, :, 2, 3] = np.array([1e8, *[1.0] * 8, -1e8, 5.0], np.float32)[:, None]  # order-sensitive pixel
    stack[4, 1, 0, 0] = np.nan
    for data in (stack, stack[:1]):
        got = sad.spot_score(da.from_array(data, chunks=chunks)).compute()
        assert got.tobytes() == ops.spot_score(data).tobytes()


def test_the_score_refuses_as_ops_does() -> None:
    with pytest.raises(ValueError, match=r"stack must be \(cycles, channels, Y, X\)"):
        sad.spot_score(da.zeros((2, 3, 4)))
