"""The parts of the torch prober that need no OS facts: the XPU and DirectML paths, reading a
device's name, counting CUDA devices fork-safely, bfloat16 and autocast, the fix for a kernel that
fails, and why a card torch sees cannot run: the CUDA architectures and ROCm gfx targets the installed torch
was built for, read against the card's (NVML, the KFD topology), and the fix a user can type
(the wheel, the driver, ``HSA_OVERRIDE_GFX_VERSION``). Split from :mod:`._probe` for length; the
prober asks :func:`_unreachable_card` and :func:`_arch_problem`."""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Final

from spacr_accel_core import HostDevice
from spacr_accel_core.toolkit import (
    ENV_DEVICE,
    Accelerator,
)
from spacr_accel_core.toolkit import describe as _describe

logger = logging.getLogger(__name__)

HSA_OVERRIDE: Final = "HSA_OVERRIDE_GFX_VERSION"
"""ROCm's switch that makes the runtime treat a card as another gfx target (``10.3.0`` is gfx1030):
how a consumer Radeon the wheel ships no kernels for (gfx1032) runs the nearest shipped target's."""

PYTORCH_INSTALL: Final = "https://pytorch.org/get-started/locally/"
CUDA_WHEEL: Final = "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu128"
"""The CUDA build to install in place of a CPU-only or too-old wheel: CUDA 12.8 is the first with
kernels for Blackwell (sm_100, sm_120) and still covers every card back to Maxwell."""
ROCM_WHEEL: Final = "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/rocm6.4"
NVIDIA_DRIVERS: Final = "https://www.nvidia.com/Download/index.aspx"

_DRIVER_TOO_OLD: Final = re.compile(r"driver on your system is too old \(found version (\d+)\)", re.IGNORECASE)

# ---- a card torch cannot run on ------------------------------------------------------------------


def _torch_version(torch: Any) -> str:
    return str(getattr(torch, "__version__", "") or "unknown version")


def _cuda_from_driver(number: str) -> str:
    """``11040`` (what CUDA's driver API reports) as ``11.4``."""
    value = int(number)
    return f"{value // 1000}.{(value % 1000) // 10}"


def _unreachable_card(torch: Any, hosts: Sequence[HostDevice], said: str, system: str) -> Accelerator | None:
    """A card the operating system lists and torch does not see: found, not used, and why.

    Three real causes, each with its own fix: a CPU-only wheel (``2.13.0+cpu``: install the CUDA
    or ROCm build), a driver older than the wheel's CUDA (torch says "The NVIDIA driver on your
    system is too old (found version 11040)": update the driver, naming both versions), or a card
    torch is not shown (``CUDA_VISIBLE_DEVICES``, a driver that is not loaded).

    :param torch: the module that did not see the card.
    :param hosts: the GPUs the operating system lists.
    :param said: what torch warned while answering ``is_available()``.
    :param system: ``platform.system()`` (ROCm has no macOS or Windows build).
    :returns: the card, detected and not usable; ``None`` when the OS lists none torch could drive.
    """
    version = getattr(torch, "version", None)
    cuda_build, hip = getattr(version, "cuda", None), getattr(version, "hip", None)
    wanted = ("AMD",) if hip else ("NVIDIA",) if cuda_build else ("NVIDIA", "AMD")
    card = next((h for h in hosts if h.kind == "gpu" and h.vendor in wanted
                 and not (h.vendor == "AMD" and system != "Linux")), None)
    if card is None:
        return None
    build = _torch_version(torch)
    kind = "rocm" if card.vendor == "AMD" else "cuda"
    route = "AMD ROCm" if kind == "rocm" else "NVIDIA CUDA"
    driver = f" {card.driver_version}" if card.driver_version else ""
    too_old = _DRIVER_TOO_OLD.search(said)
    if version is not None and not cuda_build and not hip:
        wheel = ROCM_WHEEL if kind == "rocm" else CUDA_WHEEL
        note = (f"this PyTorch {build} is a CPU-only build, so it cannot use the {card.name}; "
                f"install the {'ROCm' if kind == 'rocm' else 'CUDA'} build: {wheel}")
    elif too_old:
        supports = _cuda_from_driver(too_old.group(1))
        note = (f"the NVIDIA driver{driver} supports CUDA {supports} only, older than the CUDA "
                f"{cuda_build} this PyTorch {build} was built for; update the driver from "
                f"{NVIDIA_DRIVERS}, or install a PyTorch built for CUDA {supports} or older: {PYTORCH_INSTALL}")
    elif card.driver and card.driver not in ("nvidia", "amdgpu"):
        note = (f"the {card.name} is driven by {card.driver!r}, not the {card.vendor} driver torch needs; "
                f"install the {card.vendor} driver")
    elif os.environ.get("CUDA_VISIBLE_DEVICES") is not None or os.environ.get("HIP_VISIBLE_DEVICES") is not None:
        note = (f"torch sees no device although the OS lists the {card.name}: CUDA_VISIBLE_DEVICES="
                f"{os.environ.get('CUDA_VISIBLE_DEVICES', os.environ.get('HIP_VISIBLE_DEVICES'))!r} hides it")
    else:
        first = said.strip().splitlines()[0] if said.strip() else ""
        note = (f"torch {build} sees no device although the OS lists the {card.name}"
                + (f": {first}" if first else "; check the driver with nvidia-smi or rocm-smi"))
    return Accelerator(kind=kind, device="cpu", label=f"{card.name} ({route})", name=card.name,
                       usable=False, note=note)


