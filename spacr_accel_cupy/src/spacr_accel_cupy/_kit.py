"""What the CuPy primitives need from an array library, gathered in one record.

WHY A KIT. The algorithms of every family (the ``_<family>_kernels`` modules) are written once
against a NumPy-compatible namespace: with CuPy they run on the card, and with NumPy and SciPy they
run on any machine, which is how this package's tests check every line of them (tiling,
out-of-memory retries, the NaN rule, the exact verdict) on machines without a GPU. Only this module
knows which library is which.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

import numpy as np

from spacr_accel_core import BackendOutOfMemory, BackendUnavailable, Setting
from spacr_accel_core.toolkit import (
    HOST_PASS_BYTES,
    PrecisionWindow,
    describe,
    install_command,
    pass_budget,
    setting_value,
)

from . import _driver

__all__ = ["Kit", "cupy_kit", "ieee_unit", "numpy_kit", "translate"]

PASS_BYTES: Final = Setting("SPACR_ACCEL_CUPY_PASS_BYTES", "a share of free device memory",
                            "bytes one pass of a primitive may hold on the card (lower it beside another job)")
TF32: Final = Setting("CUPY_TF32", "0", "CuPy's TF32 products; the backend widens its exactness window for them")
"""The settings this plugin declares, each named once (its declaration lists them, this module reads them)."""

_OOM_WORDS = re.compile(r"out of memory|MemoryAllocation|ALLOC_FAILED", re.IGNORECASE)

_TF32_UNIT: Final = 2.0 ** -10
"""TF32 keeps 10 explicit mantissa bits: 2^-11 rounded to nearest, 2^-10 where tensor cores truncate."""
_BF16_UNIT: Final = 2.0 ** -7
"""bfloat16 (7 explicit bits, truncated); also used for FP16 compute, whose 10 bits come with a
range too narrow for squared coordinates."""


def ieee_unit(dtype: np.dtype) -> float:
    """The unit roundoff of IEEE arithmetic in ``dtype`` (2^-24 for float32, 2^-53 for float64)."""
    return float(np.finfo(dtype).eps) / 2


def _nothing_to_change() -> AbstractContextManager[None]:
    return contextlib.nullcontext()


def _unknown() -> int | None:
    return None


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
    :param gemm_unit: the unit roundoff a matrix product of this dtype has NOW (CuPy's compute
        type: ``CUPY_TF32=1`` or ``set_compute_type`` make float32 products TF32).
    :param ieee: a context in which matrix products are IEEE in their own dtype.
    :param reported_free: the device's free memory as :func:`spacr_accel_core.accelerator.memory`
        reports it, asked only where ``free_bytes`` cannot say.
    """

    name: str
    xp: ModuleType
    ndimage: ModuleType
    to_device: Callable[[np.ndarray], Any]
    to_host: Callable[[Any], np.ndarray]
    free_bytes: Callable[[], int | None]
    release: Callable[[], None]
    gemm_unit: Callable[[np.dtype], float] = ieee_unit
    ieee: Callable[[], AbstractContextManager[None]] = _nothing_to_change
    reported_free: Callable[[], int | None] = _unknown

    def budget(self) -> int:
        """Bytes one pass may use now: measured on a card (the library's query, else the
        accelerator's memory report), a cache-sized constant on the host."""
        free = self.free_bytes()
        if free is None:
            free = self.reported_free()
        return pass_budget(free, override=setting_value(PASS_BYTES), host=HOST_PASS_BYTES)


def numpy_kit() -> Kit:
    """The same algorithms on the host: for tests, and as the reference of what runs on the card."""
    from scipy import ndimage

    return Kit("numpy", np, ndimage, np.asarray, np.asarray, lambda: None, lambda: None)


class _Cache:
    """The CuPy kit and CuPy's error classes, built once per process (not per call)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Start afresh: in a forked child (CUDA does not survive a fork, and a lock another thread
        held would stay held), and in tests."""
        self.lock = threading.Lock()
        self.kit: Kit | None = None
        self.vendor: tuple[type[BaseException], ...] | None = None
        self.ieee = _IeeeState()


class _IeeeState(PrecisionWindow[dict[Any, int], None]):
    """How many calls need IEEE products now, and the compute types to put back after the last."""


_CACHE = _Cache()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_CACHE.reset)


