"""The torch distribution's device prober: NVIDIA CUDA, AMD ROCm, Apple Metal, Intel XPU, DirectML.

WHY IT LIVES HERE AND NOT IN THE CORE. Every one of these is reached through torch, and the core
never imports a vendor library. The core walks ``spacr_accel_probe`` hookimpls best first; this
one answers for everything torch can drive, in the order of :data:`~spacr_accel_core.accelerator.KINDS`.

WHAT EACH PATH HAS TO GET RIGHT.

* ROCm answers ``torch.cuda.is_available()`` True and dispatches to ``cuda``, but it is AMD: it
  is reported as ``rocm`` and never labelled CUDA, because the vendor is what a user acts on.
* Metal (MPS) refuses float64 (``TypeError``) and autocast (``RuntimeError``), and some operators
  are missing. ``PYTORCH_ENABLE_MPS_FALLBACK=1`` turns those into a quiet CPU detour, but torch
  reads it ONCE, when ``import torch`` registers the MPS backend: set later it looks like it
  worked and changes nothing. So it is set before this prober imports torch on macOS, set for
  worker processes when Metal is selected, and ``fallback`` is reported True only when it was in
  the environment before torch was imported.
* A torch built with Metal on a Mac that cannot use it is a real and confusing state with
  several causes a user acts on differently, so each gets its own explanation.
* float64 and bfloat16 are MEASURED on the device with a two-element tensor when the prober
  selects it (``torch=None``), because both move with the torch release; an inspection of a given
  module (``inspect_torch``) allocates nothing and reports the backend's declared support.
* The backend's discovery (:func:`detect`, called from ``spacr_accel_backend_info``) only DETECTS:
  no allocation, no device-property query, no fallback flag left for workers. Discovery runs on
  the first ``ops.*`` call, ``gpu=False`` included, and a tensor allocated there would take a
  CUDA context (hundreds of MiB) on a shared card for a process that never uses it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import logging
import os
import platform
import re
import subprocess
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from types import ModuleType
from typing import Any, Final

from spacr_accel_core import BackendUnavailable, HostDevice, hookimpl
from spacr_accel_core.accelerator import (
    ENV_DEVICE,
    Accelerator,
    call_bounded,
    device_request,
    host_devices,
    parse_device,
)
from spacr_accel_core.toolkit import describe as _describe
from spacr_accel_core.toolkit import first_line as _first_line

logger = logging.getLogger(__name__)

FALLBACK_ENV: Final = "PYTORCH_ENABLE_MPS_FALLBACK"
"""torch's switch that sends operators Metal lacks to the CPU instead of raising."""

ANE: Final = "Apple Neural Engine (CoreML only)"

_FAMILIES: Final = frozenset({"cuda", "rocm", "mps", "xpu", "directml", "dml", "privateuseone"})
"""The device families ``SPACR_DEVICE`` may name for torch besides the CPU words."""

_INTEL_INTEGRATED: Final = ("iris", "uhd graphics", "hd graphics")
"""Intel's integrated GPU families as ``system_profiler`` spells them: the parts in Intel Macs that
no PyTorch backend supports at all. Matched on the name because torch reports nothing about a
device it refuses to open."""

_OS_QUERY_TIMEOUT: Final = 10.0

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


@dataclass(frozen=True)
class _Host:
    """The operating system facts the Metal paths depend on (a function so tests can fake a Mac).

    :param system: ``platform.system()``, e.g. ``"Darwin"``.
    :param machine: ``platform.machine()``, e.g. ``"arm64"`` or ``"x86_64"``.
    :param mac_release: ``platform.mac_ver()[0]`` (``"13.6.1"``), empty off macOS.
    """

    system: str
    machine: str
    mac_release: str


@lru_cache(maxsize=1)
def _host() -> _Host:
    system = platform.system()
    release = platform.mac_ver()[0] if system == "Darwin" else ""
    return _Host(system, platform.machine(), release)


def _truthy(value: str | None) -> bool:
    """How torch's ``c10::utils::check_env`` reads a flag: a non-zero number or a yes-word."""
    if value is None:
        return False
    text = value.strip().lower()
    if text in ("1", "on", "yes", "true", "y"):
        return True
    try:
        return int(text) != 0
    except ValueError:
        return False


