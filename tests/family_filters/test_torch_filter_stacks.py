"""The torch backend's stack filter on a card whose reported free memory cannot hold the stack:
it is filtered in several passes, each within the room, exactly."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from spacr_accel_core.accelerator import DeviceMemory
from spacr_accel_core.testing import reference_maximum_filter
from spacr_accel_torch import _filters_kernels, _runtime

CPU = _runtime.Device(torch.device("cpu"), True)


@dataclass(frozen=True)
class _Card(_runtime.Device):
    """The CPU posing as a card: passes sized from device memory, not from the host's caches."""

    @property
    def is_cpu(self) -> bool:
        return False


CARD = _Card(torch.device("cpu"), True)


def test_a_stack_larger_than_the_reported_room_runs_in_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """A card reporting 3 MiB free: the (11, 4, 96, 96) stack is filtered in several passes, exactly."""
    monkeypatch.delenv("SPACR_ACCEL_TORCH_PASS_BYTES", raising=False)
    monkeypatch.setattr(_runtime, "free_bytes", lambda device: None)
    monkeypatch.setattr("spacr_accel_core.toolkit.memory",
                        lambda: (DeviceMemory("cpu", "stand-in card", 3 << 20, 3 << 20),))
    pools: list[int] = []
    original = _filters_kernels._pool_fields

    def counted(tiles: torch.Tensor, sizes: tuple[int, int]) -> torch.Tensor:
        pools.append(tiles.shape[1])
        return original(tiles, sizes)

    monkeypatch.setattr(_filters_kernels, "_pool_fields", counted)
    field = np.random.default_rng(5).standard_normal((11, 4, 96, 96)).astype(np.float32)
    got = _filters_kernels.maximum_filter_stack(field, 5, CARD)
    assert len(pools) > 1 and max(pools) < 96  # in pieces, each within the room
    flat = field.reshape(-1, 96, 96)
    for number, plane in enumerate(got.reshape(flat.shape)):
        assert np.array_equal(plane, reference_maximum_filter(flat[number], 5))