def cupy_kit() -> Kit:
    """CuPy on its current device, built once per process (the closures ask the CURRENT device
    at call time, so ``with cupy.cuda.Device(n)`` is honoured).

    Only a kit that was built is cached: a failure is asked again next time (a driver loaded
    later, a test that takes CuPy away).

    :raises BackendUnavailable: CuPy is not importable, or no CUDA device answers.
    """
    cache = _CACHE
    kit = cache.kit
    if kit is not None:
        return kit
    with cache.lock:
        if cache.kit is None:
            cache.kit = _build_cupy_kit(cache.ieee)
        return cache.kit


def _env_tf32() -> bool:
    """``CUPY_TF32`` as CuPy reads it (an integer, non-zero enables TF32 on cards that have it)."""
    try:
        return int((setting_value(TF32) or "0").strip() or "0") != 0
    except ValueError:
        return True  # unreadable: assume the worst, it only costs a float64 product


def _code_unit(linalg: Any, code: int, dtype: np.dtype) -> float:
    """The unit roundoff of a product of ``dtype`` under CuPy compute type ``code``."""
    ieee = ieee_unit(dtype)

    def constant(name: str) -> int | None:
        value = getattr(linalg, name, None)
        return int(value) if isinstance(value, int) else None

    if code == constant("COMPUTE_TYPE_TF32"):
        return max(ieee, _TF32_UNIT)
    if code in (constant("COMPUTE_TYPE_BF16"), constant("COMPUTE_TYPE_FP16")):
        return max(ieee, _BF16_UNIT)
    if code == constant("COMPUTE_TYPE_FP32"):
        return max(ieee, ieee_unit(np.dtype(np.float32)))
    return ieee  # DEFAULT, PEDANTIC, FP64 (more accurate than the dtype), or not decided yet


def cupy_gemm_unit(linalg: Any, dtype: np.dtype, state: _IeeeState | None = None) -> float:
    """The worst unit roundoff CuPy's matrix product in ``dtype`` may have from now on.

    :param linalg: ``cupy._core._routines_linalg`` (its ``get_compute_type`` and constants), or
        ``None`` where this CuPy has none.
    :param state: this package's IEEE window (:func:`cupy_ieee`): while another call holds it open,
        the compute type it will restore counts too, as the window may close half-way through
        the caller's work (read after the current type; the window saves before it sets and
        forgets after it restores, so no moment is missed).
    """
    ieee = ieee_unit(dtype)
    code: int | None = None
    if linalg is not None:
        try:
            code = int(linalg.get_compute_type(dtype))
        except Exception:  # the first ask reads the card's compute capability; none here
            code = None
    if code is None:  # cannot ask: CuPy will decide from the environment, so read it too
        unit = max(ieee, _TF32_UNIT) if dtype == np.float32 and _env_tf32() else ieee
    else:
        unit = _code_unit(linalg, code, dtype)
    saved = state.saved if state is not None else None
    if saved is not None and dtype in saved:
        unit = max(unit, _code_unit(linalg, saved[dtype], dtype))
    return unit


@contextlib.contextmanager
def cupy_ieee(linalg: Any, state: _IeeeState) -> Iterator[None]:
    """The body's float32 and float64 products in their own IEEE precision, whatever was set.

    CuPy's compute type is process-global (``CUPY_TF32=1`` makes every float32 product TF32 on an
    Ampere or later card). The first of this package's concurrent calls saves it and sets the
    default; the last puts it back, unless someone changed it meanwhile (their change wins).
    While a call runs, others' products are IEEE too: slower, never less accurate.
    """
    types = (np.dtype(np.float32), np.dtype(np.float64))
    default = getattr(linalg, "COMPUTE_TYPE_DEFAULT", None) if linalg is not None else None

    def save() -> dict[Any, int] | None:
        if default is None:
            return None
        try:
            saved = {dtype: int(linalg.get_compute_type(dtype)) for dtype in types
                     if cupy_gemm_unit(linalg, dtype) > ieee_unit(dtype)}
        except Exception:  # the card refuses to say: the call runs as configured
            return None
        return saved or None

    def set_ieee(saved: dict[Any, int]) -> None:
        try:
            for dtype in saved:
                linalg.set_compute_type(dtype, default)
        except Exception:  # a refusal: put back what was set, run as configured
            _restore(linalg, saved, default)
            raise

    def restore(saved: dict[Any, int], _applied: None) -> None:
        _restore(linalg, saved, default)

    with state.hold(save, set_ieee, restore):
        yield


def _restore(linalg: Any, saved: dict[Any, int], default: Any) -> None:
    """Put back each saved compute type still at the default (a change made meanwhile wins)."""
    for dtype, code in saved.items():
        with contextlib.suppress(Exception):
            if int(linalg.get_compute_type(dtype)) == default:
                linalg.set_compute_type(dtype, code)


