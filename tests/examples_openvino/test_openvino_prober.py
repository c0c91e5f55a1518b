"""The OpenVINO prober example, installed as a user installs it, through the public functions.

The real OpenVINO installed here sees only the CPU, so it must report no neural engine; stand-ins
(a fake ``openvino`` module in ``sys.modules``) play a Core Ultra laptop with an NPU, an old
machine with a GNA and a Movidius stick, a broken install and a ``Core()`` that hangs.
"""

from __future__ import annotations

import importlib.metadata
import logging
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator

import pytest

import spacr_accel_core
from spacr_accel_core import accelerator, ops, toolkit

pytestmark = pytest.mark.skipif(
    "spacr-accel-openvino" not in {d.metadata["Name"] for d in importlib.metadata.distributions()},
    reason="the example is not installed: pip install -e examples/spacr-accel-openvino",
)

LAPTOP = {
    "CPU": "Intel(R) Core(TM) Ultra 7 155H",
    "GPU": "Intel(R) Arc(TM) Graphics (iGPU)",
    "NPU": "Intel(R) AI Boost",
}


def fake_openvino(devices: dict[str, str | Exception], *, core: Callable[[], None] | None = None) -> types.ModuleType:
    """A stand-in ``openvino`` whose ``Core`` lists ``devices`` (id -> full name, or the error
    ``get_property`` raises for it); ``core`` runs first in ``Core()`` (to raise or to hang)."""

    class Core:
        def __init__(self) -> None:
            if core is not None:
                core()

        @property
        def available_devices(self) -> list[str]:
            return list(devices)

        def get_property(self, device_name: str, name: str) -> object:
            assert name == "FULL_DEVICE_NAME", name
            answer = devices[device_name]
            if isinstance(answer, Exception):
                raise answer
            return answer

    module = types.ModuleType("openvino")
    module.Core = Core  # type: ignore[attr-defined]  # a module built at run time
    return module


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Forget the cached accelerator and neural engines before and after: each test asks anew,
    as on a machine whose OS lists an NPU (so OpenVINO is asked)."""
    from spacr_accel_openvino import _plugin

    monkeypatch.setattr(_plugin, "worth_asking", lambda: True)
    spacr_accel_core.refresh()
    yield
    spacr_accel_core.refresh()


def test_without_an_npu_listed_on_linux_openvino_is_not_even_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    """The doctor's 0.9 s: on Linux, OpenVINO is asked only where the OS lists an NPU."""
    from spacr_accel_openvino import _plugin

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(toolkit, "host_devices", lambda: ())
    monkeypatch.setitem(sys.modules, "openvino", None)  # an import would raise: it must not happen
    assert _plugin.worth_asking() is False
    assert _plugin.engines() == []
    npu = spacr_accel_core.HostDevice(vendor="Intel", name="Intel(R) AI Boost", kind="npu")
    monkeypatch.setattr(toolkit, "host_devices", lambda: (npu,))
    assert _plugin.worth_asking() is True


def openvino_engines() -> list[str]:
    return [name for name in accelerator.neural_engines() if "OpenVINO" in name]


def test_installed_as_a_prober_that_selects_nothing() -> None:
    row = next(r for r in spacr_accel_core.plugins() if r.name == "openvino")
    assert row.status == "ok" and row.distribution == "spacr-accel-openvino"
    assert row.operations == ()  # no primitive: not a backend
    assert "openvino" not in ops.accelerated_backends()
    assert "openvino" not in {name for name, _ in spacr_accel_core.REGISTRY.hookimpls("spacr_accel_probe")}
    assert "openvino" in {name for name, _ in spacr_accel_core.REGISTRY.hookimpls("spacr_accel_neural_engines")}


def test_the_real_openvino_here(fresh: None) -> None:
    """The library installed here, asked plainly: every device not of type CPU or GPU, by full name."""
    import openvino

    core = openvino.Core()
    devices = core.available_devices
    assert devices, "OpenVINO sees no device at all, not even the CPU"
    expected = sorted(f"{core.get_property(d, 'FULL_DEVICE_NAME')} (OpenVINO {d})" for d in devices
                      if d.split(".")[0] not in {"CPU", "GPU"})
    assert sorted(openvino_engines()) == expected
    if devices == ["CPU"]:  # this project's machines and CI
        assert openvino_engines() == []


def test_a_laptop_npu_is_named_by_its_full_name(fresh: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openvino", fake_openvino(LAPTOP))
    engines = accelerator.neural_engines()
    assert "Intel(R) AI Boost (OpenVINO NPU)" in engines
    # The CPU and the Arc GPU are silicon torch reaches: never named here.
    assert not any(LAPTOP["CPU"] in name or LAPTOP["GPU"] in name for name in engines)


def test_every_other_inference_device_is_named(fresh: None, monkeypatch: pytest.MonkeyPatch) -> None:
    devices: dict[str, str | Exception] = {
        "CPU": "Intel(R) Core(TM) i7-1185G7",
        "GPU.0": "Intel(R) Iris(R) Xe Graphics (iGPU)",
        "GPU.1": "Intel(R) Arc(TM) A770 Graphics (dGPU)",
        "GNA": "GNA_SW",
        "MYRIAD": RuntimeError("[ GENERAL_ERROR ] the stick does not answer"),
    }
    monkeypatch.setitem(sys.modules, "openvino", fake_openvino(devices))
    # A device that will not tell its name is still there: named by its id.
    assert openvino_engines() == ["GNA_SW (OpenVINO GNA)", "OpenVINO MYRIAD"]


@pytest.mark.parametrize("broken", ["absent", "core raises", "no Core"])
def test_nothing_at_all_when_openvino_is_absent_or_broken(
    broken: str, fresh: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse() -> None:
        raise RuntimeError("Failed to create plugin libopenvino_intel_npu_plugin.so")

    module = {"absent": None, "core raises": fake_openvino(LAPTOP, core=refuse),
              "no Core": types.ModuleType("openvino")}[broken]
    monkeypatch.setitem(sys.modules, "openvino", module)  # None in sys.modules: the import fails
    with caplog.at_level(logging.DEBUG):
        assert openvino_engines() == []
        assert spacr_accel_openvino_engines() == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def spacr_accel_openvino_engines() -> list[str]:
    import spacr_accel_openvino

    return spacr_accel_openvino.engines()


def test_a_hanging_core_is_abandoned(fresh: None, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()

    def hang() -> None:
        release.wait(30)

    monkeypatch.setenv(accelerator.ENV_PROBE_TIMEOUT, "0.3")
    monkeypatch.setitem(sys.modules, "openvino", fake_openvino(LAPTOP, core=hang))
    try:
        started = time.monotonic()
        assert spacr_accel_openvino_engines() == []
        assert openvino_engines() == []
        assert time.monotonic() - started < 10, "the hung Core() was waited for"
    finally:
        release.set()  # let the abandoned threads finish
