"""The setups that break on lab workstations, each with a stand-in modelled on the real failure.

A CPU-only wheel beside an NVIDIA card, a wheel without kernels for the card (sm_120 on a wheel
built for sm_50..sm_90), a Radeon whose gfx target the ROCm wheel does not ship, a device that
answers "available" and cannot run a kernel, a driver older than the wheel's CUDA, bfloat16 that
is only emulated, autocast on Metal, and discovery in a process that forks. The error texts are
torch's own.
"""

from __future__ import annotations

import importlib.metadata
import sys
from typing import Any

import pytest

from spacr_accel_core import HostDevice, accelerator
from spacr_accel_core.accelerator import inspect_torch
from spacr_accel_core.devices import _cellpose, _probers
from spacr_accel_torch import _arch, _nodes, _probe

RTX_4090 = HostDevice(vendor="NVIDIA", name="NVIDIA GeForce RTX 4090", pci_id="10de:2684",
                      address="0000:01:00.0", driver="nvidia", driver_version="470.82.01", source="test")
RX_6600 = HostDevice(vendor="AMD", name="AMD Radeon RX 6600", pci_id="1002:73ff", address="0000:03:00.0",
                     driver="amdgpu", source="test")

NO_KERNEL_IMAGE = ("CUDA error: no kernel image is available for execution on the device\n"
                   "CUDA kernel errors might be asynchronously reported at some other API call, so the "
                   "stacktrace below might be incorrect.")
DRIVER_TOO_OLD = ("CUDA initialization: The NVIDIA driver on your system is too old (found version 11040). "
                  "Please update your GPU driver by downloading and installing a new version from the URL: "
                  "http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to "
                  "install a PyTorch version that has been compiled with your version of the CUDA driver.")
WHEEL_ARCHES = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
ROCM_ARCHES = ("gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100")


def select(monkeypatch: pytest.MonkeyPatch, torch: Any) -> accelerator.Accelerator:
    """``resolve()`` end to end, with ``import torch`` answering the stand-in."""
    monkeypatch.setattr(_probe, "_import_torch", lambda: torch)
    return accelerator.resolve(refresh=True)


def cpu_wheel(stand_in: Any) -> Any:
    """torch 2.13.0+cpu: ``torch.version.cuda`` None, and CUDA never available."""
    return stand_in.torch(cuda=stand_in.Cuda(available=False), cuda_version=None, release="2.13.0+cpu")


# ---- a CPU-only wheel beside an NVIDIA card ----------------------------------------------------


def test_a_cpu_only_wheel_beside_an_nvidia_card_is_found_not_used(stand_in: Any, host_cards: Any) -> None:
    host_cards(RTX_4090)
    found = inspect_torch(cpu_wheel(stand_in))
    assert (found.kind, found.detected, found.usable, found.device) == ("cuda", True, False, "cpu")
    assert found.name == "NVIDIA GeForce RTX 4090"
    assert "2.13.0+cpu" in found.note and "CPU-only build" in found.note
    assert "--index-url https://download.pytorch.org/whl/cu128" in found.note


def test_without_a_card_in_the_inventory_a_cpu_wheel_finds_nothing(stand_in: Any) -> None:
    assert inspect_torch(cpu_wheel(stand_in)).kind == "cpu"


def test_the_real_cpu_wheel_beside_a_listed_card(host_cards: Any) -> None:
    torch = pytest.importorskip("torch")
    if torch.version.cuda is not None or torch.version.hip is not None:
        pytest.skip("this torch is not a CPU-only build")
    host_cards(RTX_4090)
    found = inspect_torch(torch)
    assert (found.kind, found.detected, found.usable) == ("cuda", True, False)
    assert f"this PyTorch {torch.__version__} is a CPU-only build" in found.note
    assert "found, not used" in _describe_with(found)


def _describe_with(found: accelerator.Accelerator) -> str:
    with accelerator.override(found):
        return accelerator.describe()


