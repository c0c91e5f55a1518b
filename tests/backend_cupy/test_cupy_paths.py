"""The CuPy backend's real "no device" path here, and what is no one family's: its errors translated,
a missing CuPy pointing at the extra, ``SPACR_DEVICE`` forbidding it, and on a card, small tiles
that stay exact and a usable ``backend_info``.

CuPy installs and imports on this project's machines and every call raises ``CUDARuntimeError``,
so the unavailable path is checked for real. The same checks on the card are marked GPU-only."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

from spacr_accel_core import BackendOutOfMemory, BackendUnavailable, last_dispatch, ops
from spacr_accel_core.testing import reference_maximum_filter, reference_nearest
from spacr_accel_core.toolkit import install_command
from spacr_accel_cupy import _driver, _kit, _plugin


def _device_reason() -> str | None:
    """Why CuPy cannot reach a card here, or ``None`` where it can."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return None
        return "CuPy found no CUDA device"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


NO_DEVICE = _device_reason()
gpu_only = pytest.mark.skipif(NO_DEVICE is not None,
                              reason=f"needs a CUDA device that CuPy can reach ({NO_DEVICE})")
no_device_only = pytest.mark.skipif(NO_DEVICE is None, reason="a CUDA device answers here")


# ---- the real unavailable path (this machine) ----------------------------------------------------


@no_device_only
def test_backend_info_says_unusable_with_the_runtime_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    # Past the cheap OS check, CuPy itself is asked, and its real CUDARuntimeError is the note.
    monkeypatch.setattr(_driver, "no_nvidia_driver", lambda: None)
    info = _plugin.spacr_accel_backend_info()
    declared = _plugin.SPACR_ACCEL_PLUGIN
    assert (declared.name, declared.priority, declared.accelerated, info.usable) == ("cupy", 200.0, True, False)
    assert "cupy cannot reach a CUDA device: CUDARuntimeError" in info.note


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the Linux driver's device files")
def test_without_an_nvidia_driver_cupy_is_not_even_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    """Discovery on a machine without the driver must not pay for importing CuPy."""
    import os.path

    monkeypatch.setattr(os.path, "exists", lambda path: False)
    monkeypatch.setitem(sys.modules, "cupy", None)  # importing it now would raise ImportError
    info = _plugin.spacr_accel_backend_info()
    assert not info.usable and "no NVIDIA driver is loaded" in info.note
    monkeypatch.setattr(os.path, "exists", lambda path: path == "/dev/nvidiactl")
    assert install_command("cupy") in _plugin.spacr_accel_backend_info().note


@no_device_only
def test_a_forced_call_raises_backend_unavailable_and_dispatch_still_answers() -> None:
    with pytest.raises(BackendUnavailable, match="cupy cannot reach a CUDA device"):
        ops.maximum_filter(np.ones((4, 4)), 3, backend="cupy")
    with pytest.raises(RuntimeError):
        ops.matmul(np.ones((2, 2)), np.ones((2, 2)), backend="cupy")
    got = ops.maximum_filter(np.eye(4), 3)
    assert got[0].tolist() == [1, 1, 1, 0]
    dispatch = last_dispatch()
    assert dispatch is not None and dispatch.backend != "cupy"  # numpy, or an installed CPU backend
    assert "cupy" not in ops.accelerated_backends()


def test_missing_cupy_points_at_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_driver, "no_nvidia_driver", lambda: None)
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` now raises ImportError
    info = _plugin.spacr_accel_backend_info()
    assert not info.usable and install_command("cupy") in info.note
    with pytest.raises(BackendUnavailable, match=re.escape(install_command("cupy"))):
        _kit.cupy_kit()


def test_spacr_device_can_forbid_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACR_DEVICE", "cpu")
    assert "forces the CPU" in _plugin.spacr_accel_backend_info().note
    monkeypatch.setenv("SPACR_DEVICE", "mps")
    info = _plugin.spacr_accel_backend_info()
    assert not info.usable and "CUDA only" in info.note


def test_cupy_errors_are_translated() -> None:
    from cupy.cuda.memory import OutOfMemoryError
    from cupy.cuda.runtime import CUDARuntimeError

    assert isinstance(_kit.translate(OutOfMemoryError(1 << 30, 1 << 20), "matmul"), BackendOutOfMemory)
    assert isinstance(_kit.translate(CUDARuntimeError(35), "matmul"), BackendUnavailable)
    assert isinstance(_kit.translate(CUDARuntimeError(2), "matmul"), BackendOutOfMemory)  # MemoryAllocation
    bug = IndexError("index 9 is out of bounds")
    assert _kit.translate(bug, "matmul") is bug


# ---- on the card ---------------------------------------------------------------------------------


@gpu_only
def test_on_the_card_in_small_tiles_everything_stays_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACR_ACCEL_CUPY_PASS_BYTES", str(1 << 16))
    rng = np.random.default_rng(8)
    field = rng.standard_normal((300, 257)).astype(np.float32)
    field[100, 100] = np.nan
    assert np.array_equal(ops.maximum_filter(field, 15, backend="cupy"),
                          reference_maximum_filter(field, 15), equal_nan=True)
    source = np.round(rng.uniform(0, 30, (2000, 2))).astype(np.float32)
    target = np.round(rng.uniform(0, 30, (1500, 2))).astype(np.float32)
    got = ops.nearest_neighbours(source, target, backend="cupy", chunk=97)
    expected = reference_nearest(source, target)
    assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])


@gpu_only
def test_on_the_card_backend_info_is_usable() -> None:
    info = _plugin.spacr_accel_backend_info()
    assert info.usable and "CUDA device" in info.note
    assert "cupy" in ops.accelerated_backends()