# ---- importing torch ---------------------------------------------------------------------------


@dataclass
class _ImportState:
    """What this prober knows about the moment torch was imported."""

    fallback_at_import: bool | None = None  # None: not looked yet
    fallback_preset: bool = False  # this prober put FALLBACK_ENV into the environment itself


_IMPORT = _ImportState()


def _load_torch() -> ModuleType:
    return importlib.import_module("torch")


def _import_torch() -> Any:
    """torch, imported the way Metal needs it; raises :class:`BackendUnavailable` when it cannot be.

    On macOS the fallback flag is put in the environment BEFORE the import (torch reads it only
    then), unless the user set it either way; :func:`_settle_fallback` takes it back out if Metal
    is not selected after all. Any failure of the import (a missing wheel, a broken CUDA library,
    a ``SystemExit`` from a half-installed build) becomes the note the core shows.
    """
    loaded = sys.modules.get("torch")
    if loaded is not None:
        if _IMPORT.fallback_at_import is None:
            # Imported by someone else: the flag as it is now is the best evidence of how it was
            # then, and it is recorded before this prober sets it, so setting it cannot fake it.
            _IMPORT.fallback_at_import = _truthy(os.environ.get(FALLBACK_ENV))
        return loaded
    if _host().system == "Darwin" and FALLBACK_ENV not in os.environ:
        os.environ[FALLBACK_ENV] = "1"
        _IMPORT.fallback_preset = True
    if _IMPORT.fallback_at_import is None:  # torch registers its backends once per process
        _IMPORT.fallback_at_import = _truthy(os.environ.get(FALLBACK_ENV))
    try:
        return _load_torch()
    except ModuleNotFoundError as exc:
        _undo_preset()
        if exc.name == "torch":
            raise BackendUnavailable("PyTorch is not installed") from exc
        raise BackendUnavailable(f"PyTorch could not be imported ({_describe(exc)})") from exc
    except (Exception, SystemExit) as exc:  # a half-installed torch raises anything at import
        _undo_preset()
        raise BackendUnavailable(f"PyTorch could not be imported ({_describe(exc)})") from exc


def _undo_preset() -> None:
    if _IMPORT.fallback_preset:
        os.environ.pop(FALLBACK_ENV, None)
        _IMPORT.fallback_preset = False


# ---- the vendor paths --------------------------------------------------------------------------


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


def _cuda_or_rocm(torch: Any, device_names: bool, index: int = 0, *, fork_safe: bool = False,
                  hosts: Sequence[HostDevice] = ()) -> Accelerator | None:
    """NVIDIA, or AMD on Linux: both dispatch to ``cuda``.

    :param fork_safe: discovery's question: count devices through NVML, initialise nothing.
    :param hosts: the GPUs the operating system lists: a card torch does not see is reported
        found, not used, with the reason (a CPU-only build, a driver too old).
    """
    cuda = getattr(torch, "cuda", None)
    # ROCm builds set torch.version.hip and leave torch.version.cuda None. `version` is fetched
    # defensively: a partially built torch, or a stand-in implementing only the `cuda` namespace,
    # has none, and an AttributeError here would demote a working card to the CPU.
    version = getattr(torch, "version", None)
    hip = getattr(version, "hip", None)
    if cuda is None:
        return _unreachable_card(torch, hosts, "")
    available, said = _cuda_available(cuda, fork_safe)
    if not available:
        return _unreachable_card(torch, hosts, said)
    kind = "rocm" if hip else "cuda"
    device = f"cuda:{index}"
    if index:
        count = int(cuda.device_count())
        if index >= count:
            return Accelerator(kind=kind, device=device, label=device, usable=False,
                               note=f"there is no {device}: torch sees {count} device(s)")
    name = _device_name(cuda.get_device_name, index, "CUDA") if device_names else ""
    # Autocast and bfloat16 are asked where torch can say (both move with the release); the measured
    # answers (both True on CUDA and ROCm) stand where it cannot.
    autocast = _autocast_available(torch, "cuda", default=True)
    if hip:
        # ROCm is a full CUDA-shaped backend: double precision and autocast both work, which is
        # why it needs none of Metal's carve-outs.
        found = Accelerator(kind="rocm", device=device, label=f"{name or 'AMD GPU'} (AMD ROCm {hip})",
                            name=name, autocast=autocast)
    else:
        cuda_version = getattr(version, "cuda", None)
        if version is None:
            label = f"{name or 'GPU'} (CUDA)"  # cannot tell NVIDIA from ROCm without torch.version
        else:
            label = f"{name or 'NVIDIA GPU'} (NVIDIA CUDA{f' {cuda_version}' if cuda_version else ''})"
        found = Accelerator(kind="cuda", device=device, label=label, name=name, autocast=autocast,
                            bfloat16=_bf16_native(cuda) if device_names else True)
    if device_names:  # the architecture is a device-property query, like the name
        problem = _arch_problem(torch, cuda, index, name or found.label, bool(hip))
    elif fork_safe:  # discovery: the architecture from NVML or the KFD topology, no context
        problem = (_discovery_gfx_problem(torch, cuda, found.label) if hip
                   else _discovery_arch_problem(torch, cuda, found.label))
    else:
        problem = ""
    if problem:
        return replace(found, usable=False, note=problem)
    return found


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


