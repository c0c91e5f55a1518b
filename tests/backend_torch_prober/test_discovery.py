"""The torch backend's discovery (``spacr_accel_backend_info``) only DETECTS: it runs on the first
``ops.*`` call of a process, ``gpu=False`` included, and an allocation there would take a CUDA
context on a shared card. The measuring is ``resolve()``'s, when a primitive first runs."""

from __future__ import annotations

import os
import sys
import types
from typing import Any

import numpy as np
import pytest

import spacr_accel_core
from spacr_accel_core import accelerator, ops
from spacr_accel_torch import _plugin, _probe


def no_allocations(torch: types.SimpleNamespace) -> types.SimpleNamespace:
    """Every tensor constructor of the stand-in fails the test."""
    for name in ("zeros", "empty", "ones", "tensor", "full", "zeros_like", "empty_like", "as_tensor"):
        def refuse(*args: Any, _name: str = name, **kwargs: Any) -> Any:
            pytest.fail(f"torch.{_name} was called during discovery")

        setattr(torch, name, refuse)
    return torch


def with_a_card(stand_in: Any, **extra: Any) -> types.SimpleNamespace:
    cuda = stand_in.Cuda(names=["NVIDIA H200"], forbid_names=True)
    return no_allocations(stand_in.torch(cuda=cuda, allocations=True, **extra))


def test_backend_info_allocates_nothing_on_the_card(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_probe, "_import_torch", lambda: with_a_card(stand_in))
    info = _plugin.spacr_accel_backend_info()
    assert info.usable and "cuda:0" in info.note


def test_a_gpu_false_call_allocates_nothing(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: the first call of a process builds the registry, which asks backend_info."""
    monkeypatch.setattr(_probe, "_import_torch", lambda: with_a_card(stand_in))
    spacr_accel_core.refresh()
    got = ops.maximum_filter(np.eye(4, dtype=np.float32), 3, gpu=False)
    assert got[0].tolist() == [1, 1, 1, 0]
    assert "torch" in ops.accelerated_backends()  # it was detected, and still nothing allocated


def test_resolve_is_where_the_measuring_happens(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = stand_in.torch(cuda=stand_in.Cuda(names=["Tesla V100"]), allocations=True)
    made: list[tuple[Any, str]] = []

    def zeros(size: int, *, dtype: Any, device: str) -> list[float]:
        made.append((dtype, device))
        return [0.0] * size

    torch.zeros = zeros
    monkeypatch.setattr(_probe, "_import_torch", lambda: torch)
    spacr_accel_core.refresh()
    assert "torch" in ops.accelerated_backends()  # discovery: detection only
    assert made == []
    found = accelerator.resolve(refresh=True)
    assert found.float64 and made == [("float64", "cuda:0"), ("bfloat16", "cuda:0")]


def test_detection_with_spacr_device_allocates_nothing(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACR_DEVICE", "xpu:1")
    torch = no_allocations(stand_in.torch(xpu=stand_in.Xpu(names=["Arc A380", "Arc A770"], forbid_names=True),
                                          allocations=True))
    monkeypatch.setattr(_probe, "_import_torch", lambda: torch)
    info = _plugin.spacr_accel_backend_info()
    assert info.usable and "xpu:1" in info.note


def test_detection_leaves_no_fallback_flag_where_metal_is_not_usable(stand_in: Any, on_host: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    on_host("Darwin", "x86_64", "13.6", gpu="Intel Iris Plus Graphics")
    torch = no_allocations(stand_in.torch(mps=stand_in.Mps(available=False), allocations=True))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    seen: list[str | None] = []

    def load() -> Any:
        seen.append(os.environ.get(_probe.FALLBACK_ENV))
        return torch

    monkeypatch.setattr(_probe, "_load_torch", load)
    info = _plugin.spacr_accel_backend_info()
    assert not info.usable
    assert seen == ["1"]  # preset before the import, as torch reads it only then
    assert _probe.FALLBACK_ENV not in os.environ  # and taken back: Metal is not usable here


def test_detection_does_not_set_the_flag_for_workers(stand_in: Any, on_host: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Torch imported by someone else without the flag: only ``resolve()`` (selecting Metal)
    sets it for worker processes; detection leaves the environment alone."""
    on_host("Darwin", "arm64", "14.4")
    torch = no_allocations(stand_in.torch(mps=stand_in.Mps(), allocations=True))
    monkeypatch.setitem(sys.modules, "torch", torch)
    info = _plugin.spacr_accel_backend_info()
    assert info.usable and "mps" in info.note
    assert _probe.FALLBACK_ENV not in os.environ


# ---- a full card is not a missing dtype ------------------------------------------------------------


@pytest.mark.parametrize("full", [
    RuntimeError("CUDA out of memory. Tried to allocate 2.00 MiB (GPU 0; 79.11 GiB total capacity)"),
    RuntimeError("XPU out of memory, please use `empty_cache` to release all unoccupied cached memory."),
    MemoryError(),
])
def test_out_of_memory_while_measuring_keeps_the_declared_dtypes(stand_in: Any, full: BaseException) -> None:
    torch = stand_in.torch(allocations=True)

    def zeros(*args: Any, **kwargs: Any) -> Any:
        raise full

    torch.zeros = zeros
    declared = accelerator.Accelerator(kind="cuda", device="cuda:0", label="x", float64=True, bfloat16=True)
    measured = _probe._measure_dtypes(torch, declared)
    assert (measured.float64, measured.bfloat16) == (True, True)


def test_torch_out_of_memory_error_by_class_keeps_the_declared_dtypes(stand_in: Any) -> None:
    class OutOfMemoryError(RuntimeError):
        """torch.OutOfMemoryError, with a message that does not say so."""

    torch = stand_in.torch(allocations=True)
    torch.OutOfMemoryError = OutOfMemoryError

    def zeros(*args: Any, **kwargs: Any) -> Any:
        raise OutOfMemoryError("allocation refused")

    torch.zeros = zeros
    declared = accelerator.Accelerator(kind="xpu", device="xpu:0", label="x", float64=True, bfloat16=False)
    measured = _probe._measure_dtypes(torch, declared)
    assert (measured.float64, measured.bfloat16) == (True, False)

    def refuses(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Required aspect fp64 is not supported")

    torch.zeros = refuses
    assert _probe._measure_dtypes(torch, declared).float64 is False  # a real refusal still counts
