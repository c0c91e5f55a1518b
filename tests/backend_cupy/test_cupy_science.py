"""The CuPy backend serves every argument of the science calls itself: forced calls with the kit
standing in for the card show the backend serves each argument with no decline; the report is
read for the current device, and tiles are sized from a stand-in memory report where CuPy's own
query cannot say."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from spacr_accel_core import last_dispatch, ops, reference
from spacr_accel_core.accelerator import DeviceMemory
from spacr_accel_core.testing import reference_maximum_filter
from spacr_accel_cupy import _filters_kernels, _kit, _room, _runtime

KIT = _kit.numpy_kit()


def test_every_argument_is_served_by_cupy_with_no_decline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kit standing in for the card: each forced call reaches CuPy's code and is served there."""
    monkeypatch.setattr(_runtime, "cupy_kit", _kit.numpy_kit)
    rng = np.random.default_rng(4)
    points = rng.integers(0, 20, (300, 2)).astype(np.float32)
    bits = rng.integers(0, 256, (200, 32), dtype=np.uint8)
    stack = rng.integers(0, 4, (2, 3, 24, 20)).astype(np.float32)
    calls = [
        (lambda: ops.nearest_neighbours(points, points[::-1], k=4, backend="cupy"),
         reference.k_nearest(points, points[::-1], 4)),
        (lambda: ops.nearest_neighbours(points, points[::3], max_distance=1.5, backend="cupy"),
         tuple(part[:, 0] for part in reference.k_nearest(points, points[::3], 1, 1.5))),
        (lambda: ops.nearest_neighbours(bits, bits[::-1], k=2, metric="hamming", max_distance=120, backend="cupy"),
         reference.hamming_nearest(bits, bits[::-1], 2, 120)),
        (lambda: ops.mutual_nearest_neighbours(bits, bits[::2], metric="hamming", backend="cupy"),
         reference.mutual_nearest(bits, bits[::2], metric="hamming")),
        (lambda: ops.local_maxima(stack, 5, threshold=1.0, backend="cupy"),
         reference.local_maxima(stack, 5, 1.0)),
    ]
    for run, expected in calls:
        got = run()
        dispatch = last_dispatch()
        assert dispatch is not None and dispatch.backend == "cupy" and dispatch.declined == (), dispatch
        for part, want in zip(got if isinstance(got, tuple) else (got,),
                              expected if isinstance(expected, tuple) else (expected,), strict=True):
            np.testing.assert_array_equal(part, want)
    filtered = ops.maximum_filter(stack, 5, backend="cupy")
    dispatch = last_dispatch()
    assert dispatch is not None and dispatch.backend == "cupy" and dispatch.declined == ()
    flat = stack.reshape(-1, 24, 20)
    for number, plane in enumerate(filtered.reshape(flat.shape)):
        assert np.array_equal(plane, reference_maximum_filter(flat[number], 5))


# ---- tiles sized from the device's reported memory -----------------------------------------------


def test_the_report_is_read_for_the_current_device(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = (DeviceMemory("cuda:0", "card A", 8 << 30, 16 << 30), DeviceMemory("cuda:1", "card B", 2 << 30, None))
    monkeypatch.setattr("spacr_accel_core.toolkit.memory", lambda: rows)
    assert _room.reported_free(0) == 8 << 30
    assert _room.reported_free(1) == 2 << 30
    assert _room.reported_free(2) is None


def test_passes_take_a_fraction_of_the_reported_free_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """CuPy's query failing, the accelerator's report sizes the pass: 0.4 of the free memory, and a
    stack that does not fit that runs in pieces, exactly."""
    monkeypatch.delenv("SPACR_ACCEL_CUPY_PASS_BYTES", raising=False)
    monkeypatch.setattr("spacr_accel_core.toolkit.memory",
                        lambda: (DeviceMemory("cuda:0", "stand-in card", 3 << 20, 3 << 20),))
    moved: list[tuple[int, ...]] = []

    def to_device(array: np.ndarray) -> np.ndarray:
        moved.append(array.shape)
        return np.asarray(array)

    kit = replace(KIT, free_bytes=lambda: None, reported_free=lambda: _room.reported_free(0), to_device=to_device)
    assert kit.budget() == int(0.4 * (3 << 20))
    assert replace(kit, reported_free=lambda: None).budget() == 64 << 20  # nobody can say: the host's size
    field = np.random.default_rng(5).standard_normal((11, 4, 96, 96)).astype(np.float32)
    got = _filters_kernels.maximum_filter_stack(kit, field, 5)
    assert len(moved) > 1 and max(shape[1] for shape in moved) < 96
    flat = field.reshape(-1, 96, 96)
    for number, plane in enumerate(got.reshape(flat.shape)):
        assert np.array_equal(plane, reference_maximum_filter(flat[number], 5))
