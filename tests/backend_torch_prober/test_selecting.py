"""The selecting path (``resolve()``: torch imported here, dtypes measured, Metal's flag set) and
``SPACR_DEVICE``."""

from __future__ import annotations

import os
import sys
import types
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spacr_accel_core import BackendUnavailable, accelerator
from spacr_accel_core.accelerator import KINDS, inspect_torch
from spacr_accel_torch import _probe


def allocating(torch: types.SimpleNamespace, refuse: dict[str, BaseException]) -> list[tuple[Any, str]]:
    """Give ``torch`` a ``zeros`` that refuses the named dtypes; returns the allocations made."""
    made: list[tuple[Any, str]] = []

    def zeros(size: int, *, dtype: Any, device: str) -> list[float]:
        made.append((dtype, device))
        if dtype in refuse:
            raise refuse[dtype]
        return [0.0] * size

    torch.zeros = zeros
    return made


def select(monkeypatch: pytest.MonkeyPatch, torch: Any) -> accelerator.Accelerator:
    """``resolve()`` end to end, with ``import torch`` answering the stand-in."""
    monkeypatch.setattr(_probe, "_import_torch", lambda: torch)
    return accelerator.resolve(refresh=True)


def test_resolve_measures_float64_and_bfloat16_on_the_device(stand_in: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    torch = stand_in.torch(cuda=stand_in.Cuda(names=["Tesla V100"]), allocations=True)
    made = allocating(torch, {"bfloat16": TypeError("BFloat16 is not supported")})
    found = select(monkeypatch, torch)
    assert (found.kind, found.name, found.float64, found.bfloat16) == ("cuda", "Tesla V100", True, False)
    # Measured once, by resolve(): the backend's discovery, which built the registry, only detects.
    assert made == [("float64", "cuda:0"), ("bfloat16", "cuda:0")]
    assert accelerator.supports_bfloat16() is False
    assert accelerator.cellpose_kwargs()["use_bfloat16"] is False


@pytest.mark.parametrize(("refusal", "expected"), [
    (TypeError("no"), False), (RuntimeError("no"), False), (ValueError("odd"), None), (None, True),
])
def test_measuring_one_dtype(stand_in: Any, refusal: BaseException | None, expected: bool | None) -> None:
    torch = stand_in.torch(allocations=True)
    allocating(torch, {"float64": refusal} if refusal is not None else {})
    declared = accelerator.Accelerator(kind="xpu", device="xpu:0", label="x", float64=False, bfloat16=False)
    measured = _probe._measure_dtypes(torch, declared)
    # None (an unexpected failure) leaves the declared value alone.
    assert measured.float64 is (declared.float64 if expected is None else expected)
    assert measured.bfloat16 is True


def test_a_torch_without_the_dtype_keeps_the_declared_answer(stand_in: Any) -> None:
    torch = stand_in.torch(allocations=True)
    del torch.bfloat16
    made = allocating(torch, {})
    declared = accelerator.Accelerator(kind="mps", device="mps", label="x", float64=False, bfloat16=False)
    assert _probe._measure_dtypes(torch, declared) == accelerator.Accelerator(
        kind="mps", device="mps", label="x", float64=True, bfloat16=False)
    assert made == [("float64", "mps")]


def test_the_cpu_is_never_measured(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    found = select(monkeypatch, stand_in.torch())  # its zeros() fails the test if called
    assert found.kind == "cpu"


def test_selecting_metal_sets_the_fallback_before_importing_torch(stand_in: Any, on_host: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    on_host("Darwin", "arm64", "14.4")
    torch = stand_in.torch(mps=stand_in.Mps(), allocations=True)
    allocating(torch, {"float64": TypeError("Cannot convert a MPS Tensor to float64 dtype")})
    seen: list[str | None] = []

    def load() -> Any:
        seen.append(os.environ.get(_probe.FALLBACK_ENV))
        monkeypatch.setitem(sys.modules, "torch", torch)  # what a real import leaves behind
        return torch

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(_probe, "_load_torch", load)
    found = accelerator.resolve(refresh=True)
    assert seen == ["1"]  # in the environment when torch registered the MPS backend
    assert (found.kind, found.fallback, found.float64, found.bfloat16) == ("mps", True, False, True)
    assert os.environ[_probe.FALLBACK_ENV] == "1"


def test_a_user_who_turned_the_fallback_off_is_obeyed(stand_in: Any, on_host: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    on_host("Darwin", "arm64", "14.4")
    monkeypatch.setenv(_probe.FALLBACK_ENV, "0")
    torch = stand_in.torch(mps=stand_in.Mps(), allocations=True)
    allocating(torch, {})
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    def load() -> Any:
        monkeypatch.setitem(sys.modules, "torch", torch)  # what a real import leaves behind
        return torch

    monkeypatch.setattr(_probe, "_load_torch", load)
    found = accelerator.resolve(refresh=True)
    assert not found.fallback
    assert os.environ[_probe.FALLBACK_ENV] == "1"  # for worker processes; too late for this one


def test_metal_selected_after_torch_was_imported_without_the_flag(stand_in: Any, on_host: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    on_host("Darwin", "arm64", "14.4")
    torch = stand_in.torch(mps=stand_in.Mps(), allocations=True)
    allocating(torch, {})
    monkeypatch.setitem(sys.modules, "torch", torch)  # someone else imported torch, flag unset
    found = accelerator.resolve(refresh=True)
    assert found.kind == "mps" and not found.fallback  # set now, it would change nothing here
    assert os.environ[_probe.FALLBACK_ENV] == "1"


def test_the_preset_flag_is_taken_back_when_metal_is_not_selected(stand_in: Any, on_host: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    on_host("Darwin", "x86_64", "13.6", gpu="Intel Iris Plus Graphics")
    torch = stand_in.torch(mps=stand_in.Mps(available=False))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(_probe, "_load_torch", lambda: torch)
    found = accelerator.resolve(refresh=True)
    assert (found.kind, found.usable) == ("mps", False)
    assert _probe.FALLBACK_ENV not in os.environ


def test_no_flag_is_preset_off_macos(monkeypatch: pytest.MonkeyPatch, stand_in: Any) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    seen: list[bool] = []

    def load() -> Any:
        seen.append(_probe.FALLBACK_ENV in os.environ)
        return stand_in.torch()

    monkeypatch.setattr(_probe, "_load_torch", load)
    assert _probe.spacr_accel_probe(None, True, True) is None
    assert seen == [False]


@pytest.mark.parametrize(("error", "words"), [
    (ModuleNotFoundError("No module named 'torch'", name="torch"), "PyTorch is not installed"),
    (ModuleNotFoundError("No module named 'typing_extensions'", name="typing_extensions"),
     "PyTorch could not be imported (ModuleNotFoundError: No module named 'typing_extensions')"),
    (OSError("libcudnn.so.9: cannot open shared object file"),
     "PyTorch could not be imported (OSError: libcudnn.so.9: cannot open shared object file)"),
    (SystemExit(1), "PyTorch could not be imported (SystemExit: 1)"),
])
def test_a_torch_that_will_not_import_is_a_note(monkeypatch: pytest.MonkeyPatch, on_host: Any,
                                                error: BaseException, words: str) -> None:
    on_host("Darwin", "arm64", "14.4")

    def load() -> Any:
        raise error

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(_probe, "_load_torch", load)
    with pytest.raises(BackendUnavailable, match=r"PyTorch"):
        _probe.spacr_accel_probe(None, True, True)
    assert _probe.FALLBACK_ENV not in os.environ  # the preset is undone
    found = accelerator.resolve(refresh=True)
    assert found.kind == "cpu"
    assert found.note == f"no accelerator found: {words}"


# ---- SPACR_DEVICE ------------------------------------------------------------------------------


def test_spacr_device_picks_the_second_card(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACR_DEVICE", "cuda:1")
    found = inspect_torch(stand_in.torch(cuda=stand_in.Cuda(names=["RTX 4090", "RTX A6000"])))
    assert (found.kind, found.device, found.name) == ("cuda", "cuda:1", "RTX A6000")


def test_spacr_device_on_rocm_names_rocm(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACR_DEVICE", "cuda")
    found = inspect_torch(stand_in.torch(cuda=stand_in.Cuda(names=["MI210"]), hip="6.0"))
    assert (found.kind, found.device) == ("rocm", "cuda:0")


def test_spacr_device_names_a_card_that_is_not_there(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACR_DEVICE", "cuda:3")
    found = inspect_torch(stand_in.torch(cuda=stand_in.Cuda(names=["a", "b"])))
    assert found.kind == "cpu"
    assert found.note == "SPACR_DEVICE=cuda:3: there is no cuda:3: torch sees 2 device(s)"


def test_spacr_device_forces_metal_over_cuda(stand_in: Any, on_host: Any,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    on_host("Darwin", "x86_64", "13.6", gpu="AMD Radeon Pro 5300")
    monkeypatch.setenv("SPACR_DEVICE", "MPS")
    found = inspect_torch(stand_in.torch(cuda=stand_in.Cuda(), mps=stand_in.Mps()))
    assert (found.kind, found.device) == ("mps", "mps")


def test_spacr_device_names_a_backend_torch_does_not_have(stand_in: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACR_DEVICE", "xpu")
    found = inspect_torch(stand_in.torch(cuda=stand_in.Cuda()))
    assert found.kind == "cpu"
    assert found.note == "SPACR_DEVICE=xpu: torch reports no such device here; running on the CPU"


def test_spacr_device_with_cuda_excluded(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACR_DEVICE", "cuda:0")
    found = inspect_torch(stand_in.torch(cuda=stand_in.Cuda(forbid_names=True)), include_cuda=False)
    assert found.kind == "cpu" and "skips" in found.note


@pytest.mark.parametrize("value", ["gpu", "cuda:x", "tpu", "cuda:-1", "metal"])
def test_an_invalid_spacr_device_is_the_cpu_with_a_note(stand_in: Any, monkeypatch: pytest.MonkeyPatch,
                                                        value: str) -> None:
    monkeypatch.setenv("SPACR_DEVICE", value)
    found = inspect_torch(stand_in.torch(cuda=stand_in.Cuda()))
    assert found.kind == "cpu"
    assert found.note.startswith(f"SPACR_DEVICE={value!r} names no device spacr-accel can drive")


def test_spacr_device_on_the_selecting_path_is_measured(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACR_DEVICE", "xpu:1")
    torch = stand_in.torch(xpu=stand_in.Xpu(names=["Arc A380", "Arc A770"]), allocations=True)
    made = allocating(torch, {"float64": RuntimeError("Required aspect fp64 is not supported")})
    found = select(monkeypatch, torch)
    assert (found.device, found.name, found.float64, found.bfloat16) == ("xpu:1", "Arc A770", False, True)
    assert made and {device for _, device in made} == {"xpu:1"}


@given(st.text(max_size=16))
def test_any_spacr_device_gives_a_well_formed_answer(value: str) -> None:
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(
        is_available=lambda: True, device_count=lambda: 2, get_device_name=lambda i: f"card {i}"))
    found = _probe._forced(torch, value, True, True)
    assert found.kind in KINDS
    assert found.usable
    assert found.kind == "cpu" or found.device.startswith("cuda:")
