"""Frozen records exchanged between the core, its plugins and its users."""

from __future__ import annotations

import importlib
import logging
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Final, Literal

logger = logging.getLogger(__name__)

Status = Literal["ok", "unusable", "faulty", "blocked", "incompatible", "duplicate"]


@dataclass(frozen=True)
class BackendInfo:
    """A backend's answer to ``spacr_accel_backend_info``: can it run here now, and on what.

    What the plugin IS (name, priority, ``accelerated``) is its :class:`~spacr_accel_core.Declaration`;
    this is only the lazy, per-process answer about this machine.

    :param usable: it can serve automatic dispatch here, now. A plugin that is not usable is
        skipped by automatic dispatch but may still be forced with ``backend=``.
    :param note: why it is not usable (empty when it is), or what it will run on.
    """

    usable: bool = True
    note: str = ""


@dataclass(frozen=True)
class PluginStatus:
    """One row of :func:`spacr_accel_core.plugins`: a plugin as the registry sees it.

    :param name: the plugin's (entry point's) name.
    :param priority: its priority, or ``0.0`` when it did not say.
    :param accelerated: whether it needs a device.
    :param distribution: the installed distribution it came from, or ``"(in-process)"``.
    :param version: that distribution's version, or ``""``.
    :param status: ``ok``, ``unusable``, ``faulty`` (failed to load, broke the contract),
        ``blocked`` (named in ``SPACR_ACCEL_DISABLE``; never imported), ``incompatible``
        (built for another plugin API) or ``duplicate`` (a second entry point with a taken name).
    :param reason: why it is not ``ok``; empty otherwise.
    :param operations: the primitives it implements.
    :param faults: operations it broke at run time, with what it did; those are skipped
        for the rest of the process (until :func:`spacr_accel_core.refresh`).
    """

    name: str
    priority: float
    accelerated: bool
    distribution: str
    version: str
    status: Status
    reason: str = ""
    operations: tuple[str, ...] = ()
    faults: tuple[tuple[str, str], ...] = field(default=())

    @property
    def usable(self) -> bool:
        """Whether automatic dispatch will consider it."""
        return self.status == "ok"


@dataclass(frozen=True)
class Dispatch:
    """Which backend served a call, and why the ones ranked above it did not.

    :param operation: ``maximum_filter``, ``matmul`` or ``nearest_neighbours``.
    :param backend: the plugin that answered; ``"core"`` when the answer needed no backend
        (an empty input, a window of one pixel).
    :param declined: ``(plugin, reason)`` for every backend ahead of it in the order in force:
        first those tried and declined (or found unusable when asked), in the order they were
        tried, then those passed over without a call (unusable, refused by ``gpu=False``,
        quarantined), best first.
    :param waiting: the backends among ``declined`` that declined only because they were still
        building what they build lazily (:class:`~spacr_accel_core.toolkit.BackendWarming`: numba
        compiling its kernels in the background): a call served lower down the order for now,
        by a backend that would have lost to them once they are ready.
    """

    operation: str
    backend: str
    declined: tuple[tuple[str, str], ...] = ()
    waiting: tuple[str, ...] = ()


@dataclass(frozen=True)
class WarmState:
    """How far a backend that builds lazily has got on this machine (``spacr_accel_warm_state``):
    what ``spacr-accel warm`` draws and the doctor says, read without building anything.

    :param done: the kernels (or other pieces) built and ready to load.
    :param total: all it builds.
    :param building: whether a build is running now (in this process, or in another on this
        machine: numba's detached compiler).
    :param note: one line a person may need (where the cache is, or why it cannot be kept).
    """

    done: int
    total: int
    building: bool = False
    note: str = ""

    @property
    def words(self) -> str:
        """``ready``, ``compiling (k of n)``, or ``not compiled yet (`spacr-accel warm`)`` (with
        ``k of n cached`` where some are)."""
        if self.total and self.done >= self.total:
            return "ready"
        if self.building:
            return f"compiling ({self.done} of {self.total})"
        if self.done:
            return f"not compiled yet ({self.done} of {self.total} cached; `spacr-accel warm`)"
        return "not compiled yet (`spacr-accel warm`)"


