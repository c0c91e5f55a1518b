"""The operating system's inventory of GPUs and NPUs, read without any vendor library.

WHY THE OS AND NOT THE FRAMEWORK. torch answers "no GPU" for a dozen reasons that are not "there is
no GPU": a CPU-only wheel beside an NVIDIA card, a driver older than the wheel's CUDA, a Radeon the
ROCm wheel has no kernels for. A report built only from torch then tells a biologist with a 4090
that the machine has none, and the fix is never named. So what silicon is PRESENT is read from the
operating system ("detected"), and the framework only says whether it RUNS ("usable").

WHERE EACH OS KEEPS IT, cheapest first:

* Linux: ``/sys/bus/pci/devices/*`` with PCI class ``0x03xxxx`` (display controllers) or
  ``0x12xxxx`` (processing accelerators, where NPUs and some compute cards sit), the vendor id, the
  bound driver (``driver`` link) and, for AMD, ``mem_info_vram_total``. Names come from
  ``/proc/driver/nvidia/gpus/*/information`` for NVIDIA and the ``pci.ids`` database when installed.
  The NVIDIA driver's version is in ``/proc/driver/nvidia/version``. A machine with no such device
  costs one directory listing and a few small reads (well under a millisecond).
* macOS: ``system_profiler SPDisplaysDataType`` (Intel Macs' AMD and Intel graphics, the Apple GPU).
* Windows: the display adapters' class key in the registry (``DriverDesc``, ``ProviderName``,
  ``DriverVersion``), and the compute-accelerator class, where the Qualcomm Hexagon NPU of a
  Windows-on-ARM laptop is listed. The registry is read directly: PowerShell would cost a second.

NEVER RAISES, NEVER INITIALISES A DEVICE: every reader returns what it could read, and a source
that fails contributes nothing (logged at DEBUG).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Final

from ..contract._records import HostDevice

logger = logging.getLogger(__name__)

VENDORS: Final[dict[str, str]] = {
    "10de": "NVIDIA",
    "1002": "AMD",
    "1022": "AMD",
    "8086": "Intel",
    "106b": "Apple",
    "17cb": "Qualcomm",
    "5143": "Qualcomm",
    "1ae0": "Google",
    "1e52": "Tenstorrent",
    "1d0f": "Amazon",
    "1cdc": "Habana",
    "1da3": "Habana",
}
"""PCI vendor ids of the makers of compute silicon, as their users name them."""

_IGNORED_VENDORS: Final = frozenset({"1af4", "1234", "15ad", "1414", "80ee", "1b36", "1013", "102b", "1a03"})
"""Virtual and server-management display adapters (virtio, QEMU, VMware, Hyper-V, VirtualBox,
Red Hat, Cirrus, Matrox, ASPEED BMCs): a console, never compute silicon a user could install for."""

SYSFS_PCI: Final = Path("/sys/bus/pci/devices")
PROC_NVIDIA: Final = Path("/proc/driver/nvidia")
PCI_IDS: Final = (Path("/usr/share/hwdata/pci.ids"), Path("/usr/share/misc/pci.ids"),
                  Path("/usr/share/pci.ids"))

_NVIDIA_VERSION: Final = re.compile(r"Kernel Module\s+(?:for\s+\S+\s+)?([0-9][0-9.]+)")
_OS_QUERY_TIMEOUT: Final = 10.0

# Windows device-setup classes: display adapters, and compute accelerators (NPUs).
_WINDOWS_CLASSES: Final = (
    ("{4d36e968-e325-11ce-bfc1-08002be10318}", "gpu"),
    ("{f01a9d53-3ff6-48d2-9f97-c8a7004be10c}", "npu"),
)
_WINDOWS_SOFTWARE: Final = ("basic display", "basic render", "remote display", "hyper-v", "parsec",
                            "virtual", "indirect display")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def _pci_kind(pci_class: str) -> str | None:
    """``gpu`` for a display controller (class 0x03), ``npu`` for a processing accelerator (0x12).

    :param pci_class: the sysfs ``class`` file, e.g. ``"0x030000"``.
    """
    text = pci_class.lower().removeprefix("0x")
    if text.startswith("03"):
        return "gpu"
    if text.startswith("12"):
        return "npu"
    return None


def pci_name(vendor_id: str, device_id: str, databases: Iterable[Path] = PCI_IDS) -> str:
    """The device's name from the ``pci.ids`` database, or ``""``.

    Read line by line and left at the end of the vendor's block, so even a large database costs a
    few milliseconds, and only on a machine that has a device to name.

    :param vendor_id: four lower-case hex digits, e.g. ``"10de"``.
    :param device_id: four lower-case hex digits, e.g. ``"2684"``.
    :param databases: where to look, first found wins (a test passes its own file).
    """
    for database in databases:
        try:
            with database.open(encoding="utf-8", errors="replace") as lines:
                in_vendor = False
                for line in lines:
                    if line.startswith("#") or not line.strip():
                        continue
                    if not line.startswith("\t"):
                        if in_vendor:
                            return ""
                        in_vendor = line[:4].lower() == vendor_id
                    elif in_vendor and not line.startswith("\t\t") and line[1:5].lower() == device_id:
                        name = line[5:].strip()
                        # "AD102 [GeForce RTX 4090]": the bracketed part is the marketing name.
                        bracket = re.search(r"\[([^\]]+)\]", name)
                        return bracket.group(1) if bracket else name
            return ""
        except OSError:
            continue
    return ""


def _nvidia_names(proc: Path) -> dict[str, str]:
    """``{pci address: model}`` from the NVIDIA driver's own ``/proc`` files."""
    names: dict[str, str] = {}
    gpus = proc / "gpus"
    try:
        entries = sorted(gpus.iterdir())
    except OSError:
        return names
    for entry in entries:
        info = _read(entry / "information")
        model = re.search(r"^Model:\s*(.+)$", info, re.MULTILINE)
        if model:
            names[entry.name.lower()] = model.group(1).strip()
    return names


