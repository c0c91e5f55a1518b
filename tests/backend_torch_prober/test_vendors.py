"""Every vendor path of the torch prober, driven through ``inspect_torch`` with stand-in modules."""

from __future__ import annotations

import os
import sys
import types
from typing import Any

import pytest

from spacr_accel_core import accelerator
from spacr_accel_core.accelerator import inspect_torch
from spacr_accel_core.dispatch._registry import REGISTRY
from spacr_accel_torch import _probe


def test_the_prober_is_registered_through_the_torch_entry_point() -> None:
    owners = [name for name, _ in REGISTRY.hookimpls("spacr_accel_probe")]
    assert "torch" in owners


def test_nvidia_cuda(stand_in: Any) -> None:
    found = inspect_torch(stand_in.torch(cuda=stand_in.Cuda()))
    assert (found.kind, found.device, found.name) == ("cuda", "cuda:0", "NVIDIA A100")
    assert found.label == "NVIDIA A100 (NVIDIA CUDA 12.1)"
    assert found.is_cuda and found.is_gpu and found.float64 and found.autocast and not found.fallback


def test_nvidia_cuda_without_names_queries_no_device_property(stand_in: Any) -> None:
    found = inspect_torch(stand_in.torch(cuda=stand_in.Cuda(forbid_names=True)), device_names=False)
    assert (found.kind, found.name, found.label) == ("cuda", "", "NVIDIA GPU (NVIDIA CUDA 12.1)")


def test_amd_rocm_is_never_called_cuda(stand_in: Any) -> None:
    torch = stand_in.torch(cuda=stand_in.Cuda(names=["AMD Instinct MI210"]), hip="6.0.32830")
    found = inspect_torch(torch)
    assert (found.kind, found.device, found.name) == ("rocm", "cuda:0", "AMD Instinct MI210")
    assert found.label == "AMD Instinct MI210 (AMD ROCm 6.0.32830)"
    assert "CUDA" not in found.label and "NVIDIA" not in found.label
    assert found.is_gpu and not found.is_cuda and found.float64 and found.autocast


def test_amd_rocm_without_names(stand_in: Any) -> None:
    torch = stand_in.torch(cuda=stand_in.Cuda(forbid_names=True), hip="6.0")
    found = inspect_torch(torch, device_names=False)
    assert (found.kind, found.name, found.label) == ("rocm", "", "AMD GPU (AMD ROCm 6.0)")


def test_a_torch_without_version_keeps_its_card(stand_in: Any) -> None:
    found = inspect_torch(stand_in.torch(cuda=stand_in.Cuda(), version=False))
    assert (found.kind, found.device, found.label) == ("cuda", "cuda:0", "NVIDIA A100 (CUDA)")
    assert found.is_gpu


def test_include_cuda_false_skips_cuda_and_rocm(stand_in: Any) -> None:
    cuda = stand_in.Cuda(forbid_names=True)
    assert inspect_torch(stand_in.torch(cuda=cuda), include_cuda=False).kind == "cpu"
    assert inspect_torch(stand_in.torch(cuda=cuda, hip="6.0"), include_cuda=False).kind == "cpu"
    both = stand_in.torch(cuda=cuda, xpu=stand_in.Xpu(names=["Intel Arc A770"]))
    assert inspect_torch(both, include_cuda=False).kind == "xpu"


def test_apple_metal_on_apple_silicon(stand_in: Any, on_host: Any) -> None:
    on_host("Darwin", "arm64", "14.4", gpu="Apple M2 Pro")
    found = inspect_torch(stand_in.torch(mps=stand_in.Mps()))
    assert (found.kind, found.device, found.name) == ("mps", "mps", "Apple M2 Pro")
    assert found.label == "Apple M2 Pro (Apple Metal)"
    assert found.is_gpu and not found.is_cuda
    assert (found.float64, found.autocast) == (False, False)
    assert found.bfloat16  # declared: torch 2.5 on macOS 14
    assert not found.fallback  # the flag is not in the environment, so it is not in force
    assert _probe.FALLBACK_ENV not in os.environ  # and an inspection never sets it


