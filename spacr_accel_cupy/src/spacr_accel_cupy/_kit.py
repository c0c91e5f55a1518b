"""What the CuPy primitives need from an array library, gathered in one record.

WHY A KIT. The algorithms in :mod:`._ops` are written once against a NumPy-compatible namespace:
with CuPy they run on the card, and with NumPy and SciPy they run on any machine, which is how
this package's tests check every line of them (tiling, out-of-memory retries, the NaN rule, the
exact verdict) on machines without a GPU. Only this module knows which library is which.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from spacr_accel_core import BackendOutOfMemory, BackendUnavailable

__all__ = ["Kit", "cupy_kit", "numpy_kit", "translate"]

_HOST_BUDGET = 64 << 20
_DEVICE_FRACTION = 0.4
"""Share of the free device memory one pass may take (the rest for temporaries and neighbours)."""
_DEVICE_CAP = 16 << 30
_OOM_WORDS = re.compile(r"out of memory|MemoryAllocation|ALLOC_FAILED", re.IGNORECASE)


@dataclass(frozen=True)
class Kit:
    """An array library and its device.

    :param name: ``"cupy"`` or ``"numpy"`` (for messages).
    :param xp: the array namespace.
    :param ndimage: its ``scipy.ndimage`` work-alike.
    :param to_device: host array to device array.
    :param to_host: device array to a NumPy array.
    :param free_bytes: memory the device can still give now, or ``None`` when unknown.
    :param release: hands cached blocks back to the driver before a smaller retry.
    """

    name: str
    xp: ModuleType
    ndimage: ModuleType
    to_device: Callable[[np.ndarray], Any]
    to_host: Callable[[Any], np.ndarray]
    free_bytes: Callable[[], int | None]
    release: Callable[[], None]

    def budget(self) -> int:
        """Bytes one pass may use now: measured on a card, a cache-sized constant on the host."""
        override = os.environ.get("SPACR_ACCEL_CUPY_PASS_BYTES")
        if override:
            try:
                return max(1 << 16, int(override))
            except ValueError:
                pass
        free = self.free_bytes()
        if free is None:
            return _HOST_BUDGET
        return int(max(1 << 20, min(_DEVICE_CAP, free * _DEVICE_FRACTION)))


def numpy_kit() -> Kit:
    """The same algorithms on the host: for tests, and as the reference of what runs on the card."""
    from scipy import ndimage

    return Kit("numpy", np, ndimage, np.asarray, np.asarray, lambda: None, lambda: None)


def cupy_kit() -> Kit:
    """CuPy on its current device.

    :raises BackendUnavailable: CuPy is not importable, or no CUDA device answers.
    """
    try:
        import cupy
        import cupyx.scipy.ndimage as cupy_ndimage
    except Exception as exc:  # ImportError, or a broken wheel raising anything at import
        raise BackendUnavailable(
            f"cupy is not importable ({type(exc).__name__}: {exc}); `pip install spacr-accel[cupy]`"
        ) from exc
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:
        raise BackendUnavailable(f"cupy cannot reach a CUDA device: {_first_line(exc)}") from exc
    if count < 1:
        raise BackendUnavailable("cupy found no CUDA device")
    pool = cupy.get_default_memory_pool()

    def free_bytes() -> int | None:
        try:
            free, _total = cupy.cuda.runtime.memGetInfo()
            return int(free) + int(pool.free_bytes())
        except Exception:  # a query the driver refuses: size passes by the cap instead
            return None

    def release() -> None:
        # Best effort: if the driver cannot even free its cache, the retry itself will say so.
        with contextlib.suppress(Exception):
            pool.free_all_blocks()

    def to_host(array: Any) -> np.ndarray:
        host: np.ndarray = cupy.asnumpy(array)
        return host

    return Kit("cupy", cupy, cupy_ndimage, cupy.asarray, to_host, free_bytes, release)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    first = lines[0] if lines else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _vendor_errors() -> tuple[type[BaseException], ...]:
    """CuPy's classes for a device or library failure (the device's fault, not this package's)."""
    found: list[type[BaseException]] = []
    for module_name, attribute in (
        ("cupy_backends.cuda.api.runtime", "CUDARuntimeError"),
        ("cupy_backends.cuda.api.driver", "CUDADriverError"),
        ("cupy_backends.cuda.libs.cublas", "CUBLASError"),
        ("cupy_backends.cuda.libs.curand", "CURANDError"),
        ("cupy_backends.cuda.libs.cusolver", "CUSOLVERError"),
        ("cupy.cuda.compiler", "CompileException"),
    ):
        try:
            module = __import__(module_name, fromlist=[attribute])
        except Exception:  # an optional CuPy module missing from this build
            continue
        cls = getattr(module, attribute, None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            found.append(cls)
    return tuple(found)


def is_out_of_memory(exc: BaseException) -> bool:
    """CuPy's out-of-memory is a :class:`MemoryError`; cuBLAS and the runtime say it in words."""
    if isinstance(exc, MemoryError):
        return True
    vendor: tuple[type[BaseException], ...] = (RuntimeError, *_vendor_errors())
    return isinstance(exc, vendor) and bool(_OOM_WORDS.search(str(exc)))


def translate(exc: BaseException, what: str) -> BaseException:
    """The contract's exception for a CuPy error, or ``exc`` itself when it is not the device's.

    :param exc: what CuPy (or this package) raised.
    :param what: the operation, for the message.
    """
    if isinstance(exc, (BackendOutOfMemory, BackendUnavailable)):
        return exc
    if is_out_of_memory(exc):
        return BackendOutOfMemory(f"cupy {what}: the device is out of memory: {_first_line(exc)}")
    vendor = _vendor_errors()
    if vendor and isinstance(exc, vendor):
        return BackendUnavailable(f"cupy {what}: the device failed: {_first_line(exc)}")
    return exc