def nvidia_driver_version(proc: Path = PROC_NVIDIA) -> str:
    """The loaded NVIDIA kernel driver's version (``"550.54.14"``), or ``""``.

    :param proc: the driver's ``/proc`` directory (a test passes its own).
    """
    match = _NVIDIA_VERSION.search(_read(proc / "version"))
    return match.group(1).rstrip(".") if match else ""


def linux_devices(root: Path = SYSFS_PCI, proc: Path = PROC_NVIDIA,
                  databases: Iterable[Path] = PCI_IDS) -> list[HostDevice]:
    """GPUs and NPUs on the PCI bus, from sysfs.

    :param root: the sysfs PCI devices directory (a test builds a fake one).
    :param proc: the NVIDIA driver's ``/proc`` directory, for names and the driver version.
    :param databases: the ``pci.ids`` files to name other devices from.
    """
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return []
    found: list[HostDevice] = []
    nvidia: dict[str, str] | None = None
    for entry in entries:
        kind = _pci_kind(_read(entry / "class"))
        if kind is None:
            continue
        vendor_id = _read(entry / "vendor").lower().removeprefix("0x")
        if vendor_id in _IGNORED_VENDORS:
            continue
        device_id = _read(entry / "device").lower().removeprefix("0x")
        vendor = VENDORS.get(vendor_id, f"PCI vendor {vendor_id}")
        try:
            driver = os.path.basename(os.readlink(entry / "driver"))
        except OSError:
            driver = ""
        name = ""
        driver_version = ""
        if vendor_id == "10de":
            if nvidia is None:
                nvidia = _nvidia_names(proc)
            name = nvidia.get(entry.name.lower(), "")
            driver_version = nvidia_driver_version(proc) if driver == "nvidia" else ""
        elif driver:
            driver_version = _read(entry / "driver" / "module" / "version")
        name = name or pci_name(vendor_id, device_id, databases)
        if name and not name.lower().startswith(vendor.lower()):
            name = f"{vendor} {name}"
        vram = _read(entry / "mem_info_vram_total")
        found.append(HostDevice(
            vendor=vendor,
            name=name or f"{vendor} {'GPU' if kind == 'gpu' else 'accelerator'} [{vendor_id}:{device_id}]",
            kind=kind, pci_id=f"{vendor_id}:{device_id}", address=entry.name, driver=driver,
            driver_version=driver_version, memory_total=int(vram) if vram.isdigit() else None,
            source="sysfs"))
    return found