KINDS: Final[tuple[str, ...]] = ("cuda", "rocm", "mps", "xpu", "directml", "cpu")
"""Kinds in the order they are preferred. CUDA first because it is what most users have and what
the project's numbers were taken on; CPU last because it always answers."""


@dataclass(frozen=True)
class Accelerator:
    """What spaCR will compute on, and what it can be told about it.

    :param kind: one of :data:`KINDS`. ``rocm`` is reported distinctly from ``cuda`` even though
        both dispatch to ``device="cuda"``, because the only thing a user can act on is the true
        vendor.
    :param device: the string to hand ``torch.device``.
    :param label: human text for the setup slide and the doctor.
    :param name: the hardware's undecorated marketing name ("AMD Radeon Pro 5300", not
        "AMD Radeon Pro 5300 (Apple Metal)"): what the user recognises from the box, while the
        route in ``label`` only matters where it is surprising. Empty when no name was discovered.
    :param detected: the hardware is present.
    :param usable: spaCR will actually dispatch to it. Never true unless ``detected``; false for
        accelerators with no torch device.
    :param note: why it is not usable, when it is not; for the CPU, why no accelerator was chosen.
        Empty otherwise.
    :param float64: the device accepts double precision.
    :param autocast: ``torch.autocast`` accepts this device type.
    :param fallback: missing operators silently run on the CPU instead of raising, because the
        backend's fallback flag was set in time for torch to read it.
    :param bfloat16: the device accepts ``torch.bfloat16``. PROBED rather than assumed from the
        backend name, because it is the one capability that moves with the torch version: Metal
        gained it after 2.2, and 2.2.2 is the last x86-64 macOS wheel, so the same backend answers
        differently on an Intel Mac and an Apple Silicon one. Cellpose's cpsam loads its weights in
        bfloat16 by default, so a wrong answer here is a TypeError at model construction.
    """

    kind: str
    device: str
    label: str
    name: str = ""
    detected: bool = True
    usable: bool = True
    note: str = ""
    float64: bool = True
    autocast: bool = True
    fallback: bool = False
    bfloat16: bool = True

    @property
    def is_gpu(self) -> bool:
        """Is there a usable non-CPU device.

        THE QUESTION MOST CALL SITES ACTUALLY MEANT when they wrote ``torch.cuda.is_available()``.
        """
        return self.usable and self.kind != "cpu"

    @property
    def is_cuda(self) -> bool:
        """Is this genuinely NVIDIA CUDA.

        Narrower than :attr:`is_gpu` and deliberately so: anything reading ``nvidia-smi``, a CUDA
        version, or NVIDIA-specific memory interfaces wants this one and would be wrong on ROCm.
        """
        return self.usable and self.kind == "cuda"

    @property
    def torch_device(self) -> Any:
        """A ``torch.device`` for :attr:`device`, or the CPU if torch is missing entirely.

        The one place the core touches torch, and only when asked: without torch there is no
        ``torch.device`` to build, so the plain string ``"cpu"`` is returned (which torch APIs and
        Cellpose accept wherever a device is expected). Never raises.
        """
        torch = _loaded_torch()
        if torch is None:
            return "cpu"
        try:
            return torch.device(self.device)
        except Exception:  # a device string this torch cannot parse: the CPU still works
            logger.debug("torch.device(%r) failed; answering the CPU", self.device, exc_info=True)
            try:
                return torch.device("cpu")
            except Exception:  # a stand-in or broken torch without a working device()
                return "cpu"