# ---- a card torch cannot run on ------------------------------------------------------------------


def _torch_version(torch: Any) -> str:
    return str(getattr(torch, "__version__", "") or "unknown version")


def _cuda_from_driver(number: str) -> str:
    """``11040`` (what CUDA's driver API reports) as ``11.4``."""
    value = int(number)
    return f"{value // 1000}.{(value % 1000) // 10}"


def _unreachable_card(torch: Any, hosts: Sequence[HostDevice], said: str) -> Accelerator | None:
    """A card the operating system lists and torch does not see: found, not used, and why.

    Three real causes, each with its own fix: a CPU-only wheel (``2.13.0+cpu``: install the CUDA
    or ROCm build), a driver older than the wheel's CUDA (torch says "The NVIDIA driver on your
    system is too old (found version 11040)": update the driver, naming both versions), or a card
    torch is not shown (``CUDA_VISIBLE_DEVICES``, a driver that is not loaded).

    :param torch: the module that did not see the card.
    :param hosts: the GPUs the operating system lists.
    :param said: what torch warned while answering ``is_available()``.
    :returns: the card, detected and not usable; ``None`` when the OS lists none torch could drive.
    """
    version = getattr(torch, "version", None)
    cuda_build, hip = getattr(version, "cuda", None), getattr(version, "hip", None)
    wanted = ("AMD",) if hip else ("NVIDIA",) if cuda_build else ("NVIDIA", "AMD")
    card = next((h for h in hosts if h.kind == "gpu" and h.vendor in wanted
                 and not (h.vendor == "AMD" and _host().system != "Linux")), None)
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


def _torch_release(torch: Any) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", str(getattr(torch, "__version__", "")))
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def _mac_release(host: _Host) -> tuple[int, int]:
    parts = re.findall(r"\d+", host.mac_release)
    return (int(parts[0]), int(parts[1]) if len(parts) > 1 else 0) if parts else (0, 0)


def _metal(torch: Any, device_names: bool) -> Accelerator | None:
    """Apple Metal. Drives Apple Silicon AND the AMD cards in Intel Macs.

    THE MODULE'S ANSWER IS BELIEVED. ``is_available()`` True is Metal, on any host: a stand-in
    passed to ``inspect_torch`` is how spaCR exercises its Metal diagnosis on Linux CI, and a real
    torch never says True off macOS. The host only shapes the explanation of an UNAVAILABLE Metal:
    off macOS there is nothing to explain (no Metal is reported), on macOS the reasons differ.
    """
    backend = getattr(getattr(torch, "backends", None), "mps", None)
    if backend is None:
        return None
    host = _host()
    if not backend.is_available():
        if host.system != "Darwin":
            return None  # Metal exists only on macOS: its absence elsewhere needs no explanation
        gpu, note = _why_metal_is_unavailable(bool(backend.is_built()), host)
        return Accelerator(kind="mps", device="cpu", label=f"{gpu} (Apple Metal)", name=gpu,
                           usable=False, note=note)
    name = _metal_gpu_name(host.machine) if device_names else ""
    # bfloat16 came to Metal in torch 2.3 on macOS 14; this is only the DECLARED answer, which
    # the selecting path replaces with a measurement.
    bfloat16 = _torch_release(torch) >= (2, 3) and _mac_release(host) >= (14, 0)
    # Autocast on Metal raised before torch 2.5 and works since: asked where torch can say.
    return Accelerator(kind="mps", device="mps", label=f"{name or 'Metal GPU'} (Apple Metal)", name=name,
                       float64=False, autocast=_autocast_available(torch, "mps"), fallback=False,
                       bfloat16=bfloat16)


