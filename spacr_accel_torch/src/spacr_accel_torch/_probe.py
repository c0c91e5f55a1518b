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
import logging
import os
import platform
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from types import ModuleType
from typing import Any, Final

from spacr_accel_core import BackendUnavailable, HostDevice, hookimpl
from spacr_accel_core.toolkit import (
    ENV_DEVICE,
    Accelerator,
    call_bounded,
    device_request,
    host_devices,
    parse_device,
)
from spacr_accel_core.toolkit import describe as _describe
from spacr_accel_core.toolkit import first_line as _first_line

from . import _nodes
from ._arch import (
    _arch_problem,
    _autocast_available,
    _bf16_native,
    _cuda_available,
    _device_name,
    _directml,
    _discovery_arch_problem,
    _discovery_gfx_problem,
    _kernel_fix,
    _unreachable_card,
    _xpu,
)
from ._settings import MPS_FALLBACK

logger = logging.getLogger(__name__)

FALLBACK_ENV: Final = MPS_FALLBACK.environment
"""torch's switch that sends operators Metal lacks to the CPU instead of raising."""

ANE: Final = "Apple Neural Engine (CoreML only)"

_FAMILIES: Final = frozenset({"cuda", "rocm", "mps", "xpu", "directml", "dml", "privateuseone"})
"""The device families ``SPACR_DEVICE`` may name for torch besides the CPU words."""

_INTEL_INTEGRATED: Final = ("iris", "uhd graphics", "hd graphics")
"""Intel's integrated GPU families as ``system_profiler`` spells them: the parts in Intel Macs that
no PyTorch backend supports at all. Matched on the name because torch reports nothing about a
device it refuses to open."""

_OS_QUERY_TIMEOUT: Final = 10.0

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
        return _unreachable_card(torch, hosts, "", _host().system)
    available, said = _cuda_available(cuda, fork_safe)
    if not available:
        return _unreachable_card(torch, hosts, said, _host().system)
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

        absent = _nodes._no_device_node()
        if absent is not None:  # no node, no device torch could open: never import torch to ask
            return _nodes._no_node_answer(hosts, absent)
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