def _loaded_torch() -> Any:
    """torch if it is (or can be) imported, else None. Only for :attr:`Accelerator.torch_device`."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch
    try:
        return importlib.import_module("torch")
    except BaseException:  # a half-installed torch can raise anything, SystemExit included
        return None


HOST_DEVICE_KINDS: Final[tuple[str, ...]] = ("gpu", "npu")

_VENDOR_NAMES: Final[dict[str, str]] = {
    "nvidia": "NVIDIA",
    "amd": "AMD", "advanced micro devices": "AMD", "ati": "AMD", "ati technologies": "AMD",
    "intel": "Intel",
    "apple": "Apple",
    "qualcomm": "Qualcomm", "qualcomm technologies": "Qualcomm",
    "google": "Google",
    "tenstorrent": "Tenstorrent",
    "amazon": "Amazon", "amazon com": "Amazon",
    "habana": "Habana", "habana labs": "Habana",
}
"""Makers of compute silicon by the words their names reduce to (:func:`canonical_vendor`)."""

_CORPORATE: Final = re.compile(r"\b(corporation|corp|incorporated|inc|ltd|limited|co|llc|gmbh|ag)\b")


def canonical_vendor(vendor: str) -> str:
    """The maker's name as this project spells it: ``"NVIDIA"``, ``"AMD"``, ``"Intel"``, ...

    Vendors are written many ways in the wild (``"nvidia"``, ``"NVIDIA Corporation"``,
    ``"Advanced Micro Devices, Inc."``, ``"amd"``); every check that decides which wheel or driver a
    user needs compares the canonical name, so it is settled once, when a record is made. A maker
    not known here keeps its own spelling (stripped).

    :param vendor: the name as the source wrote it.
    """
    words = _CORPORATE.sub(" ", re.sub(r"[^a-z0-9]+", " ", vendor.lower()))
    return _VENDOR_NAMES.get(" ".join(words.split()), vendor.strip())
"""What a :class:`HostDevice` is: a graphics processor, or a neural processing unit."""


@dataclass(frozen=True)
class HostDevice:
    """A piece of compute silicon the operating system lists, found without any vendor library.

    "Detected" comes from these records, "usable" from the framework: a card the OS lists that
    torch cannot reach (a CPU-only wheel, a driver too old) is reported found, not used, instead
    of leaving the machine looking GPU-less. Gathered from every ``spacr_accel_host_devices`` hook
    (the core's own OS inventory is one of them); a third party, or a test, adds silicon there.

    :param vendor: the maker as a user names it (``"NVIDIA"``, ``"AMD"``, ``"Intel"``,
        ``"Apple"``, ``"Qualcomm"``): what decides which wheel or driver to install. Any spelling
        of a known maker (``"nvidia"``, ``"Advanced Micro Devices, Inc."``) is kept as the canonical
        name (:func:`canonical_vendor`), so every comparison with it is exact.
    :param name: the marketing name when the OS knows it (``"NVIDIA GeForce RTX 4090"``), else a
        generic one with the PCI id, so a user can still look it up.
    :param kind: ``"gpu"`` or ``"npu"`` (:data:`HOST_DEVICE_KINDS`): an NPU is never a torch device.
    :param pci_id: ``"vendor:device"`` in hex (``"10de:2684"``), empty where the OS gives none.
    :param address: where the OS lists it (a PCI address such as ``"0000:01:00.0"``); empty if none.
    :param driver: the kernel driver bound to it (``"nvidia"``, ``"amdgpu"``, ``"nouveau"``), empty
        when none is: the difference between "install a driver" and "install a wheel".
    :param driver_version: that driver's version where the OS says (``"550.54.14"``), else empty.
    :param memory_total: device memory in bytes where the OS reports it without a vendor library
        (AMD's ``mem_info_vram_total``); ``None`` when unknown.
    :param source: what listed it (``"sysfs"``, ``"system_profiler"``, ``"registry"``, or a
        plugin's own word), so a wrong entry can be traced.
    """

    vendor: str
    name: str
    kind: str = "gpu"
    pci_id: str = ""
    address: str = ""
    driver: str = ""
    driver_version: str = ""
    memory_total: int | None = None
    source: str = ""

    def __post_init__(self) -> None:
        for attribute in ("vendor", "name", "kind", "pci_id", "address", "driver", "driver_version", "source"):
            if not isinstance(getattr(self, attribute), str):
                raise TypeError(f"HostDevice {attribute} must be a str, not "
                                f"{type(getattr(self, attribute)).__name__}")
        if not self.vendor.strip() or not self.name.strip():
            raise ValueError("HostDevice vendor and name must not be empty")
        object.__setattr__(self, "vendor", canonical_vendor(self.vendor))  # frozen: settled once, here
        if self.kind not in HOST_DEVICE_KINDS:
            raise ValueError(f"HostDevice kind must be one of {HOST_DEVICE_KINDS}, not {self.kind!r}")
        if self.memory_total is not None and (isinstance(self.memory_total, bool)
                                              or not isinstance(self.memory_total, int)):
            raise TypeError("HostDevice memory_total must be an int number of bytes or None")
