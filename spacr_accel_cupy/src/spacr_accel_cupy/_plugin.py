"""The CuPy backend's hookimpls: the three primitives on an NVIDIA card through CuPy.

Usable only where a CUDA device answers. CuPy installs and imports on machines without one (and
then every call raises ``CUDARuntimeError``), so importability proves nothing: the device count
is asked, and its error becomes the note the doctor shows.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

from spacr_accel_core import BackendInfo, BackendUnavailable, hookimpl
from spacr_accel_core.accelerator import CPU_WORDS, ENV_DEVICE

from ._kit import Kit, cupy_kit, translate

SPACR_ACCEL_API_VERSION = 1
NAME = "cupy"
PRIORITY = 200.0
"""Below torch, above numpy: the seed's order."""

_PROBE_TIMEOUT_ENV = "SPACR_ACCEL_PROBE_TIMEOUT"
_DEFAULT_PROBE_TIMEOUT = 60.0
_CUDA_INDEX = re.compile(r"cuda:(\d+)")
_T = TypeVar("_T")


def _device_count() -> int:
    """How many CUDA devices CuPy reaches, asked in a worker thread a hung driver cannot stall.

    :raises BackendUnavailable: CuPy is missing, the runtime refuses, or the driver hangs.
    """
    raw = os.environ.get(_PROBE_TIMEOUT_ENV, "").strip()
    try:
        timeout: float | None = float(raw) if raw else _DEFAULT_PROBE_TIMEOUT
    except ValueError:
        timeout = _DEFAULT_PROBE_TIMEOUT
    if timeout is not None and (math.isnan(timeout) or timeout <= 0):
        timeout = _DEFAULT_PROBE_TIMEOUT
    if timeout == math.inf:
        timeout = None
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            import cupy

            box["count"] = int(cupy.cuda.runtime.getDeviceCount())
        except BaseException as exc:  # reported below, an ImportError or CUDARuntimeError above all
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="spacr-accel cupy probe", daemon=True).start()
    if not done.wait(timeout):
        raise BackendUnavailable(f"the CUDA driver did not answer cupy within {timeout:g} s")
    error = box.get("error")
    if isinstance(error, ImportError):
        raise BackendUnavailable(f"cupy is not installed ({error}); `pip install spacr-accel[cupy]`")
    if error is not None:
        raise BackendUnavailable(f"cupy cannot reach a CUDA device: {type(error).__name__}: {error}")
    count: int = box["count"]
    return count


@hookimpl
def spacr_accel_backend_info() -> BackendInfo:
    """Usable where CuPy reaches at least one CUDA device and ``SPACR_DEVICE`` does not forbid it."""
    def info(usable: bool, note: str) -> BackendInfo:
        return BackendInfo(name=NAME, priority=PRIORITY, accelerated=True, usable=usable, note=note)

    forced = os.environ.get(ENV_DEVICE, "").strip().lower()
    if forced in CPU_WORDS:
        return info(False, f"{ENV_DEVICE}={forced} forces the CPU")
    if forced and forced != "auto" and not forced.startswith("cuda"):
        return info(False, f"{ENV_DEVICE}={forced} names a device cupy does not drive (CUDA only)")
    try:
        count = _device_count()
    except BackendUnavailable as exc:
        return info(False, str(exc))
    if count < 1:
        return info(False, "cupy found no CUDA device")
    return info(True, f"cupy on {count} CUDA device(s)")


@contextmanager
def _selected_device() -> Iterator[None]:
    """The card ``SPACR_DEVICE=cuda:N`` names, else CuPy's current one."""
    match = _CUDA_INDEX.fullmatch(os.environ.get(ENV_DEVICE, "").strip().lower())
    if match is None:
        yield
        return
    import cupy

    with cupy.cuda.Device(int(match.group(1))):
        yield


def _run(what: str, work: Callable[..., _T], *args: Any) -> _T:
    """Run one primitive on the card, translating CuPy's errors for the dispatcher."""
    kit: Kit = cupy_kit()
    try:
        with _selected_device():
            return work(kit, *args)
    except Exception as exc:
        translated = translate(exc, what)
        if translated is exc:
            raise
        raise translated from exc


@hookimpl
def spacr_accel_maximum_filter(field: np.ndarray, size: int) -> np.ndarray:
    from ._ops import maximum_filter

    return _run("maximum_filter", maximum_filter, field, size)


@hookimpl
def spacr_accel_matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    from ._ops import matmul

    return _run("matmul", matmul, first, second)


@hookimpl
def spacr_accel_nearest_neighbours(source: np.ndarray, target: np.ndarray,
                                   chunk: int) -> tuple[np.ndarray, np.ndarray]:
    from ._ops import nearest

    return _run("nearest_neighbours", nearest, source, target, chunk)