def _why_metal_is_unavailable(built: bool, host: _Host) -> tuple[str, str]:
    """``(GPU name, note)`` for a Mac whose torch cannot open a Metal device.

    DISTINCT ANSWERS, because the reader acts on each differently, and a generic "this system does
    not offer a Metal device" is simply false on an Intel Mac with Intel graphics: it drives its
    display with Metal, and torch still cannot use it.
    """
    gpu = _metal_gpu_name(host.machine)
    if not built:
        return (gpu, "this PyTorch was built without Metal (MPS) support; install the macOS wheel "
                     "from pytorch.org to use the GPU. Until then spaCR runs on the CPU.")
    release = _mac_release(host)
    # Asked first: on macOS 12.2 an Apple Silicon Mac lands here too, and "upgrade" is its answer.
    if release != (0, 0) and release < (12, 3):
        return (gpu, f"macOS {host.mac_release} is older than 12.3, where PyTorch's Metal (MPS) "
                     f"backend begins; upgrading macOS enables it. Until then spaCR runs on the CPU.")
    if host.machine in ("x86_64", "i386") and any(f in gpu.lower() for f in _INTEL_INTEGRATED):
        return (gpu, f"{gpu} is Intel integrated graphics in an Intel Mac, and no PyTorch backend "
                     "supports it: Apple's Metal (MPS) backend covers Apple Silicon and the AMD cards "
                     "Apple shipped in Intel Macs, and Intel's own torch.xpu has no macOS build. There "
                     "is NOTHING TO INSTALL OR CONFIGURE; spaCR runs on the CPU here, so run large "
                     "segmentation or training batches on a CUDA machine.")
    return (gpu, "PyTorch has Metal support but macOS offers it no Metal device (a virtual machine "
                 "or a CI runner without GPU access is the usual cause); running on the CPU.")


@lru_cache(maxsize=4)
def _metal_gpu_name(machine: str) -> str:
    """The GPU's marketing name on macOS ("AMD Radeon Pro 5300", "Apple M2 Pro"), or a generic.

    Worth one subprocess: the name is what the user sees on the box and in About This Mac, and a
    setup slide saying "MPS device" has told them nothing they can check. Apple Silicon asks
    ``sysctl`` (milliseconds); an Intel Mac needs ``system_profiler`` to name its graphics.
    """
    if _host().system != "Darwin":
        return "Metal GPU"
    try:
        if machine == "arm64":
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True,
                                 text=True, timeout=_OS_QUERY_TIMEOUT, check=False).stdout.strip()
            return out or "Apple GPU"
        out = subprocess.run(["system_profiler", "SPDisplaysDataType"], capture_output=True,
                             text=True, timeout=_OS_QUERY_TIMEOUT, check=False).stdout
        names = [line.split(":", 1)[1].strip() for line in out.splitlines() if "Chipset Model:" in line]
        # A dual-GPU MacBook lists Intel graphics first; Metal's default device is the discrete one.
        discrete = [n for n in names if not any(f in n.lower() for f in _INTEL_INTEGRATED)]
        return (discrete or names or ["Metal GPU"])[0]
    except Exception as exc:  # no tool, a timeout, a sandbox: the generic name will do
        logger.debug("could not read the Metal GPU name: %s", _describe(exc))
        return "Metal GPU"


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


_PATHS: Final = (
    ("CUDA/ROCm", _cuda_or_rocm),
    ("Metal", _metal),
    ("XPU", _xpu),
    ("DirectML", _directml),
)


# ---- choosing ---------------------------------------------------------------------------------


def _cpu(note: str) -> Accelerator:
    return Accelerator(kind="cpu", device="cpu", label="CPU", note=note)