def _build_cupy_kit(ieee_state: _IeeeState) -> Kit:
    try:
        import cupy
        import cupyx.scipy.ndimage as cupy_ndimage
    except Exception as exc:  # ImportError, or a broken wheel raising anything at import
        raise BackendUnavailable(
            f"cupy is not importable ({type(exc).__name__}: {exc}); `{install_command('cupy')}`"
        ) from exc
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:
        raise BackendUnavailable(f"cupy cannot reach a CUDA device: {_why_no_device(exc)}") from exc
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

    try:
        linalg: Any = importlib.import_module("cupy._core._routines_linalg")
    except Exception:  # a CuPy without compute types: its products are IEEE
        linalg = None

    def gemm_unit(dtype: np.dtype) -> float:
        return cupy_gemm_unit(linalg, np.dtype(dtype), ieee_state)

    def ieee() -> AbstractContextManager[None]:
        return cupy_ieee(linalg, ieee_state)

    def reported() -> int | None:
        from ._room import reported_free

        try:
            return reported_free(int(cupy.cuda.Device().id))
        except Exception:  # no current device to name: size passes by the fixed budget
            return None

    return Kit("cupy", cupy, cupy_ndimage, cupy.asarray, to_host, free_bytes, release, gemm_unit, ieee, reported)


def _vendor_errors() -> tuple[type[BaseException], ...]:
    """CuPy's classes for a device or library failure (the device's fault, not this package's).

    Looked up once per process: this runs for every error a tile raises.
    """
    cache = _CACHE
    found = cache.vendor
    if found is not None:
        return found
    with cache.lock:
        if cache.vendor is None:
            cache.vendor = _find_vendor_errors()
        return cache.vendor


def _find_vendor_errors() -> tuple[type[BaseException], ...]:
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
            module = importlib.import_module(module_name)
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
        return BackendOutOfMemory(f"cupy {what}: the device is out of memory: {describe(exc)}")
    vendor = _vendor_errors()
    if vendor and isinstance(exc, vendor):
        absent = _no_driver()
        if absent is not None:  # the runtime's "driver version is insufficient" means "no driver"
            return BackendUnavailable(f"cupy {what}: {absent}")
        return BackendUnavailable(f"cupy {what}: the device failed: {describe(exc)}")
    return exc


def _no_driver() -> str | None:
    """The doctor's words when the OS shows no NVIDIA driver, else ``None``.

    Without a driver, CuPy's runtime says "CUDA driver version is insufficient for CUDA runtime
    version", which sends a user hunting for a driver update on a machine that has no NVIDIA
    driver (or card) at all; the doctor says "no NVIDIA driver is loaded", and a forced call
    must say the same thing. The same words come where the driver's device nodes are there but
    its library is not (:func:`_driver_library_missing`), and that is said instead.
    """
    absent = _driver.no_nvidia_driver()
    return absent if absent is not None else _driver_library_missing()


DRIVER_LIBRARY: Final = {"linux": "libcuda.so.1", "win32": "nvcuda.dll"}
"""The NVIDIA driver's user-space library, by ``sys.platform`` prefix: what CuPy's runtime loads."""


def _load_library(name: str) -> None:
    """Load a shared library by name (a function, so tests can stand in for the OS).

    :param name: the library's file name, found the way the dynamic loader finds it.
    :raises OSError: it cannot be loaded.
    """
    import ctypes

    ctypes.CDLL(name)


def _driver_library_missing() -> str | None:
    """Why there is no usable NVIDIA driver although its device nodes exist, or ``None``.

    The kernel driver's nodes (``/dev/nvidiactl``, ``/proc/driver/nvidia``, WSL's ``/dev/dxg``) can
    be present without the driver's library: a container given the devices but started without the
    NVIDIA container toolkit (which mounts ``libcuda.so.1``), or a driver half removed. CuPy's runtime
    then also says "driver version is insufficient", which no driver update mends.
    """
    import sys

    name = next((library for prefix, library in DRIVER_LIBRARY.items() if sys.platform.startswith(prefix)), None)
    if name is None:
        return None
    try:
        _load_library(name)
    except OSError as exc:
        return (f"no NVIDIA driver library here: {name} cannot be loaded ({describe(exc)}); the driver's "
                "device nodes are present but not its library (in a container, start it with the "
                "NVIDIA container toolkit)")
    return None


def _why_no_device(exc: BaseException) -> str:
    """Why CuPy's device count failed, in the doctor's words where the OS already knows.

    :param exc: what ``getDeviceCount`` raised.
    """
    absent = _no_driver()
    return absent if absent is not None else describe(exc)
