"""Forcing ``backend="cupy"`` without an NVIDIA driver says what the doctor says.

CuPy's runtime answers a machine with no driver at all with "CUDA driver version is insufficient
for CUDA runtime version", which sends a user looking for a driver update; the doctor (the
plugin's discovery) says "no NVIDIA driver is loaded". A forced call must say the same.
"""

from __future__ import annotations

import numpy as np
import pytest

from spacr_accel_core import BackendUnavailable, ops
from spacr_accel_cupy import _driver, _kit

ABSENT = "no NVIDIA driver is loaded here (no /dev/nvidiactl or /proc/driver/nvidia)"


def _insufficient_driver() -> BaseException:
    runtime = pytest.importorskip("cupy_backends.cuda.api.runtime")
    CUDARuntimeError = runtime.CUDARuntimeError  # noqa: N806  # the class, named as CuPy names it

    return CUDARuntimeError(35)  # cudaErrorInsufficientDriver, what CuPy raises without a driver


def test_a_runtime_error_without_a_driver_is_told_in_the_doctors_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_driver, "no_nvidia_driver", lambda: ABSENT)
    translated = _kit.translate(_insufficient_driver(), "matmul")
    assert isinstance(translated, BackendUnavailable)
    assert str(translated) == f"cupy matmul: {ABSENT}"
    assert "insufficient" not in str(translated)


def test_with_a_driver_the_runtime_error_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_driver, "no_nvidia_driver", lambda: None)
    monkeypatch.setattr(_kit, "_driver_library_missing", lambda: None)  # its library loads too
    translated = _kit.translate(_insufficient_driver(), "matmul")
    assert isinstance(translated, BackendUnavailable)
    assert "the device failed: CUDARuntimeError: cudaErrorInsufficientDriver" in str(translated)


@pytest.mark.skipif(_driver.no_nvidia_driver() is None, reason="an NVIDIA driver is loaded here")
def test_a_forced_call_here_says_no_nvidia_driver_like_the_doctor() -> None:
    doctor_words = _driver.no_nvidia_driver()
    assert doctor_words is not None
    with pytest.raises(BackendUnavailable) as raised:
        ops.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), backend="cupy")
    assert doctor_words in str(raised.value) and "insufficient" not in str(raised.value)