def _forced(torch: Any, wanted: str, device_names: bool, include_cuda: bool,
            hosts: Sequence[HostDevice] = ()) -> Accelerator:
    """Honour ``SPACR_DEVICE``: the named device if torch can open it, else the CPU with a note.

    It picks WHICH device, it cannot conjure one: a device torch reports unavailable would only
    move the failure into every call site, so that answer is the CPU, saying why.
    """
    request = parse_device(wanted)
    wanted = request.text
    if request.cpu:
        return _cpu(f"forced by {ENV_DEVICE}={wanted}")
    family, index = request.family, request.index or 0
    if family is None or family not in _FAMILIES:
        return _cpu(f"{ENV_DEVICE}={wanted!r} names no device spacr-accel can drive (use cpu, "
                    "cuda[:N], mps, xpu[:N] or directml[:N]); running on the CPU")
    if family in ("cuda", "rocm") and not include_cuda:
        return _cpu(f"{ENV_DEVICE}={wanted} names CUDA/ROCm, which this inspection skips; running on the CPU")
    try:
        if family in ("cuda", "rocm"):
            answer = _cuda_or_rocm(torch, device_names, index, hosts=hosts)
        elif family == "mps":
            answer = _metal(torch, device_names) if index == 0 else None
        elif family == "xpu":
            answer = _xpu(torch, device_names, index)
        else:
            answer = _directml(torch, device_names, index)
    except Exception as exc:  # a driver that throws while being asked
        return _cpu(f"{ENV_DEVICE}={wanted}: probing it raised {_describe(exc)}; running on the CPU")
    if answer is None:
        return _cpu(f"{ENV_DEVICE}={wanted}: torch reports no such device here; running on the CPU")
    if not answer.usable:
        return _cpu(f"{ENV_DEVICE}={wanted}: {answer.note}")
    return answer


def _detect(torch: Any, device_names: bool, include_cuda: bool, *, fork_safe: bool = False,
            hosts: Sequence[HostDevice] = ()) -> Accelerator | None:
    """The first usable device in KINDS order, else the first detected one."""
    problems: list[str] = []
    unusable: Accelerator | None = None
    for what, path in _PATHS:
        if what == "CUDA/ROCm" and not include_cuda:
            continue
        ask = partial(_cuda_or_rocm, fork_safe=fork_safe, hosts=hosts) if what == "CUDA/ROCm" else path
        try:
            answer = ask(torch, device_names)
        except Exception as exc:  # a half-installed backend that throws while being ASKED
            logger.info("the %s probe raised %s", what, _describe(exc))
            problems.append(f"the {what} probe raised {_describe(exc)}")
            continue
        if answer is None:
            continue
        if answer.usable:
            return answer
        unusable = unusable or answer
    if unusable is not None:
        return replace(unusable, note="; ".join([unusable.note, *problems])) if problems else unusable
    if problems:
        raise BackendUnavailable("; ".join(problems))
    return None


def _measure_dtypes(torch: Any, found: Accelerator) -> Accelerator:
    """Ask the device what it accepts, rather than believing a table.

    A two-element zero tensor per dtype, on a device that already answered "available": cheap,
    and the difference between a capability matrix that ages and one that cannot. A probe that
    cannot even allocate leaves the declared value alone: the backend is answering strangely and
    guessing further would be worse than the conservative default it already carries.
    """

    def accepts(name: str) -> bool | None:
        """Probe whether the resolved device accepts one named torch dtype.

        :param name: torch dtype attribute name, such as ``"float64"`` or ``"bfloat16"``.
        :returns: True when a two-element tensor allocates on the device, False for the errors
            used by unsupported dtypes, or None when torch lacks the dtype, the device is out of
            memory, or the probe fails unexpectedly.
        """
        from ._runtime import is_out_of_memory  # imported here: kept off the plugin's import

        dtype = getattr(torch, name, None)
        if dtype is None:
            return None
        try:
            torch.zeros(2, dtype=dtype, device=found.device)
        except (TypeError, RuntimeError) as exc:
            # A full card raises out-of-memory (a RuntimeError subclass) for ANY dtype: that says
            # nothing about the dtype, so the declared value stands.
            return None if is_out_of_memory(exc, torch) else False
        except Exception:  # anything else is the backend misbehaving, not an answer
            return None
        return True

    float64 = accepts("float64")
    # A CUDA card already judged to EMULATE bfloat16 (a T4, a V100) would accept the tensor:
    # the allocation cannot tell emulation from native arithmetic, so it is not asked.
    bfloat16 = None if found.kind == "cuda" and not found.bfloat16 else accepts("bfloat16")
    return replace(found,
                   float64=found.float64 if float64 is None else float64,
                   bfloat16=found.bfloat16 if bfloat16 is None else bfloat16)