def test_no_device_node_and_a_cpu_wheel_name_the_build_without_importing_torch(
        host_cards: Any, monkeypatch: pytest.MonkeyPatch) -> None:

    host_cards(RTX_4090)
    monkeypatch.setattr(_nodes, "_no_device_node", lambda: "no GPU device node here")
    monkeypatch.setattr(_probe, "_import_torch", lambda: pytest.fail("torch was imported to ask"))
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: "2.13.0+cpu" if name == "torch" else real(name))
    found = accelerator.resolve(refresh=True)
    assert (found.kind, found.detected, found.usable) == ("cuda", True, False)
    assert "this PyTorch 2.13.0+cpu is a CPU-only build" in found.note
    assert accelerator.cellpose_gpu() is False


def test_no_device_node_and_no_card_raise_the_note_without_importing_torch(
        monkeypatch: pytest.MonkeyPatch) -> None:

    monkeypatch.setattr(_nodes, "_no_device_node", lambda: "no GPU device node here")
    monkeypatch.setattr(_probe, "_import_torch", lambda: pytest.fail("torch was imported to ask"))
    found = accelerator.resolve(refresh=True)
    assert found.kind == "cpu" and "no GPU device node here" in found.note


def test_a_driver_too_old_for_the_wheel_names_both_versions(stand_in: Any, host_cards: Any) -> None:
    host_cards(RTX_4090)
    torch = stand_in.torch(cuda=stand_in.Cuda(available=False, warn=DRIVER_TOO_OLD), cuda_version="12.1")
    found = inspect_torch(torch)
    assert (found.kind, found.detected, found.usable) == ("cuda", True, False)
    assert found.note.startswith("the NVIDIA driver 470.82.01 supports CUDA 11.4 only, older than the "
                                 "CUDA 12.1 this PyTorch 2.5.1 was built for")


