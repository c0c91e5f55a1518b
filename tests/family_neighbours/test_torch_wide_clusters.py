"""Wide clustered points forced onto the torch backend (on the CPU here): the matrix product cannot
tell a tight cluster apart, hands it to the block search, and the block search's tiling of 59 and
more coordinates must neither overflow nor change the answer, which is the floor's bit for bit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from spacr_accel_core import last_dispatch, ops

torch = pytest.importorskip("torch")
from spacr_accel_torch import _neighbours_kernels  # noqa: E402  (after the importorskip above)


def _cluster_beside_outliers(width: int, count: int) -> np.ndarray:
    """A cluster float32 barely parts, every 37th point thrown far away: every cluster point is a
    candidate of every cluster source in the matrix product, so its passes go to the block search."""
    rng = np.random.default_rng(width)
    points = (1e4 + rng.normal(0, 1e-3, (count, width))).astype(np.float32)
    points[::37] = rng.normal(0, 1e4, (len(points[::37]), width))
    return points


@pytest.mark.parametrize("width", [59, 64, 97, 128])
def test_forced_torch_on_wide_clusters_is_the_floor_bit_for_bit(monkeypatch: pytest.MonkeyPatch,
                                                                 width: int) -> None:
    searched: list[int] = []
    real: Callable[..., Any] = _neighbours_kernels._block_search

    def counted(source: np.ndarray, *args: Any) -> Any:
        searched.append(source.shape[0])
        return real(source, *args)

    monkeypatch.setattr(_neighbours_kernels, "_block_search", counted)
    points = _cluster_beside_outliers(width, 700)
    target = np.ascontiguousarray(points[::-1])
    index, distance = ops.nearest_neighbours(points, target, backend="torch")
    served = last_dispatch()
    assert served is not None and served.backend == "torch"
    assert searched, "the block search did not run: the case no longer exercises the tiling"
    floor_index, floor_distance = ops.nearest_neighbours(points, target, backend="numpy")
    assert np.array_equal(index, floor_index)
    assert distance.tobytes() == floor_distance.tobytes()


@pytest.mark.parametrize("block", [1, 4, 64])
def test_the_tile_order_is_a_permutation_at_every_width_up_to_128(block: int) -> None:
    rng = np.random.default_rng(block)
    for width in range(1, 129):
        points = torch.from_numpy(rng.standard_normal((150, width)).astype(np.float32))
        order = _neighbours_kernels._tile_order(points, block)
        assert sorted(order.tolist()) == list(range(150)), width