def _settle_fallback(found: Accelerator | None, selecting: bool) -> Accelerator | None:
    """Report the Metal fallback as in force only when it is; set it for workers when selecting."""
    if found is None or found.kind != "mps" or not found.usable:
        if selecting:
            _undo_preset()  # Metal was not selected: leave the environment as it was found
        return found
    now = _truthy(os.environ.get(FALLBACK_ENV))
    if not selecting:
        return replace(found, fallback=now)
    known = _IMPORT.fallback_at_import
    in_force = now if known is None else known  # None only when a caller bypassed _import_torch
    _IMPORT.fallback_preset = False  # selected: the flag stays, it is ours to keep now
    if not now:
        # Too late for this process (torch has read it), in time for every worker it starts.
        os.environ[FALLBACK_ENV] = "1"
        logger.info("%s set for worker processes; this one imported torch without it, so operators "
                    "Metal lacks will raise here (set it before importing torch)", FALLBACK_ENV)
    return replace(found, fallback=in_force)


def _find(torch: Any, device_names: bool, include_cuda: bool, *, fork_safe: bool = False,
          hosts: Sequence[HostDevice] = ()) -> Accelerator | None:
    """The device ``SPACR_DEVICE`` names (:func:`_forced`), else the best one detected (:func:`_detect`)."""
    wanted = device_request()
    if not wanted.auto:
        return _forced(torch, wanted.text, device_names, include_cuda, hosts)
    return _detect(torch, device_names, include_cuda, fork_safe=fork_safe, hosts=hosts)


# ---- usable means it runs ---------------------------------------------------------------------


def _run_kernel(torch: Any, device: str) -> None:
    """One tiny float32 kernel on ``device``, read back: what "usable" has to mean.

    ``.item()`` synchronises, so an asynchronous launch failure ("no kernel image is available",
    an illegal address) surfaces here rather than in the user's first segmentation.
    """
    values = torch.arange(4, dtype=torch.float32, device=device)
    total = float((values * 2.0 + 1.0).sum().item())
    if total != 16.0:
        raise RuntimeError(f"the check kernel computed {total!r} instead of 16.0")


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


def _kernel_check(torch: Any, found: Accelerator) -> Accelerator:
    """``found`` if a tiny kernel runs on it; else detected, not usable, with the error and the fix.

    Bounded like a probe (:func:`~spacr_accel_core.accelerator.call_bounded`): a kernel that hangs
    in a wedged driver makes the device unusable with a note instead of costing the whole walk.
    """
    try:
        call_bounded(partial(_run_kernel, torch, found.device), f"the kernel check on {found.device}")
    except Exception as exc:  # any failure of the kernel is the answer, not a crash
        line = _first_line(exc)
        logger.info("%s could not run a kernel: %s", found.device, line)
        return replace(found, usable=False,
                       note=f"the {found.name or found.label} could not run a kernel: {line}. "
                            f"Fix: {_kernel_fix(str(exc), found)}")
    return found


def _host_gpus() -> tuple[HostDevice, ...]:
    """The host inventory (OS and plugins) for the reports; empty if it cannot be had."""
    try:
        return host_devices()
    except Exception as exc:  # host_devices never raises; this keeps the prober's promise regardless
        logger.debug("host devices unavailable: %s", _describe(exc))
        return ()


