"""The operating system's inventory of GPUs and NPUs, and the ``spacr_accel_host_devices`` hook."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from spacr_accel_core import HostDevice, accelerator, hookimpl
from spacr_accel_core.devices import _host

Plug = Any

PCI_IDS = """\
# a tiny pci.ids
10de  NVIDIA Corporation
\t2684  AD102 [GeForce RTX 4090]
\t\t10de 16f1  a subsystem line, never a device
1002  Advanced Micro Devices, Inc. [AMD/ATI]
\t73ff  Navi 23 [Radeon RX 6600/6600 XT/6600M]
8086  Intel Corporation
\t7d1d  Meteor Lake NPU
"""


def pci_device(root: Path, address: str, pci_class: str, vendor: str, device: str, driver: str = "",
               **extra: str) -> Path:
    entry = root / "devices" / address
    entry.mkdir(parents=True)
    for name, value in (("class", pci_class), ("vendor", vendor), ("device", device), *extra.items()):
        (entry / name).write_text(value + "\n")
    if driver:
        target = root / "drivers" / driver
        (target / "module").mkdir(parents=True, exist_ok=True)
        (target / "module" / "version").write_text("6.7.0\n")
        os.symlink(target, entry / "driver")
    return entry


@pytest.fixture
def sysfs(tmp_path: Path) -> dict[str, Path]:
    """A sysfs with an RTX 4090 on the NVIDIA driver, an RX 6600 on amdgpu, an Intel NPU, a
    virtio console, and a network card."""
    root = tmp_path / "sys"
    pci_device(root, "0000:01:00.0", "0x030000", "0x10de", "0x2684", "nvidia")
    pci_device(root, "0000:03:00.0", "0x030000", "0x1002", "0x73ff", "amdgpu",
               mem_info_vram_total=str(8 * 2**30))
    pci_device(root, "0000:00:0b.0", "0x120000", "0x8086", "0x7d1d", "intel_vpu")
    pci_device(root, "0000:00:02.0", "0x030000", "0x1af4", "0x1050", "virtio-pci")
    pci_device(root, "0000:00:03.0", "0x020000", "0x8086", "0x15f3", "igc")
    proc = tmp_path / "nvidia"
    (proc / "gpus" / "0000:01:00.0").mkdir(parents=True)
    (proc / "gpus" / "0000:01:00.0" / "information").write_text(
        "Model: \t\t NVIDIA GeForce RTX 4090\nIRQ:   \t\t 150\nBus Location: \t 0000:01:00.0\n")
    (proc / "version").write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
    ids = tmp_path / "pci.ids"
    ids.write_text(PCI_IDS)
    return {"root": root / "devices", "proc": proc, "ids": ids}


def test_linux_lists_display_and_processing_controllers(sysfs: dict[str, Path]) -> None:
    found = _host.linux_devices(sysfs["root"], sysfs["proc"], [sysfs["ids"]])
    by_address = {d.address: d for d in found}
    assert set(by_address) == {"0000:01:00.0", "0000:03:00.0", "0000:00:0b.0"}  # no virtio, no NIC
    nvidia = by_address["0000:01:00.0"]
    assert (nvidia.vendor, nvidia.name, nvidia.kind, nvidia.pci_id) == (
        "NVIDIA", "NVIDIA GeForce RTX 4090", "gpu", "10de:2684")
    assert (nvidia.driver, nvidia.driver_version, nvidia.source) == ("nvidia", "550.54.14", "sysfs")
    amd = by_address["0000:03:00.0"]
    assert (amd.vendor, amd.name, amd.driver, amd.memory_total) == (
        "AMD", "AMD Radeon RX 6600/6600 XT/6600M", "amdgpu", 8 * 2**30)
    npu = by_address["0000:00:0b.0"]
    assert (npu.vendor, npu.kind, npu.name) == ("Intel", "npu", "Intel Meteor Lake NPU")


def test_a_device_the_database_does_not_know_keeps_its_pci_id(tmp_path: Path) -> None:
    root = tmp_path / "sys"
    pci_device(root, "0000:05:00.0", "0x030200", "0x10de", "0x2b85")
    (device,) = _host.linux_devices(root / "devices", tmp_path / "none", [tmp_path / "missing.ids"])
    assert device.name == "NVIDIA GPU [10de:2b85]" and device.driver == ""


def test_pci_names_stop_at_the_vendor_block(sysfs: dict[str, Path]) -> None:
    assert _host.pci_name("10de", "2684", [sysfs["ids"]]) == "GeForce RTX 4090"
    assert _host.pci_name("10de", "16f1", [sysfs["ids"]]) == ""  # a subsystem line is not a device
    assert _host.pci_name("8086", "2684", [sysfs["ids"]]) == ""


def test_no_sysfs_is_an_empty_inventory(tmp_path: Path) -> None:
    assert _host.linux_devices(tmp_path / "absent") == []


INTEL_MAC = """\
Graphics/Displays:

    Intel UHD Graphics 630:

      Chipset Model: Intel UHD Graphics 630
      Type: GPU
      Bus: Built-In
      VRAM (Dynamic, Max): 1536 MB
      Vendor: Intel
      Device ID: 0x3e9b

    AMD Radeon Pro 5300M:

      Chipset Model: AMD Radeon Pro 5300M
      Type: GPU
      Bus: PCIe
      PCIe Lane Width: x16
      VRAM (Dynamic, Max): 4 GB
      Vendor: AMD (0x1002)
      Metal Support: Metal 3
