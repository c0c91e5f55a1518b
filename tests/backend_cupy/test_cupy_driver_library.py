"""Forcing ``backend="cupy"`` where the NVIDIA driver's device nodes exist but its library does not
(a container given the devices without the NVIDIA container toolkit) says there is no driver
library, not CuPy's "driver version is insufficient", which no driver update mends."""

from __future__ import annotations

import ctypes.util
import sys

import pytest

from spacr_accel_core import BackendUnavailable
from spacr_accel_cupy import _driver, _kit


def _insufficient_driver() -> BaseException:
    runtime = pytest.importorskip("cupy_backends.cuda.api.runtime")
    return runtime.CUDARuntimeError(35)  # type: ignore[no-any-return]  # cudaErrorInsufficientDriver


def _nodes_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_driver, "no_nvidia_driver", lambda: None)


def _library(monkeypatch: pytest.MonkeyPatch, *, loads: bool) -> list[str]:
    asked: list[str] = []

    def load(name: str) -> None:
        asked.append(name)
        if not loads:
            raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(_kit, "_load_library", load)
    return asked


@pytest.mark.skipif(not sys.platform.startswith(("linux", "win32")), reason="CUDA drivers: Linux and Windows")
def test_nodes_without_the_library_are_told_as_no_driver_library(monkeypatch: pytest.MonkeyPatch) -> None:
    _nodes_present(monkeypatch)
    asked = _library(monkeypatch, loads=False)
    translated = _kit.translate(_insufficient_driver(), "matmul")
    assert isinstance(translated, BackendUnavailable)
    assert str(translated).startswith("cupy matmul: no NVIDIA driver library here: ")
    assert asked == [_kit.DRIVER_LIBRARY["linux" if sys.platform.startswith("linux") else "win32"]]
    assert "insufficient" not in str(translated) and "container toolkit" in str(translated)
    assert _kit._why_no_device(_insufficient_driver()).startswith("no NVIDIA driver library here")


def test_with_the_library_the_runtimes_own_words_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    _nodes_present(monkeypatch)
    _library(monkeypatch, loads=True)
    translated = _kit.translate(_insufficient_driver(), "matmul")
    assert "the device failed: CUDARuntimeError: cudaErrorInsufficientDriver" in str(translated)


def test_without_nodes_the_doctors_words_come_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_driver, "no_nvidia_driver", lambda: "no NVIDIA driver is loaded here")
    asked = _library(monkeypatch, loads=False)
    assert _kit._no_driver() == "no NVIDIA driver is loaded here"
    assert asked == []  # the library is not even looked for


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the real loader, on Linux")
def test_the_real_loader_agrees_with_the_system() -> None:
    present = ctypes.util.find_library("cuda") is not None
    missing = _kit._driver_library_missing()
    if present:
        pytest.skip("an NVIDIA driver library is installed here")
    assert missing is not None and "libcuda.so.1 cannot be loaded" in missing