def _no_node_answer(hosts: Sequence[HostDevice], why: str) -> Accelerator:
    """No GPU device node on Linux: a listed card is found-not-used, with what torch's build is.

    torch is NOT imported to say so (that costs a second and 200 MiB per process): its build is
    read from the installed wheel's metadata (``2.13.0+cpu``).
    """
    card = next((h for h in hosts if h.kind == "gpu" and h.vendor in ("NVIDIA", "AMD")), None)
    if card is None:
        raise BackendUnavailable(why)
    try:
        build = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        raise BackendUnavailable("PyTorch is not installed") from None
    kind = "rocm" if card.vendor == "AMD" else "cuda"
    if build.endswith("+cpu"):
        note = (f"this PyTorch {build} is a CPU-only build, so it cannot use the {card.name}; install "
                f"the {'ROCm' if kind == 'rocm' else 'CUDA'} build: {ROCM_WHEEL if kind == 'rocm' else CUDA_WHEEL}")
    else:
        driver = f"; its driver is {card.driver!r}" if card.driver else "; no driver is bound to it"
        note = (f"the {card.vendor} driver is not loaded, so no device node exists for the "
                f"{card.name}{driver}. Install the {card.vendor} driver")
    route = "AMD ROCm" if kind == "rocm" else "NVIDIA CUDA"
    return Accelerator(kind=kind, device="cpu", label=f"{card.name} ({route})", name=card.name,
                       usable=False, note=note)


# ---- the hooks ----------------------------------------------------------------------------------


@hookimpl
def spacr_accel_probe(torch: ModuleType | None, device_names: bool, include_cuda: bool) -> Accelerator | None:
    """Find the accelerator torch can drive here, or ``None`` when there is none.

    :param torch: the module to ask (an inspection: nothing is allocated, nothing is set in the
        environment), or ``None`` to import torch and select a device for this process (float64 and
        bfloat16 are then measured, and the Metal fallback flag is set).
    :param device_names: ``False`` makes no device-property query (names come back empty).
    :param include_cuda: ``False`` skips CUDA and ROCm.
    :returns: the device, a detected-but-unusable Metal, a CPU answer with a note when
        ``SPACR_DEVICE`` forces it, or ``None``.
    :raises BackendUnavailable: when torch cannot be imported, or a probe broke and nothing was
        found; the core shows the message as the CPU's note.
    """
    selecting = torch is None
    hosts = _host_gpus()
    if selecting and device_request().auto:
        from ._plugin import _no_device_node  # imported here: _plugin imports this module

        absent = _no_device_node()
        if absent is not None:  # no node, no device torch could open: never import torch to ask
            return _no_node_answer(hosts, absent)
    module = _import_torch() if torch is None else torch
    try:
        found = _find(module, device_names, include_cuda, hosts=hosts)
        if selecting and found is not None and found.usable and found.kind != "cpu":
            found = _kernel_check(module, found)
            if found.usable:  # a device that cannot run a kernel has no dtypes worth measuring
                found = _measure_dtypes(module, found)
    except BaseException:
        if selecting:
            _undo_preset()
        raise
    return _settle_fallback(found, selecting)


def detect(include_cuda: bool = True) -> Accelerator | None:
    """The device torch would select here, DETECTED only: for the backend's discovery.

    Imports torch (the Metal flag preset first, as :func:`spacr_accel_probe` does, since torch
    reads it only at import), then asks availability and nothing more: no device names, no dtype
    measurement (:func:`_measure_dtypes` allocates, which on CUDA creates a context), and the
    fallback flag is not set for workers; that is the selecting path's decision, taken by
    ``resolve()`` when a primitive first runs. A preset made for the import is taken back unless
    a usable Metal was found (``resolve()`` then keeps or drops it).

    :raises BackendUnavailable: when torch cannot be imported, or a probe broke and nothing was found.
    """
    module = _import_torch()
    try:
        found = _find(module, False, include_cuda, fork_safe=True)
    except BaseException:
        _undo_preset()
        raise
    if found is None or found.kind != "mps" or not found.usable:
        _undo_preset()
    return found


@hookimpl
def spacr_accel_neural_engines() -> list[str]:
    """The Apple Neural Engine on Apple Silicon: found, never selected (CoreML is its only road)."""
    host = _host()
    return [ANE] if host.system == "Darwin" and host.machine == "arm64" else []


@hookimpl
def spacr_accel_empty_cache(torch: ModuleType | None, found: Accelerator) -> str | None:
    """Release torch's cached device memory for ``found``; the call made, or ``None``.

    Does not import torch: when nobody has, nothing has been cached.
    """
    from ._runtime import empty_cache  # imported here: kept off the plugin's import

    module = torch if torch is not None else sys.modules.get("torch")
    if not found.usable or module is None:
        return None
    return empty_cache(module, found.kind)
