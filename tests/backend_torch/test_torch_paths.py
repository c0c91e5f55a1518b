"""The torch backend's paths that are no one family's: a device's errors translated (a bug stays a
bug), ``backend_info`` telling the truth about this machine, ``gpu=False`` running a forced torch
on the CPU, the pass budget measured from free device memory, the imports that pull in no vendor
library, and on a card, small passes that stay exact."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import spacr_accel_core
from spacr_accel_core import BackendOutOfMemory, BackendUnavailable, ops
from spacr_accel_core.accelerator import Accelerator
from spacr_accel_core.testing import reference_maximum_filter, reference_nearest
from spacr_accel_torch import _filters_kernels, _nodes, _plugin, _probe, _runtime

CPU = _runtime.Device(torch.device("cpu"), True)


def on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run forced torch calls on the CPU device even on a GPU machine, so a failure injected into
    the CPU algorithm is the one the call meets."""
    monkeypatch.setattr(_runtime, "target", lambda: CPU)


def the_machine_has_a_gpu() -> bool:
    from spacr_accel_core.accelerator import resolve

    return resolve().is_gpu


def oom(message: str = "CUDA out of memory. Tried to allocate 2.00 GiB") -> torch.OutOfMemoryError:
    return torch.OutOfMemoryError(message)


# ---- errors and the mid-plate fall-through ---------------------------------------------------------


def test_device_errors_become_backend_unavailable_and_bugs_stay_bugs() -> None:
    driver = RuntimeError("CUDA error: an illegal memory access was encountered")
    assert isinstance(_runtime.translate(driver, "matmul"), BackendUnavailable)
    assert isinstance(_runtime.translate(oom(), "matmul"), BackendOutOfMemory)
    assert isinstance(_runtime.translate(RuntimeError("MPS backend out of memory"), "x"), BackendOutOfMemory)
    metal = TypeError("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64")
    assert isinstance(_runtime.translate(metal, "x"), BackendUnavailable)
    bug = RuntimeError("The size of tensor a (3) must match the size of tensor b (4)")
    assert _runtime.translate(bug, "x") is bug


def test_a_forced_call_raises_the_translated_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def gone(*_: object) -> None:
        raise RuntimeError("CUDA error: unspecified launch failure")

    on_the_cpu(monkeypatch)
    monkeypatch.setattr(_filters_kernels, "_cpu_stripe", gone)
    with pytest.raises(BackendUnavailable, match="the device failed"):
        ops.maximum_filter(np.ones((20, 20)), 3, backend="torch")


# ---- backend_info and discovery ------------------------------------------------------------------


def test_backend_info_tells_the_truth_about_this_machine() -> None:
    info = _plugin.spacr_accel_backend_info()
    declared = _plugin.SPACR_ACCEL_PLUGIN
    assert (declared.name, declared.priority, declared.accelerated) == ("torch", 300.0, True)
    assert ops.accelerated_backends()[-1] == "numpy"
    if the_machine_has_a_gpu():
        assert info.usable and ops.accelerated_backends()[0] == "torch"
    else:
        assert not info.usable and "CPU" in info.note
        assert "torch" not in ops.accelerated_backends()


def test_backend_info_offers_torch_where_the_prober_finds_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    card = Accelerator(kind="cuda", device="cuda:0", label="NVIDIA H200 (CUDA)", name="NVIDIA H200")
    monkeypatch.setattr(_nodes, "_no_device_node", lambda: None)
    monkeypatch.setattr(_probe, "detect", lambda **_: card)
    info = _plugin.spacr_accel_backend_info()
    assert info.usable and "cuda:0" in info.note
    monkeypatch.setenv("SPACR_DEVICE", "cpu")
    info = _plugin.spacr_accel_backend_info()
    assert not info.usable and "SPACR_DEVICE" in info.note


def test_backend_info_survives_a_prober_that_raises_or_hangs(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(**_: object) -> None:
        raise BackendUnavailable("torch is not importable")

    monkeypatch.setattr(_nodes, "_no_device_node", lambda: None)
    monkeypatch.setattr(_probe, "detect", broken)
    info = _plugin.spacr_accel_backend_info()
    assert not info.usable and "not importable" in info.note
    monkeypatch.setattr(_probe, "detect", lambda **_: time.sleep(5))
    monkeypatch.setenv("SPACR_ACCEL_PROBE_TIMEOUT", "0.1")
    info = _plugin.spacr_accel_backend_info()
    assert not info.usable and "did not answer" in info.note


def test_gpu_false_runs_a_forced_torch_on_the_cpu() -> None:
    """spaCR runs torch on the CPU with ``backend="torch", gpu=False`` when the card is busy."""

    got = ops.matmul(np.ones((2, 2)), np.ones((2, 2)), gpu=False, backend="torch")
    np.testing.assert_array_equal(got, np.full((2, 2), 2.0, np.float32))
    assert spacr_accel_core.last_dispatch().backend == "torch"


def test_pass_budget_is_measured_from_free_device_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    card = _runtime.Device(torch.device("cuda", 0), True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (10 << 30, 80 << 30))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 3 << 30)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 1 << 30)
    assert _runtime.budget(card) == int((12 << 30) * 0.4)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (1 << 20, 80 << 30))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 0)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 0)
    assert _runtime.budget(card) == 1 << 20  # a nearly full card still gets a minimal pass


def test_importing_the_ops_and_the_plugins_imports_no_vendor_library() -> None:
    code = ("import sys, spacr_accel_core.ops, spacr_accel_torch._plugin, spacr_accel_cupy._plugin; "
            "print(sorted(m for m in ('torch', 'cupy') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# ---- on a card -----------------------------------------------------------------------------------


@pytest.mark.skipif(not the_machine_has_a_gpu(), reason="needs a GPU torch can drive (none resolved here)")
def test_on_the_card_small_passes_stay_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    device = _runtime.target()
    assert not device.is_cpu and _runtime.budget(device) > 1 << 20  # measured from free memory
    monkeypatch.setenv("SPACR_ACCEL_TORCH_PASS_BYTES", str(1 << 16))
    rng = np.random.default_rng(12)
    field = rng.standard_normal((300, 257)).astype(np.float32)
    field[100, 100] = np.nan
    assert np.array_equal(ops.maximum_filter(field, 15, backend="torch"), reference_maximum_filter(field, 15),
                          equal_nan=True)
    source = np.round(rng.uniform(0, 30, (2000, 3))).astype(np.float32)
    target = np.round(rng.uniform(0, 30, (1500, 3))).astype(np.float32)
    got = ops.nearest_neighbours(source, target, backend="torch", chunk=97)
    expected = reference_nearest(source, target)
    assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