def parse_system_profiler(text: str) -> list[HostDevice]:
    """The GPUs in ``system_profiler SPDisplaysDataType`` output.

    :param text: the command's plain-text output.
    """
    found: list[HostDevice] = []
    model = vendor = ""

    def flush() -> None:
        if model:
            maker = vendor or next((v for v in ("Apple", "AMD", "Intel", "NVIDIA") if v.lower() in model.lower()),
                                   "Apple")
            found.append(HostDevice(vendor=maker, name=model, source="system_profiler"))

    for line in text.splitlines():
        key, _, value = line.strip().partition(":")
        value = value.strip()
        if key == "Chipset Model":
            flush()
            model, vendor = value, ""
        elif key == "Vendor" and model:
            vendor = next((v for v in ("Apple", "AMD", "Intel", "NVIDIA") if v.lower() in value.lower()
                           or (v == "AMD" and "ati" in value.lower())), value.split("(")[0].strip())
    flush()
    return found


def mac_devices(run: Callable[[list[str]], str] | None = None) -> list[HostDevice]:
    """The Mac's GPUs, from ``system_profiler``.

    :param run: runs a command and returns its output (a test passes canned output).
    """
    runner = run or _run
    return parse_system_profiler(runner(["system_profiler", "SPDisplaysDataType"]))


def _run(command: list[str]) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=_OS_QUERY_TIMEOUT,
                              check=False).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        logger.debug("%s failed: %s", command[0], exc)
        return ""


RegistryEntries = Callable[[str], Iterable[dict[str, str]]]
"""Reads one Windows device-setup class: each instance's values (``DriverDesc``, ...)."""


def windows_devices(read_class: RegistryEntries | None = None) -> list[HostDevice]:
    """Display adapters and compute accelerators (the Hexagon NPU) from the Windows registry.

    :param read_class: reads the instances of one device-setup class GUID (a test passes a fake).
    """
    reader = read_class or _windows_class
    found: list[HostDevice] = []
    for guid, listed_as in _WINDOWS_CLASSES:
        for values in reader(guid):
            name = values.get("DriverDesc", "").strip()
            if not name or any(word in name.lower() for word in _WINDOWS_SOFTWARE):
                continue
            match = re.search(r"VEN_([0-9A-Fa-f]{4})&DEV_([0-9A-Fa-f]{4})", values.get("MatchingDeviceId", ""))
            vendor_id = match.group(1).lower() if match else ""
            provider = values.get("ProviderName", "").strip()
            vendor = VENDORS.get(vendor_id) or next(
                (v for v in ("NVIDIA", "AMD", "Intel", "Qualcomm") if v.lower() in f"{provider} {name}".lower()),
                provider or "unknown")
            kind = "npu" if "hexagon" in name.lower() or "npu" in name.lower() else listed_as
            found.append(HostDevice(
                vendor=vendor, name=name, kind=kind,
                pci_id=f"{vendor_id}:{match.group(2).lower()}" if match else "",
                driver_version=values.get("DriverVersion", "").strip(), source="registry"))
    return found


def _windows_class(guid: str) -> Iterator[dict[str, str]]:  # pragma: no cover - Windows only
    import winreg  # type: ignore[import-not-found,unused-ignore]  # Windows only

    path = rf"SYSTEM\CurrentControlSet\Control\Class\{guid}"
    try:
        key = winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, path)  # type: ignore[attr-defined,unused-ignore]  # winreg's functions are typed on Windows alone, where the ignore is unused
    except OSError:
        return
    with key:
        index = 0
        while True:
            try:
                sub = winreg.EnumKey(key, index)  # type: ignore[attr-defined,unused-ignore]  # winreg's functions are typed on Windows alone, where the ignore is unused
            except OSError:
                return
            index += 1
            if not sub.isdigit():
                continue
            values: dict[str, str] = {}
            try:
                with winreg.OpenKey(key, sub) as instance:  # type: ignore[attr-defined,unused-ignore]  # winreg's functions are typed on Windows alone, where the ignore is unused
                    for value in ("DriverDesc", "ProviderName", "DriverVersion", "MatchingDeviceId"):
                        with contextlib.suppress(OSError):
                            values[value] = str(winreg.QueryValueEx(instance, value)[0])  # type: ignore[attr-defined,unused-ignore]  # winreg's functions are typed on Windows alone, where the ignore is unused
            except OSError:
                continue
            yield values


def os_devices() -> list[HostDevice]:
    """This machine's GPUs and NPUs as its operating system lists them. Never raises."""
    system: str = sys.platform  # a plain str: each branch is checked on every platform
    try:
        if system.startswith("linux"):
            return linux_devices()
        if system == "darwin":
            return mac_devices()
        if system == "win32":
            return windows_devices()
    except Exception as exc:  # an OS answering strangely: the inventory is a courtesy
        logger.debug("could not list the host devices: %s", exc)
    return []