"""


def test_macos_lists_both_gpus_of_an_intel_macbook() -> None:
    found = _host.mac_devices(run=lambda command: INTEL_MAC)
    assert [(d.vendor, d.name) for d in found] == [("Intel", "Intel UHD Graphics 630"),
                                                   ("AMD", "AMD Radeon Pro 5300M")]
    assert {d.source for d in found} == {"system_profiler"}


def test_macos_apple_silicon() -> None:
    text = "Graphics/Displays:\n\n    Apple M2 Pro:\n\n      Chipset Model: Apple M2 Pro\n      Type: GPU\n"
    assert _host.mac_devices(run=lambda command: text) == [
        HostDevice(vendor="Apple", name="Apple M2 Pro", source="system_profiler")]


WINDOWS_ARM = {
    "{4d36e968-e325-11ce-bfc1-08002be10318}": [
        {"DriverDesc": "Qualcomm(R) Adreno(TM) X1-85 GPU", "ProviderName": "Qualcomm Technologies, Inc.",
         "DriverVersion": "31.0.96.0", "MatchingDeviceId": "ACPI\\VEN_QCOM&DEV_0C36"},
        {"DriverDesc": "Microsoft Basic Display Adapter", "ProviderName": "Microsoft"},
    ],
    "{f01a9d53-3ff6-48d2-9f97-c8a7004be10c}": [
        {"DriverDesc": "Qualcomm(R) Hexagon(TM) NPU", "ProviderName": "Qualcomm Technologies, Inc.",
         "DriverVersion": "30.0.140.1000"},
    ],
}


def test_windows_on_arm_lists_the_hexagon_npu() -> None:
    found = _host.windows_devices(read_class=lambda guid: WINDOWS_ARM.get(guid, []))
    assert [(d.vendor, d.name, d.kind) for d in found] == [
        ("Qualcomm", "Qualcomm(R) Adreno(TM) X1-85 GPU", "gpu"),
        ("Qualcomm", "Qualcomm(R) Hexagon(TM) NPU", "npu"),
    ]
    assert found[1].driver_version == "30.0.140.1000" and found[1].source == "registry"


def test_windows_pci_ids_name_the_vendor() -> None:
    entries = [{"DriverDesc": "NVIDIA GeForce RTX 3060", "ProviderName": "NVIDIA",
                "MatchingDeviceId": "PCI\\VEN_10DE&DEV_2504&SUBSYS_397D1462", "DriverVersion": "32.0.15.6094"}]
    (device,) = _host.windows_devices(read_class=lambda guid: entries if "e968" in guid else [])
    assert (device.vendor, device.pci_id, device.kind) == ("NVIDIA", "10de:2504", "gpu")


def test_the_os_inventory_never_raises_here() -> None:
    assert all(isinstance(d, HostDevice) for d in _host.os_devices())


@pytest.mark.parametrize(("fields", "error"), [
    ({"vendor": "", "name": "x"}, ValueError),
    ({"vendor": "NVIDIA", "name": " "}, ValueError),
    ({"vendor": "NVIDIA", "name": "x", "kind": "tpu"}, ValueError),
    ({"vendor": 10, "name": "x"}, TypeError),
    ({"vendor": "AMD", "name": "x", "memory_total": "8 GB"}, TypeError),
    ({"vendor": "AMD", "name": "x", "memory_total": True}, TypeError),
])
def test_a_host_device_refuses_bad_fields(fields: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error, match="HostDevice"):
        HostDevice(**fields)


# ---- the hook ------------------------------------------------------------------------------------


class Cards:
    def __init__(self, *answer: Any, raises: BaseException | None = None) -> None:
        self.answer, self.raises = list(answer), raises

    @hookimpl
    def spacr_accel_host_devices(self) -> Any:
        if self.raises is not None:
            raise self.raises
        return self.answer


OS_CARD = HostDevice(vendor="NVIDIA", name="NVIDIA GeForce RTX 4090", address="0000:01:00.0", source="sysfs")


def test_plugins_add_silicon_to_the_os_inventory(plug: Plug, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_host, "os_devices", lambda: [OS_CARD])
    npu = HostDevice(vendor="Acme", name="Acme NPU", kind="npu", source="acme")
    same_card = HostDevice(vendor="NVIDIA", name="RTX 4090 (as the plugin names it)", address="0000:01:00.0")
    plug(Cards(npu, same_card), "acme")
    assert accelerator.host_devices() == (OS_CARD, npu)  # the same address is one card


def test_a_plugin_that_breaks_or_answers_junk_is_dropped_with_one_warning(
        plug: Plug, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(_host, "os_devices", list)
    good = HostDevice(vendor="Acme", name="Acme GPU")
    plug(Cards(raises=ValueError("sysfs moved")), "a_broken")
    plug(Cards(good, "not a record", 3), "b_mixed")
    with caplog.at_level(logging.WARNING, logger="spacr_accel_core.accelerator"):
        assert accelerator.host_devices() == (good,)
    said = [r.getMessage() for r in caplog.records]
    assert any("a_broken" in m and "sysfs moved" in m for m in said)
    assert any("b_mixed" in m and "not a record" in m for m in said)


def test_host_devices_are_cached_until_refresh(plug: Plug, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []
    monkeypatch.setattr(_host, "os_devices", lambda: asked.append(1) or [OS_CARD])
    assert accelerator.host_devices() == accelerator.host_devices() == (OS_CARD,)
    assert len(asked) == 1
    accelerator.forget()
    accelerator.host_devices()
    assert len(asked) == 2


def test_memory_reports_what_the_os_knows_of_cards_not_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    amd = HostDevice(vendor="AMD", name="AMD Radeon RX 6600", address="0000:03:00.0", memory_total=8 * 2**30)
    monkeypatch.setattr(_host, "os_devices", lambda: [OS_CARD, amd])
    rows = accelerator.memory()
    assert [(r.device, r.free, r.total) for r in rows] == [("0000:01:00.0", None, None),
                                                            ("0000:03:00.0", None, 8 * 2**30)]