_SM: Final = re.compile(r"(sm|compute)_(\d+)(\d)([af]?)")


def cuda_arch_runs(capability: tuple[int, int], arches: Sequence[str]) -> bool:
    """Whether a card of ``capability`` can run anything this build was compiled for.

    CUDA's rules: a cubin ``sm_XY`` runs on the same major with a minor of at least ``Y``
    (``sm_80`` runs on 8.6, not on 9.0); PTX ``compute_XY`` is compiled by the driver for any
    capability of at least ``X.Y``; an arch-specific target (``sm_90a``) runs only on exactly that
    capability. Unknown entries are ignored.

    :param capability: ``torch.cuda.get_device_capability()``, e.g. ``(12, 0)``.
    :param arches: ``torch.cuda.get_arch_list()``.
    """
    for arch in arches:
        match = _SM.fullmatch(arch.strip().lower())
        if match is None:
            continue
        target = (int(match.group(2)), int(match.group(3)))
        if match.group(4) == "a":
            runs = capability == target
        elif match.group(1) == "sm":
            runs = capability[0] == target[0] and capability[1] >= target[1]
        else:
            runs = capability >= target
        if runs:
            return True
    return False


def gfx_target(name: str) -> str:
    """A ROCm ``gcnArchName`` without its feature suffixes: ``gfx1032:sramecc-:xnack-`` -> ``gfx1032``."""
    return name.split(":", maxsplit=1)[0].strip().lower()


def gfx_from_override(value: str) -> str:
    """``HSA_OVERRIDE_GFX_VERSION`` as the target it makes the card: ``10.3.0`` -> ``gfx1030``,
    ``9.0.10`` -> ``gfx90a`` (the stepping is one hex digit); ``""`` for a value of no such shape."""
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\.(\d+)\s*", value)
    if match is None:
        return ""
    major, minor, stepping = (int(part) for part in match.groups())
    if minor > 15 or stepping > 15:
        return ""
    return f"gfx{major}{minor:x}{stepping:x}"


def _override_for(target: str, shipped: Sequence[str]) -> tuple[str, str] | None:
    """The nearest shipped target of the same family and the override that selects it.

    RDNA2's gfx1031/1032/1034/1035 run gfx1030's kernels, RDNA3's gfx1101/1102 gfx1100's: the
    family is the target without its last digit, and the lowest shipped member is suggested.
    """
    family = target[:-1]
    members = sorted(t for t in shipped if t.startswith(family) and t != target and len(t) == len(target))
    if not members:
        return None
    digits = members[0][3:]
    major, minor, stepping = int(digits[:-2]), int(digits[-2], 16), int(digits[-1], 16)
    return members[0], f"{major}.{minor}.{stepping}"


