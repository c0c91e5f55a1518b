"""call_bounded: how a plugin's backend_info asks a driver without letting it hang discovery."""

import threading

import pytest

from spacr_accel_core import BackendUnavailable
from spacr_accel_core.accelerator import call_bounded


def test_returns_the_value() -> None:
    assert call_bounded(lambda: 41 + 1, "the answer") == 42


def test_a_runtime_error_passes_through_unchanged() -> None:
    error = RuntimeError("no device here")

    def work() -> None:
        raise error

    with pytest.raises(RuntimeError) as caught:
        call_bounded(work, "the probe")
    assert caught.value is error


def test_anything_else_becomes_unavailable_chained_to_it() -> None:
    def work() -> None:
        raise ImportError("libcuda.so.1 missing")

    with pytest.raises(BackendUnavailable, match=r"the probe failed: ImportError: libcuda\.so\.1 missing") as caught:
        call_bounded(work, "the probe")
    assert isinstance(caught.value.__cause__, ImportError)


def test_a_hung_driver_is_abandoned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACR_ACCEL_PROBE_TIMEOUT", "0.2")
    release = threading.Event()
    try:
        with pytest.raises(BackendUnavailable, match=r"the driver did not answer within 0.2 s"):
            call_bounded(lambda: release.wait(30), "the driver")
    finally:
        release.set()
