"""The torch backend serves every argument of the science calls itself, each forced call served by
torch with no decline; the report names the device with or without its index, and passes take a
fraction of the reported free memory; read-only inputs raise no warning."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from spacr_accel_core import last_dispatch, ops, reference
from spacr_accel_core.accelerator import DeviceMemory
from spacr_accel_core.testing import reference_maximum_filter
from spacr_accel_torch import _room, _runtime

CPU = _runtime.Device(torch.device("cpu"), True)


@dataclass(frozen=True)
class _Card(_runtime.Device):
    """The CPU posing as a card: passes sized from device memory, not from the host's caches."""

    @property
    def is_cpu(self) -> bool:
        return False


CARD = _Card(torch.device("cpu"), True)


def test_every_argument_is_served_by_torch_with_no_decline() -> None:
    rng = np.random.default_rng(4)
    points = rng.integers(0, 20, (300, 2)).astype(np.float32)
    bits = rng.integers(0, 256, (200, 32), dtype=np.uint8)
    stack = rng.integers(0, 4, (2, 3, 24, 20)).astype(np.float32)
    calls = [
        (lambda: ops.nearest_neighbours(points, points[::-1], k=4, backend="torch", gpu=False),
         reference.k_nearest(points, points[::-1], 4)),
        (lambda: ops.nearest_neighbours(points, points[::3], max_distance=1.5, backend="torch", gpu=False),
         tuple(part[:, 0] for part in reference.k_nearest(points, points[::3], 1, 1.5))),
        (lambda: ops.nearest_neighbours(bits, bits[::-1], k=2, metric="hamming", max_distance=120,
                                        backend="torch", gpu=False),
         reference.hamming_nearest(bits, bits[::-1], 2, 120)),
        (lambda: ops.mutual_nearest_neighbours(bits, bits[::2], metric="hamming", backend="torch", gpu=False),
         reference.mutual_nearest(bits, bits[::2], metric="hamming")),
        (lambda: ops.local_maxima(stack, 5, threshold=1.0, backend="torch", gpu=False),
         reference.local_maxima(stack, 5, 1.0)),
    ]
    for run, expected in calls:
        got = run()
        dispatch = last_dispatch()
        assert dispatch is not None and dispatch.backend == "torch" and dispatch.declined == (), dispatch
        for part, want in zip(got if isinstance(got, tuple) else (got,),
                              expected if isinstance(expected, tuple) else (expected,), strict=True):
            np.testing.assert_array_equal(part, want)
    filtered = ops.maximum_filter(stack, 5, backend="torch", gpu=False)
    dispatch = last_dispatch()
    assert dispatch is not None and dispatch.backend == "torch" and dispatch.declined == ()
    flat = stack.reshape(-1, 24, 20)
    for number, plane in enumerate(filtered.reshape(flat.shape)):
        assert np.array_equal(plane, reference_maximum_filter(flat[number], 5))


# ---- tiles sized from the device's reported memory -----------------------------------------------


def test_the_report_names_the_device_with_or_without_its_index(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = (DeviceMemory("cuda:0", "card A", 8 << 30, 16 << 30), DeviceMemory("cuda:1", "card B", 2 << 30, None))
    monkeypatch.setattr("spacr_accel_core.toolkit.memory", lambda: rows)
    assert _room.reported_free("cuda") == 8 << 30
    assert _room.reported_free("cuda:1") == 2 << 30
    assert _room.reported_free("xpu:0") is None


def test_passes_take_a_fraction_of_the_reported_free_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where torch's own query cannot say, the accelerator's report sizes the pass: 0.4 of it."""
    monkeypatch.delenv("SPACR_ACCEL_TORCH_PASS_BYTES", raising=False)
    monkeypatch.setattr(_runtime, "free_bytes", lambda device: None)
    monkeypatch.setattr("spacr_accel_core.toolkit.memory",
                        lambda: (DeviceMemory("cpu", "stand-in card", 100 << 20, 200 << 20),))
    assert _runtime.budget(CARD) == int(0.4 * (100 << 20))
    monkeypatch.setattr("spacr_accel_core.toolkit.memory", lambda: ())
    assert _runtime.budget(CARD) == 1 << 30  # nobody can say: the fixed gigabyte


def test_read_only_inputs_raise_no_warning() -> None:
    """The core hands plugins read-only arrays; torch warns when one is shared, so none is."""
    import warnings

    rng = np.random.default_rng(13)
    points = rng.uniform(0, 100, (500, 2)).astype(np.float32)
    bits = rng.integers(0, 256, (100, 32), dtype=np.uint8)
    stack = rng.integers(0, 4, (2, 20, 20)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ops.nearest_neighbours(points, points[::-1], k=3, max_distance=5.0, backend="torch", gpu=False)
        ops.nearest_neighbours(bits, bits[::-1], k=2, metric="hamming", backend="torch", gpu=False)
        ops.local_maxima(stack, 3, backend="torch", gpu=False)
        ops.maximum_filter(stack, 3, backend="torch", gpu=False)