def nvml_capabilities() -> list[tuple[int, int]] | None:
    """Every NVIDIA card's compute capability from NVML, or None where NVML cannot say.

    NVML is the driver's management library: asking it initialises no CUDA context, so discovery
    (which must stay fork-safe) can check the architecture that ``get_device_capability`` would
    only give by initialising CUDA. Loaded the way torch's own NVML device count loads it.
    """
    import ctypes

    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1" if sys.platform != "win32" else "nvml.dll")
        if nvml.nvmlInit_v2() != 0:
            return None
        try:
            count = ctypes.c_uint(0)
            if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
                return None
            found = []
            for index in range(count.value):
                handle = ctypes.c_void_p()
                major, minor = ctypes.c_int(0), ctypes.c_int(0)
                if (nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != 0
                        or nvml.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major),
                                                                   ctypes.byref(minor)) != 0):
                    return None
                found.append((major.value, minor.value))
            return found
        finally:
            nvml.nvmlShutdown()
    except (OSError, AttributeError) as exc:  # no NVML here, or one without these calls
        logger.debug("NVML cannot list compute capabilities: %s", _describe(exc))
        return None


KFD_NODES: Final = "/sys/class/kfd/kfd/topology/nodes"
"""Where the AMD kernel driver lists each GPU's gfx target (``gfx_target_version 100302``)."""


def kfd_gfx_targets(nodes: str | None = None) -> list[str] | None:
    """Every AMD GPU's gfx target from the kernel driver's topology, or None where it cannot say.

    The ROCm counterpart of :func:`nvml_capabilities`: a sysfs read, no HIP runtime, so discovery
    stays fork-safe. ``gfx_target_version`` is major * 10000 + minor * 100 + stepping (``100302``
    is gfx1032, ``90010`` is gfx90a); CPU nodes report 0 and are skipped.

    :param nodes: the topology directory; :data:`KFD_NODES` when not given (a test passes its own).
    """
    nodes = KFD_NODES if nodes is None else nodes
    try:
        entries = sorted(os.listdir(nodes))
    except OSError:
        return None
    targets = []
    for entry in entries:
        try:
            with open(os.path.join(nodes, entry, "properties"), encoding="ascii") as handle:
                text = handle.read()
        except OSError:
            continue
        match = re.search(r"^gfx_target_version\s+(\d+)$", text, re.MULTILINE)
        if match is None or int(match.group(1)) == 0:
            continue
        value = int(match.group(1))
        target = gfx_from_override(f"{value // 10000}.{(value // 100) % 100}.{value % 100}")
        if target:
            targets.append(target)
    return targets or None


def _discovery_gfx_problem(torch: Any, cuda: Any, card: str) -> str:
    """Discovery's ROCm target check, fork-safe: the KFD topology against the build's targets,
    honouring ``HSA_OVERRIDE_GFX_VERSION``; said only when no card can run the build."""
    try:
        shipped = [gfx_target(str(a)) for a in cuda.get_arch_list()]
    except Exception:  # an old torch or a stand-in without the query: nothing to check against
        return ""
    targets = kfd_gfx_targets() if shipped else None
    if not targets:
        return ""
    override = gfx_from_override(os.environ.get(HSA_OVERRIDE, ""))
    if any((override or target) in shipped for target in targets):
        return ""
    nearest = _override_for(targets[0], shipped)
    fix = (f"set {HSA_OVERRIDE}={nearest[1]} before starting Python, to run it as {nearest[0]}, which "
           "this build ships" if nearest else f"install a ROCm build that ships {targets[0]}: {PYTORCH_INSTALL}")
    return (f"this PyTorch {_torch_version(torch)} ships no ROCm kernels for {', '.join(targets)}, the "
            f"{card}'s target; it ships {', '.join(shipped)}. Fix: {fix}")


def _discovery_arch_problem(torch: Any, cuda: Any, card: str) -> str:
    """Discovery's architecture check, fork-safe: NVML's capabilities against the build's list.

    Said only when NO card can run this build (a machine with one old and one new card still has
    a device to dispatch to); ``""`` when NVML or the arch list cannot say.
    """
    try:
        arches = [str(a) for a in cuda.get_arch_list()]  # compile-time flags: initialises nothing
    except Exception:  # an old torch or a stand-in without the query: nothing to check against
        return ""
    capabilities = nvml_capabilities() if arches else None
    if not capabilities or any(cuda_arch_runs(c, arches) for c in capabilities):
        return ""
    sm = ", ".join(sorted({f"sm_{major}{minor}" for major, minor in capabilities}))
    return (f"this PyTorch {_torch_version(torch)} has no kernels for {sm}, the {card}'s architecture; "
            f"it was built for {', '.join(arches)}. Install a build that includes it: {CUDA_WHEEL}")


