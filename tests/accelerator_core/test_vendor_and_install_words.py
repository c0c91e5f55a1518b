"""Words the project tells a user: a vendor however a source spells it, a plugin registered at run
time seen at once, and an install command that works for how this copy was installed."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import pytest

import spacr_accel_core
from spacr_accel_core import HostDevice, accelerator, hookimpl
from spacr_accel_core.commands import _doctor
from spacr_accel_core.contract import _install
from spacr_accel_core.toolkit import canonical_vendor, install_command


@pytest.mark.parametrize(("written", "canonical"), [
    ("nvidia", "NVIDIA"), ("Nvidia", "NVIDIA"), ("NVIDIA Corporation", "NVIDIA"), ("NVIDIA", "NVIDIA"),
    ("amd", "AMD"), ("Advanced Micro Devices, Inc.", "AMD"), ("ATI Technologies Inc.", "AMD"),
    ("intel", "Intel"), ("Intel Corporation", "Intel"), ("Apple Inc.", "Apple"),
    ("Qualcomm Technologies, Inc.", "Qualcomm"), (" Moore Threads ", "Moore Threads"),
])
def test_a_vendor_is_kept_in_its_canonical_spelling(written: str, canonical: str) -> None:
    assert canonical_vendor(written) == canonical
    assert HostDevice(vendor=written, name="a card").vendor == canonical


class Hosts:
    SPACR_ACCEL_PLUGIN = spacr_accel_core.Declaration(name="late_hosts")

    @hookimpl
    def spacr_accel_host_devices(self) -> list[HostDevice]:
        return [HostDevice(vendor="nvidia", name="NVIDIA RTX A6000", source="test")]


def test_a_plugin_registered_at_run_time_is_seen_without_forget() -> None:
    before = accelerator.host_devices()  # cached now
    assert not any(d.name == "NVIDIA RTX A6000" for d in before)
    spacr_accel_core.register(Hosts(), "late_hosts")
    try:
        assert any(d.name == "NVIDIA RTX A6000" and d.vendor == "NVIDIA" for d in accelerator.host_devices())
    finally:
        spacr_accel_core.unregister("late_hosts")
    assert not any(d.name == "NVIDIA RTX A6000" for d in accelerator.host_devices())


@pytest.fixture
def install_record(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``install_record(text)`` makes the core's ``direct_url.json`` read ``text`` (None: absent)."""

    class Distribution:
        def __init__(self, text: str | None) -> None:
            self.text = text

        def read_text(self, name: str) -> str | None:
            assert name == "direct_url.json"
            return self.text

    def use(text: str | None) -> None:
        _install._clone_script.cache_clear()
        monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Distribution(text))

    yield use
    _install._clone_script.cache_clear()


def test_a_clone_install_is_told_the_clones_script(install_record: Any, tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "install-from-clone").write_text("#!/bin/sh\n")
    install_record(json.dumps({"url": (tmp_path / "spacr_accel_core").as_uri(), "dir_info": {"editable": True}}))
    script = tmp_path / "scripts" / "install-from-clone"
    assert install_command("torch") == f"{script} torch"
    assert install_command("numba") == str(script)  # every clone install has numba
    assert install_command() == str(script)


def test_an_index_install_is_told_pip(install_record: Any, tmp_path: Path) -> None:
    install_record(None)
    assert install_command("torch") == "pip install 'spacr-accel[torch]'"
    assert install_command() == "pip install spacr-accel"
    install_record(json.dumps({"url": (tmp_path / "gone" / "spacr_accel_core").as_uri(), "dir_info": {}}))
    assert install_command("cupy") == "pip install 'spacr-accel[cupy]'"  # the clone was removed


def test_this_checkout_is_told_a_command_that_exists() -> None:
    _install._clone_script.cache_clear()
    command = install_command("torch")
    if command.startswith("pip "):
        pytest.skip("installed from an index")
    assert Path(command.split()[0]).is_file() and command.endswith(" torch")


def test_the_wrapper_never_splits_a_code_span() -> None:
    note = ("CPU (no accelerator found here, and torch was not imported to ask about it; the prober "
            "says so: no device prober is installed (`/opt/lab/clone/scripts/install-from-clone torch` "
            "adds one), and `spacr-accel doctor --json` prints the same for scripts)")
    lines = _doctor._wrap(note)
    assert all(line.count("`") % 2 == 0 for line in lines), lines
    assert any("`/opt/lab/clone/scripts/install-from-clone torch`" in line for line in lines)
    assert any("`spacr-accel doctor --json`" in line for line in lines)
    assert all(len(line) <= _doctor.WIDTH for line in lines)