def test_a_cuda_wheel_that_sees_no_card_the_os_lists_says_what_hides_it(
        stand_in: Any, host_cards: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    host_cards(RTX_4090)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    found = inspect_torch(stand_in.torch(cuda=stand_in.Cuda(available=False)))
    assert not found.usable and "CUDA_VISIBLE_DEVICES=''" in found.note


# ---- a wheel without kernels for the card ------------------------------------------------------


def test_capability_12_0_on_a_wheel_built_for_sm_50_to_sm_90_is_found_not_used(
        stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = stand_in.Cuda(names=["NVIDIA GeForce RTX 5090"], arches=WHEEL_ARCHES, capability=(12, 0))
    torch = stand_in.torch(cuda=cuda, release="2.5.1+cu121", allocations=True)
    found = inspect_torch(torch)
    assert (found.kind, found.detected, found.usable) == ("cuda", True, False)
    assert "this PyTorch 2.5.1+cu121 has no kernels for sm_120" in found.note
    assert "whl/cu128" in found.note
    # resolve() agrees, and never runs a kernel on it: Cellpose is not told there is a GPU.
    selected = select(monkeypatch, torch)
    assert not selected.usable and torch.kernels == []
    assert accelerator.cellpose_gpu() is False


@pytest.mark.parametrize(("capability", "arches", "runs"), [
    ((8, 6), ("sm_80",), True),           # a cubin runs on a later minor of the same major
    ((8, 0), ("sm_86",), False),          # ... not on an earlier minor
    ((9, 0), ("sm_80",), False),          # ... nor on the next major
    ((12, 0), ("sm_80", "compute_90"), True),  # PTX runs on any later capability
    ((8, 9), ("compute_90",), False),     # ... not an earlier one
    ((9, 0), ("sm_90a",), True),          # an arch-specific cubin runs on exactly its capability
    ((10, 0), ("sm_90a", "compute_90a"), False),
    ((12, 0), ("sm_120",), True),
    ((7, 5), (), False),
])
def test_cuda_compatibility_rules(capability: tuple[int, int], arches: tuple[str, ...], runs: bool) -> None:
    assert _arch.cuda_arch_runs(capability, arches) is runs


def test_the_kernel_check_catches_a_missing_kernel_image(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # No arch list to check against (an older torch): the kernel itself must tell.
    torch = stand_in.torch(cuda=stand_in.Cuda(names=["NVIDIA GeForce RTX 5090"]), allocations=True,
                           kernel_error=RuntimeError(NO_KERNEL_IMAGE))
    found = select(monkeypatch, torch)
    assert (found.kind, found.detected, found.usable, found.device) == ("cuda", True, False, "cpu")
    assert "could not run a kernel: CUDA error: no kernel image is available for execution on the device" \
        in found.note
    assert "asynchronously" not in found.note  # the first line only
    assert "whl/cu128" in found.note
    assert accelerator.cellpose_gpu() is False and accelerator.describe().endswith(")")


# ---- a ROCm wheel without the card's gfx target ------------------------------------------------


def rocm_torch(stand_in: Any, gcn: str = "gfx1032:sramecc-:xnack-", allocations: bool = False) -> Any:
    cuda = stand_in.Cuda(names=["AMD Radeon RX 6600"], arches=ROCM_ARCHES, gcn=gcn)
    return stand_in.torch(cuda=cuda, hip="6.2.41133", release="2.5.1+rocm6.2", allocations=allocations)


def test_gfx1032_on_a_wheel_without_it_names_the_target_and_the_override(stand_in: Any) -> None:
    found = inspect_torch(rocm_torch(stand_in))
    assert (found.kind, found.detected, found.usable) == ("rocm", True, False)
    assert "ships no ROCm kernels for gfx1032" in found.note
    assert "set HSA_OVERRIDE_GFX_VERSION=10.3.0 before starting Python" in found.note
    assert "sramecc" not in found.note and "(" not in found.note  # describe() nests it in parentheses


def test_the_override_makes_gfx1032_usable(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HSA_OVERRIDE_GFX_VERSION", "10.3.0")
    found = inspect_torch(rocm_torch(stand_in))
    assert (found.kind, found.usable) == ("rocm", True)


def test_a_wrong_override_is_named(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HSA_OVERRIDE_GFX_VERSION", "10.1.0")
    found = inspect_torch(rocm_torch(stand_in))
    assert not found.usable and "; HSA_OVERRIDE_GFX_VERSION=10.1.0 makes it gfx1010;" in found.note


def test_a_shipped_target_with_feature_suffixes_is_usable(stand_in: Any) -> None:
    assert inspect_torch(rocm_torch(stand_in, gcn="gfx90a:sramecc+:xnack-")).usable


@pytest.mark.parametrize(("value", "target"), [
    ("10.3.0", "gfx1030"), ("11.0.0", "gfx1100"), ("9.0.10", "gfx90a"), (" 9.4.2 ", "gfx942"),
    ("10.3", ""), ("ten", ""), ("", ""),
])
def test_hsa_override_values(value: str, target: str) -> None:
    assert _arch.gfx_from_override(value) == target


# ---- available, and cannot run a kernel --------------------------------------------------------


def test_a_device_that_cannot_run_a_kernel_is_not_usable_and_not_measured(
        stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    error = RuntimeError("CUDA error: an illegal memory access was encountered\n"
                         "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    torch = stand_in.torch(cuda=stand_in.Cuda(names=["Tesla T4"]), allocations=True, kernel_error=error)
    made: list[Any] = []
    torch.zeros = lambda *a, **k: made.append(k)  # a dtype probe would be read as "float64 refused"
    found = select(monkeypatch, torch)
    assert (found.detected, found.usable, found.is_gpu) == (True, False, False)
    assert found.note.startswith("the Tesla T4 could not run a kernel: CUDA error: an illegal memory access "
                                 "was encountered.")
    assert "TORCH_USE_CUDA_DSA" not in found.note
    assert made == []
    assert found.float64 is True  # the CPU's abilities: the work runs there


def test_a_kernel_that_hangs_is_abandoned(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    release = threading.Event()
    torch = stand_in.torch(cuda=stand_in.Cuda(), allocations=True)

    def hang(*args: Any, **kwargs: Any) -> Any:
        release.wait(30)
        raise RuntimeError("released")

    torch.arange = hang
    monkeypatch.setenv("SPACR_ACCEL_PROBE_TIMEOUT", "0.5")
    # The walk's own bound outlives the kernel's, so it is the kernel check that gives up.
    monkeypatch.setattr(_probers, "_probe_timeout", lambda: 5.0)
    try:
        found = select(monkeypatch, torch)
    finally:
        release.set()
    assert not found.usable and "did not answer within 0.5 s" in found.note


def test_a_working_device_runs_the_kernel_once(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = stand_in.torch(cuda=stand_in.Cuda(), allocations=True)
    found = select(monkeypatch, torch)
    assert found.is_gpu and torch.kernels == [("float32", "cuda:0")]


# ---- autocast and bfloat16 where torch can say --------------------------------------------------


@pytest.mark.parametrize(("autocast", "expected"), [(("cuda", "mps"), True), (("cuda",), False), (None, False)])
def test_metal_autocast_is_asked_where_torch_can_say(stand_in: Any, on_host: Any, autocast: Any,
                                                      expected: bool) -> None:
    on_host("Darwin")
    torch = stand_in.torch(mps=stand_in.Mps(), release="2.5.1", autocast=autocast)
    assert inspect_torch(torch).autocast is expected


def test_cuda_autocast_keeps_the_seed_answer_on_an_old_torch(stand_in: Any) -> None:
    assert inspect_torch(stand_in.torch(cuda=stand_in.Cuda(), autocast=None)).autocast is True


def emulating(native: bool) -> Any:
    """``torch.cuda.is_bf16_supported`` of torch 2.4+: emulation counts unless told not to."""

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return native or including_emulation

    return is_bf16_supported


def test_t4_bfloat16_is_emulated_so_cellpose_gets_float32(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = stand_in.Cuda(names=["Tesla T4"], bf16=emulating(False))
    torch = stand_in.torch(cuda=cuda, allocations=True)
    made: list[Any] = []
    torch.zeros = lambda *a, **k: made.append(k["dtype"])
    found = select(monkeypatch, torch)
    assert found.is_gpu and found.bfloat16 is False
    assert made == ["float64"]  # accepting a bfloat16 tensor would not say it is native
    monkeypatch.setattr(_cellpose, "_cellpose_major", lambda: 4)
    assert accelerator.cellpose_kwargs()["use_bfloat16"] is False


def test_a100_bfloat16_is_native(stand_in: Any) -> None:
    cuda = stand_in.Cuda(names=["NVIDIA A100"], bf16=emulating(True))
    assert inspect_torch(stand_in.torch(cuda=cuda)).bfloat16 is True


def test_an_older_is_bf16_supported_is_asked_plainly(stand_in: Any) -> None:
    cuda = stand_in.Cuda(names=["Tesla V100"], bf16=lambda: False)
    assert inspect_torch(stand_in.torch(cuda=cuda)).bfloat16 is False


# ---- fork safety ---------------------------------------------------------------------------------


def test_discovery_never_initialises_the_cuda_runtime(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = stand_in.Cuda()
    monkeypatch.setattr(_probe, "_import_torch", lambda: stand_in.torch(cuda=cuda))
    found = _probe.detect()
    assert found is not None and found.kind == "cuda"
    # is_available() runs cuInit (cudaGetDeviceCount); device_count() asks NVML first.
    assert cuda.cu_init == []


def test_discovery_reports_no_cuda_when_nvml_counts_none(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = stand_in.Cuda(available=False)
    monkeypatch.setattr(_probe, "_import_torch", lambda: stand_in.torch(cuda=cuda))
    assert _probe.detect() is None and cuda.cu_init == []


def test_the_host_inventory_is_not_asked_during_discovery(stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Discovery runs while the registry is being built: asking the registry for host devices
    # there would wait on its own lock.
    monkeypatch.setattr(_probe, "_host_gpus", lambda: pytest.fail("host devices asked in discovery"))
    monkeypatch.setattr(_probe, "_import_torch", lambda: stand_in.torch(cuda=stand_in.Cuda()))
    assert _probe.detect() is not None


def test_resolve_in_a_process_without_a_device_node_never_imports_torch() -> None:
    import subprocess

    code = ("import sys\n"
            "from spacr_accel_torch import _nodes, _plugin\n"
            "if _nodes._no_device_node() is None: print('node'); raise SystemExit\n"
            "from spacr_accel_core import accelerator\n"
            "found = accelerator.resolve()\n"
            "print(found.kind, 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=True).stdout.split()
    if out == ["node"]:
        pytest.skip("this machine has a GPU device node")
    assert out[-1] == "False"


def test_discovery_checks_the_architecture_through_nvml_not_cuda(
        stand_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Discovery decides whether the torch backend serves automatic dispatch: a card the wheel has
    # no kernels for must not be offered, and asking its capability must not initialise CUDA.
    cuda = stand_in.Cuda(names=["NVIDIA GeForce RTX 5090"], arches=WHEEL_ARCHES, capability=(12, 0),
                         forbid_names=True)
    monkeypatch.setattr(_probe, "_import_torch", lambda: stand_in.torch(cuda=cuda, release="2.5.1+cu121"))
    monkeypatch.setattr(_arch, "nvml_capabilities", lambda: [(12, 0)])
    found = _probe.detect()
    assert found is not None and not found.usable and "no kernels for sm_120" in found.note
    assert cuda.cu_init == []
    monkeypatch.setattr(_arch, "nvml_capabilities", lambda: [(12, 0), (8, 6)])  # one card can run it
    assert _probe.detect().usable  # type: ignore[union-attr]  # detect() names a card here (None would fail the assertion all the same)
    monkeypatch.setattr(_arch, "nvml_capabilities", lambda: None)  # NVML cannot say: the kernel check will
    assert _probe.detect().usable  # type: ignore[union-attr]  # detect() names a card here (None would fail the assertion all the same)


def test_nvml_capabilities_without_nvml_is_none_not_an_error() -> None:
    import ctypes.util

    if ctypes.util.find_library("nvidia-ml"):
        pytest.skip("NVML is installed here")
    assert _arch.nvml_capabilities() is None


def kfd(tmp_path: Any, *versions: int) -> str:
    """A KFD topology: node 0 the CPU (version 0), then one node per GPU."""
    for index, version in enumerate((0, *versions)):
        node = tmp_path / "nodes" / str(index)
        node.mkdir(parents=True)
        (node / "properties").write_text(f"cpu_cores_count 0\ngfx_target_version {version}\nmax_waves_per_simd 16\n")
    return str(tmp_path / "nodes")


def test_kfd_targets(tmp_path: Any) -> None:
    assert _arch.kfd_gfx_targets(kfd(tmp_path, 100302, 90010)) == ["gfx1032", "gfx90a"]
    assert _arch.kfd_gfx_targets(str(tmp_path / "absent")) is None


def test_rocm_discovery_checks_the_target_through_kfd(stand_in: Any, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Any) -> None:
    nodes = kfd(tmp_path, 100302)
    monkeypatch.setattr(_arch, "KFD_NODES", nodes)
    cuda = stand_in.Cuda(names=["AMD Radeon RX 6600"], arches=ROCM_ARCHES, forbid_names=True)
    monkeypatch.setattr(_probe, "_import_torch", lambda: stand_in.torch(cuda=cuda, hip="6.2.41133"))
    found = _probe.detect()
    assert found is not None and not found.usable
    assert "no ROCm kernels for gfx1032" in found.note and "HSA_OVERRIDE_GFX_VERSION=10.3.0" in found.note
    monkeypatch.setenv("HSA_OVERRIDE_GFX_VERSION", "10.3.0")
    assert _probe.detect().usable  # type: ignore[union-attr]  # detect() names a card here (None would fail the assertion all the same)


@pytest.mark.parametrize("vendor", ["nvidia", "Nvidia", "NVIDIA Corporation", "NVIDIA Corp."])
def test_a_cpu_only_wheel_is_named_whatever_spelling_a_plugin_gives_the_vendor(
        stand_in: Any, host_cards: Any, vendor: str) -> None:
    """A plugin's record with the vendor as the wild writes it still names the CPU-only build."""
    host_cards(HostDevice(vendor=vendor, name="NVIDIA GeForce RTX 4090", source="test"))
    found = inspect_torch(cpu_wheel(stand_in))
    assert (found.kind, found.detected, found.usable) == ("cuda", True, False)
    assert "CPU-only build" in found.note


@pytest.mark.parametrize("vendor", ["amd", "Advanced Micro Devices, Inc.", "ATI Technologies Inc."])
def test_an_amd_card_under_any_spelling_is_a_rocm_card(stand_in: Any, host_cards: Any, vendor: str) -> None:
    host_cards(HostDevice(vendor=vendor, name="AMD Radeon RX 6600", source="test"))
    found = inspect_torch(cpu_wheel(stand_in))
    assert found.kind == "rocm" and found.detected and not found.usable