def _arch_problem(torch: Any, cuda: Any, index: int, card: str, rocm: bool) -> str:
    """Why this build cannot run on the card's architecture, or ``""`` when it can (or cannot tell).

    Metadata only: the card's capability (CUDA) or ``gcnArchName`` (ROCm) against
    ``get_arch_list()``. A wheel without kernels for a new card otherwise looks available and
    fails at the first kernel: "CUDA error: no kernel image is available for execution on the
    device" (an RTX 50xx, sm_120, with a wheel built for sm_50..sm_90), and a Radeon RX 6600
    (gfx1032) under a ROCm wheel that ships gfx1030 does the same unless
    ``HSA_OVERRIDE_GFX_VERSION=10.3.0`` is set.
    """
    try:
        arches = [str(a) for a in cuda.get_arch_list()]
    except Exception as exc:  # an old torch or a stand-in without the query: nothing to check against
        logger.debug("get_arch_list failed: %s", _describe(exc))
        return ""
    if not arches:
        return ""
    build = _torch_version(torch)
    try:
        if rocm:
            target = gfx_target(str(getattr(cuda.get_device_properties(index), "gcnArchName", "")))
            if not target:
                return ""
            shipped = [gfx_target(a) for a in arches]
            override = os.environ.get(HSA_OVERRIDE, "")
            effective = gfx_from_override(override) or target
            if effective in shipped:
                return ""
            nearest = _override_for(target, shipped)
            # No parentheses in a note: describe() nests it in its own.
            fix = (f"set {HSA_OVERRIDE}={nearest[1]} before starting Python, to run it as {nearest[0]}, "
                   "which this build ships" if nearest
                   else f"install a ROCm build that ships {target}: {PYTORCH_INSTALL}")
            told = f"; {HSA_OVERRIDE}={override} makes it {effective}" if override else ""
            return (f"this PyTorch {build} ships no ROCm kernels for {target}, the {card}'s target{told}; "
                    f"it ships {', '.join(shipped)}. Fix: {fix}")
        capability = tuple(int(v) for v in cuda.get_device_capability(index))
    except Exception as exc:  # a property query that fails: the kernel check will tell
        logger.debug("reading the device architecture failed: %s", _describe(exc))
        return ""
    if len(capability) != 2 or cuda_arch_runs((capability[0], capability[1]), arches):
        return ""
    sm = f"sm_{capability[0]}{capability[1]}"
    return (f"this PyTorch {build} has no kernels for {sm}, the {card}'s architecture, capability "
            f"{capability[0]}.{capability[1]}; it was built for {', '.join(arches)}. "
            f"Install a build that includes {sm}: {CUDA_WHEEL}")


# ---- the paths and checks that need no OS facts --------------------------------------------------


def _device_name(query: Callable[[int], Any], index: int, what: str) -> str:
    try:
        return str(query(index)).strip()
    except Exception as exc:  # a name is decoration; failing to read it must not cost the device
        logger.debug("could not read the %s device name: %s", what, _describe(exc))
        return ""