def test_apple_metal_reports_the_fallback_only_when_it_is_set(stand_in: Any, on_host: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    on_host("Darwin", "arm64", "14.4")
    monkeypatch.setenv(_probe.FALLBACK_ENV, "1")
    assert inspect_torch(stand_in.torch(mps=stand_in.Mps())).fallback
    monkeypatch.setenv(_probe.FALLBACK_ENV, "0")
    assert not inspect_torch(stand_in.torch(mps=stand_in.Mps())).fallback


def test_apple_metal_on_an_intel_mac_with_a_radeon(stand_in: Any, on_host: Any) -> None:
    # torch 2.2.2 is the last x86-64 macOS wheel, and Metal had no bfloat16 before 2.3.
    on_host("Darwin", "x86_64", "13.6", gpu="AMD Radeon Pro 5300")
    found = inspect_torch(stand_in.torch(mps=stand_in.Mps(), release="2.2.2"))
    assert (found.kind, found.label) == ("mps", "AMD Radeon Pro 5300 (Apple Metal)")
    assert not found.bfloat16


def test_apple_metal_without_names(stand_in: Any, on_host: Any) -> None:
    on_host("Darwin", "arm64", "14.4")
    found = inspect_torch(stand_in.torch(mps=stand_in.Mps()), device_names=False)
    assert (found.kind, found.name, found.label) == ("mps", "", "Metal GPU (Apple Metal)")


def test_an_unavailable_metal_is_not_reported_off_macos(stand_in: Any) -> None:
    # Believing an available Metal on any host is tested in test_metal_off_macos.py.
    found = inspect_torch(stand_in.torch(mps=stand_in.Mps(available=False, built=True)))
    assert (found.kind, found.detected) == ("cpu", True) and "Metal" not in found.label


METAL_CASES = {
    "too old": (("arm64", "12.2", "Apple M1"), True, ["macOS 12.2 is older than 12.3", "upgrading macOS"]),
    "intel graphics": (("x86_64", "13.6", "Intel Iris Plus Graphics 655"), True,
                       ["Intel integrated graphics in an Intel Mac", "NOTHING TO INSTALL"]),
    "no device": (("arm64", "14.4", "Apple M2"), True, ["offers it no Metal device"]),
    "not built": (("arm64", "14.4", "Apple M2"), False, ["built without Metal (MPS) support"]),
}


@pytest.mark.parametrize("case", sorted(METAL_CASES))
def test_metal_found_but_unusable_explains_itself(stand_in: Any, on_host: Any, case: str) -> None:
    (machine, release, gpu), built, words = METAL_CASES[case]
    on_host("Darwin", machine, release, gpu=gpu)
    found = inspect_torch(stand_in.torch(mps=stand_in.Mps(available=False, built=built)))
    assert (found.kind, found.detected, found.usable, found.device) == ("mps", True, False, "cpu")
    assert (found.name, found.label) == (gpu, f"{gpu} (Apple Metal)")
    assert not found.is_gpu and found.float64
    for word in words:
        assert word in found.note


def test_each_metal_explanation_is_distinct(stand_in: Any, on_host: Any) -> None:
    notes = set()
    for (machine, release, gpu), built, _ in METAL_CASES.values():
        on_host("Darwin", machine, release, gpu=gpu)
        notes.add(inspect_torch(stand_in.torch(mps=stand_in.Mps(available=False, built=built))).note)
    assert len(notes) == len(METAL_CASES)


def test_a_usable_xpu_beats_an_unusable_metal(stand_in: Any, on_host: Any) -> None:
    on_host("Darwin", "x86_64", "13.6", gpu="Intel Iris Plus Graphics")
    torch = stand_in.torch(mps=stand_in.Mps(available=False), xpu=stand_in.Xpu(names=["Intel Arc A770"]))
    assert inspect_torch(torch).kind == "xpu"


def test_intel_xpu(stand_in: Any) -> None:
    found = inspect_torch(stand_in.torch(xpu=stand_in.Xpu(names=["Intel Arc A770"])))
    assert (found.kind, found.device, found.name) == ("xpu", "xpu:0", "Intel Arc A770")
    assert found.label == "Intel Arc A770 (Intel XPU)"
    assert found.is_gpu and not found.is_cuda and not found.float64
    assert found.autocast  # this stand-in's torch.amp accepts "xpu"
    assert not inspect_torch(stand_in.torch(xpu=stand_in.Xpu(), autocast=())).autocast


def test_intel_xpu_without_names(stand_in: Any) -> None:
    found = inspect_torch(stand_in.torch(xpu=stand_in.Xpu(forbid_names=True)), device_names=False)
    assert (found.kind, found.name, found.label) == ("xpu", "", "Intel GPU (Intel XPU)")


class DirectML(types.ModuleType):
    """A stand-in ``torch_directml`` module."""

    def __init__(self, available: bool = True, forbid_names: bool = False) -> None:
        super().__init__("torch_directml")
        self.available, self.forbid_names = available, forbid_names

    def is_available(self) -> bool:
        return self.available

    def device_count(self) -> int:
        return 2

    def device(self, index: int = 0) -> str:
        return f"privateuseone:{index}"

    def device_name(self, index: int = 0) -> str:
        if self.forbid_names:
            pytest.fail("device_name was called although device_names=False")
        return ["AMD Radeon RX 6600", "Intel UHD Graphics"][index]


def test_directml(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch_directml", DirectML())
    found = inspect_torch(stand_in.torch())
    assert (found.kind, found.device, found.name) == ("directml", "privateuseone:0", "AMD Radeon RX 6600")
    assert found.label == "AMD Radeon RX 6600 (DirectML)"
    assert found.is_gpu and not found.float64 and not found.autocast


def test_directml_without_names(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch_directml", DirectML(forbid_names=True))
    found = inspect_torch(stand_in.torch(), device_names=False)
    assert (found.kind, found.label) == ("directml", "GPU (DirectML)")


def test_directml_unavailable_is_no_device(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch_directml", DirectML(available=False))
    assert inspect_torch(stand_in.torch()).kind == "cpu"


def test_cuda_is_preferred_to_xpu_and_directml(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch_directml", DirectML())
    torch = stand_in.torch(cuda=stand_in.Cuda(), xpu=stand_in.Xpu())
    assert inspect_torch(torch).kind == "cuda"


def test_nothing_available_is_the_cpu(stand_in: Any) -> None:
    found = inspect_torch(stand_in.torch())
    assert (found.kind, found.device, found.note) == ("cpu", "cpu", "no accelerator found")
    assert inspect_torch(types.SimpleNamespace()).kind == "cpu"


def test_a_driver_that_throws_while_asked_is_a_note(stand_in: Any) -> None:
    cuda = stand_in.Cuda(raises=RuntimeError("CUDA driver initialization failed"))
    found = inspect_torch(stand_in.torch(cuda=cuda))
    assert found.kind == "cpu"
    assert "the CUDA/ROCm probe raised RuntimeError: CUDA driver initialization failed" in found.note


def test_a_throwing_probe_does_not_cost_the_other_devices(stand_in: Any) -> None:
    cuda = stand_in.Cuda(raises=OSError("libamdhip64.so: cannot open shared object file"))
    assert inspect_torch(stand_in.torch(cuda=cuda, xpu=stand_in.Xpu())).kind == "xpu"


def test_a_torch_whose_backends_attribute_raises(stand_in: Any, on_host: Any) -> None:
    on_host("Darwin", "arm64", "14.4")

    class Broken(types.SimpleNamespace):
        @property
        def backends(self) -> Any:
            raise ImportError("torch.backends.mps failed to load")

    torch = Broken(**vars(stand_in.torch()))
    found = inspect_torch(torch)
    assert found.kind == "cpu" and "ImportError: torch.backends.mps failed to load" in found.note


def test_an_unreadable_device_name_keeps_the_device(stand_in: Any) -> None:
    class Nameless(stand_in.Cuda):  # type: ignore[misc]  # a class from a fixture is Any to mypy
        def get_device_name(self, index: int = 0) -> str:
            raise RuntimeError("nvmlDeviceGetName failed")

    found = inspect_torch(stand_in.torch(cuda=Nameless()))
    assert (found.kind, found.name, found.label) == ("cuda", "", "NVIDIA GPU (NVIDIA CUDA 12.1)")


def test_neural_engines_names_the_apple_neural_engine_on_apple_silicon(on_host: Any) -> None:
    on_host("Darwin", "arm64")
    assert accelerator.neural_engines() == ("Apple Neural Engine (CoreML only)",)


@pytest.mark.parametrize(("system", "machine"), [("Darwin", "x86_64"), ("Linux", "arm64"), ("Windows", "AMD64")])
def test_no_neural_engine_elsewhere(on_host: Any, system: str, machine: str) -> None:
    on_host(system, machine)
    assert _probe.spacr_accel_neural_engines() == []


def test_empty_cache_goes_to_the_stand_ins_backend(stand_in: Any, on_host: Any) -> None:
    torch = stand_in.torch(cuda=stand_in.Cuda())
    assert accelerator.empty_cache(torch) == "torch.cuda.empty_cache()"
    assert torch.cuda.emptied == 1
    rocm = stand_in.torch(cuda=stand_in.Cuda(), hip="6.0")
    assert accelerator.empty_cache(rocm) == "torch.cuda.empty_cache()"
    assert accelerator.empty_cache(stand_in.torch()) == ""
    on_host("Darwin", "arm64")
    metal = stand_in.torch(mps=stand_in.Mps())
    assert accelerator.empty_cache(metal) == "torch.mps.empty_cache()"
    assert metal.mps.emptied == 1
    xpu = stand_in.torch(xpu=stand_in.Xpu())
    assert accelerator.empty_cache(xpu) == "torch.xpu.empty_cache()"


def test_empty_cache_never_raises_on_a_broken_driver(stand_in: Any) -> None:
    class Gone(stand_in.Cuda):  # type: ignore[misc]  # a class from a fixture is Any to mypy
        def empty_cache(self) -> None:
            raise RuntimeError("CUDA error: device-side assert triggered")

    assert accelerator.empty_cache(stand_in.torch(cuda=Gone())) == ""
