"""``SPACR_DEVICE`` read one way by the core and both backends: :func:`parse_device`."""

from __future__ import annotations

import pytest

from spacr_accel_core.accelerator import DeviceRequest, device_request, parse_device


@pytest.mark.parametrize(("value", "expected"), [
    ("", DeviceRequest("", cpu=False, auto=True, family=None, index=None)),
    ("  Auto ", DeviceRequest("Auto", cpu=False, auto=True, family=None, index=None)),
    (" CPU ", DeviceRequest("CPU", cpu=True, auto=False, family=None, index=None)),
    ("off", DeviceRequest("off", cpu=True, auto=False, family=None, index=None)),
    ("CUDA:1", DeviceRequest("CUDA:1", cpu=False, auto=False, family="cuda", index=1)),
    ("mps", DeviceRequest("mps", cpu=False, auto=False, family="mps", index=None)),
    ("tpu", DeviceRequest("tpu", cpu=False, auto=False, family="tpu", index=None)),
    ("cuda:x", DeviceRequest("cuda:x", cpu=False, auto=False, family=None, index=None)),
    ("cuda:-1", DeviceRequest("cuda:-1", cpu=False, auto=False, family=None, index=None)),
])
def test_parse_device_reads_the_cpu_words_auto_and_family_index(value: str, expected: DeviceRequest) -> None:
    assert parse_device(value) == expected


def test_device_request_reads_the_environment_at_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPACR_DEVICE", raising=False)
    assert device_request().auto
    monkeypatch.setenv("SPACR_DEVICE", "xpu:2")
    assert (device_request().family, device_request().index) == ("xpu", 2)