def _cuda_available(cuda: Any, fork_safe: bool) -> tuple[bool, str]:
    """Whether torch sees a CUDA/ROCm device, and any warning torch gave while answering.

    FORK SAFETY. ``torch.cuda.is_available()`` asks ``cudaGetDeviceCount``, which runs ``cuInit``:
    after that a forked child's first CUDA call fails ("Cannot re-initialize CUDA in forked
    subprocess"). ``torch.cuda.device_count()`` asks NVML (amdsmi on ROCm) first and initialises
    nothing when NVML answers, so discovery, which runs in a process that may fork workers before
    it computes anything, counts devices instead. With ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` torch's
    own ``is_available()`` does the same.

    :param cuda: ``torch.cuda``.
    :param fork_safe: count through NVML instead of asking the CUDA runtime.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = int(cuda.device_count()) > 0 if fork_safe else bool(cuda.is_available())
    said = " ".join(str(w.message) for w in caught)
    return available, said


def _bf16_native(cuda: Any) -> bool:
    """Whether the card computes bfloat16 natively (compute capability 8.0 and later).

    A T4 or V100 ACCEPTS bfloat16 tensors and emulates the arithmetic, slower than float32: the
    reason for float32 weights on the CPU holds there too, so emulation reads as False.
    ``is_bf16_supported(including_emulation=False)`` says so where torch has the argument (2.4+);
    an older torch is asked plainly, and one without the function keeps the measured True.
    """
    check = getattr(cuda, "is_bf16_supported", None)
    if check is None:
        return True
    try:
        if "including_emulation" in inspect.signature(check).parameters:
            return bool(check(including_emulation=False))
        return bool(check())
    except Exception as exc:  # a property query that fails: the declared answer stands
        logger.debug("is_bf16_supported failed: %s", _describe(exc))
        return True


def _autocast_available(torch: Any, device_type: str, default: bool = False) -> bool:
    """``torch.amp.is_autocast_available(device_type)`` where torch has it (2.4+), else ``default``.

    :param default: the measured answer for a torch that cannot say: True for CUDA/ROCm,
        False elsewhere (a wrong "yes" is a crash in a training run).
    """
    check = getattr(getattr(torch, "amp", None), "is_autocast_available", None)
    if check is None:
        return default
    try:
        return bool(check(device_type))
    except Exception:  # an unknown device type on this build
        return False


def _xpu(torch: Any, device_names: bool, index: int = 0) -> Accelerator | None:
    """Intel Arc / Xe, on a torch built with XPU (or with IPEX loaded)."""
    xpu = getattr(torch, "xpu", None)
    if xpu is None or not xpu.is_available():
        return None
    device = f"xpu:{index}"
    if index:
        count = int(xpu.device_count())
        if index >= count:
            return Accelerator(kind="xpu", device=device, label=device, usable=False,
                               note=f"there is no {device}: torch sees {count} device(s)")
    name = _device_name(xpu.get_device_name, index, "XPU") if device_names else ""
    # float64 is missing on most consumer Intel parts and bfloat16 depends on the part, so both
    # are DECLARED conservatively; the selecting path measures them.
    return Accelerator(kind="xpu", device=device, label=f"{name or 'Intel GPU'} (Intel XPU)", name=name,
                       float64=False, autocast=_autocast_available(torch, "xpu"), bfloat16=False)


def _directml_module() -> Any:
    """``torch_directml`` if it imports, else None (it is a separate Windows-only wheel)."""
    try:
        return importlib.import_module("torch_directml")
    except BaseException:  # absent, or broken in any way: DirectML is simply not there
        return None


def _directml(torch: Any, device_names: bool, index: int = 0) -> Accelerator | None:
    """Windows DirectML: any vendor's card, the thinnest operator coverage."""
    del torch  # DirectML is reached through its own module, not through torch's namespace
    module = _directml_module()
    if module is None or not module.is_available():
        return None
    if index:
        count = int(module.device_count())
        if index >= count:
            return Accelerator(kind="directml", device=f"privateuseone:{index}", label="DirectML",
                               usable=False, note=f"there is no DirectML device {index}: "
                                                  f"torch-directml sees {count}")
    device = str(module.device(index))
    name = _device_name(module.device_name, index, "DirectML") if device_names else ""
    return Accelerator(kind="directml", device=device, label=f"{name or 'GPU'} (DirectML)", name=name,
                       float64=False, autocast=False, bfloat16=False)


def _kernel_fix(message: str, found: Accelerator) -> str:
    """What to do about a device that failed the kernel check, by what the error said."""
    lowered = message.lower()
    if "no kernel image" in lowered or "invalid device function" in lowered:
        if found.kind == "rocm":
            return (f"this PyTorch has no kernels for this card's gfx target; set {HSA_OVERRIDE} to the "
                    f"nearest shipped target, or install a ROCm build that ships it: {PYTORCH_INSTALL}")
        return f"install a PyTorch built for this card: {CUDA_WHEEL}"
    too_old = _DRIVER_TOO_OLD.search(message)
    if too_old:
        return (f"the driver supports CUDA {_cuda_from_driver(too_old.group(1))} only: update it from "
                f"{NVIDIA_DRIVERS}, or install a PyTorch built for that CUDA: {PYTORCH_INSTALL}")
    if "out of memory" in lowered:
        return "the card is full: another process holds its memory, nvidia-smi or rocm-smi shows which"
    if "forked subprocess" in lowered:
        return "CUDA was initialised before this process forked: start workers with 'spawn'"
    return f"{ENV_DEVICE}=cpu runs on the CPU without asking it; reinstalling the driver or PyTorch may fix it"
