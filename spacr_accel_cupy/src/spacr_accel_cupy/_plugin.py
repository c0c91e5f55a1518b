"""The CuPy backend's hookimpls: the primitives on an NVIDIA card through CuPy.

Usable only where a CUDA device answers. CuPy installs and imports on machines without one (and
then every call raises ``CUDARuntimeError``), so importability proves nothing: the device count
is asked, and its error becomes the note the doctor shows.

NOT DECLARED: the point operations (``attribute_reads``, ``count_within``), so the registry passes
CuPy over for them. Read attribution's gaps are spaCR's ``np.hypot``, C's to the last bit, which
CUDA's ``hypot`` need not reproduce (one last bit moves an owner wherever two gaps tie); the merge's
inlier counts would be exact in float64, but a brute force over every pair does not beat numba's
grid at spaCR's sizes, and the toolkit's grid is not written against CuPy's kit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

from spacr_accel_core import (
    BackendDeclined,
    BackendInfo,
    BackendUnavailable,
    Declaration,
    cpu_requested,
    hookimpl,
)
from spacr_accel_core.toolkit import ENV_DEVICE, call_bounded, call_translated, device_request, install_command

from . import _driver
from ._kit import PASS_BYTES, TF32, Kit, cupy_kit, translate

NAME = "cupy"
PRIORITY = 200.0
"""Below torch, above numpy: spaCR's order."""

SPACR_ACCEL_PLUGIN = Declaration(
    name=NAME, priority=PRIORITY, accelerated=True, stacks=True,
    settings=(PASS_BYTES, TF32),
)
"""What this plugin is, read by the core without a call (and so without importing CuPy)."""

_T = TypeVar("_T")


def _device_count() -> int:
    """How many CUDA devices CuPy reaches, asked under the core's probe bound.

    :raises BackendUnavailable: CuPy is missing, the runtime refuses, or the driver hangs.
    """

    def ask() -> int:
        try:
            import cupy
        except ImportError as exc:
            raise BackendUnavailable(f"cupy is not installed ({exc}); `{install_command('cupy')}`") from exc
        try:
            return int(cupy.cuda.runtime.getDeviceCount())
        except Exception as exc:  # CUDARuntimeError above all: no driver, or one too old
            raise BackendUnavailable(f"cupy cannot reach a CUDA device: {type(exc).__name__}: {exc}") from exc

    return call_bounded(ask, "the CUDA driver (asked by cupy)")


@hookimpl
def spacr_accel_backend_info() -> BackendInfo:
    """Usable where CuPy reaches at least one CUDA device and ``SPACR_DEVICE`` does not forbid it."""
    forced = device_request()
    if forced.cpu:
        return BackendInfo(False, f"{ENV_DEVICE}={forced.text.lower()} forces the CPU")
    if not forced.auto and forced.family != "cuda":
        return BackendInfo(False, f"{ENV_DEVICE}={forced.text.lower()} names a device cupy does not drive (CUDA only)")
    absent = _driver.no_nvidia_driver()
    if absent is not None:
        return BackendInfo(False, absent)
    try:
        count = _device_count()
    except BackendUnavailable as exc:
        return BackendInfo(False, str(exc))
    if count < 1:
        return BackendInfo(False, "cupy found no CUDA device")
    return BackendInfo(True, f"cupy on {count} CUDA device(s)")


@contextmanager
def _selected_device() -> Iterator[None]:
    """The card ``SPACR_DEVICE=cuda:N`` names, else CuPy's current one."""
    forced = device_request()
    if forced.family != "cuda" or forced.index is None:
        yield
        return
    import cupy

    with cupy.cuda.Device(forced.index):
        yield


def _run(what: str, work: Callable[..., _T], *args: Any) -> _T:
    """Run one primitive on the card, translating CuPy's errors for the dispatcher."""
    if cpu_requested():
        raise BackendDeclined("cupy runs on a CUDA card only, and the call forced it with gpu=False")
    kit: Kit = cupy_kit()
    answer: _T = call_translated(translate, what, _on_the_card, work, kit, *args)
    return answer


def _on_the_card(work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)`` with the card ``SPACR_DEVICE`` names selected (a failure to select it is
    translated like the primitive's own)."""
    with _selected_device():
        return work(*args)


@hookimpl
def spacr_accel_maximum_filter(field: np.ndarray, size: int) -> np.ndarray:
    from ._peaks import maximum_filter_stack

    return _run("maximum_filter", maximum_filter_stack, field, size)


@hookimpl
def spacr_accel_local_maxima(field: np.ndarray, size: int, threshold: np.float32 | None) -> np.ndarray:
    from ._peaks import local_maxima

    return _run("local_maxima", local_maxima, field, size, threshold)


@hookimpl
def spacr_accel_matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    from ._ops import matmul

    return _run("matmul", matmul, first, second)


@hookimpl
def spacr_accel_nearest_neighbours(source: np.ndarray, target: np.ndarray, chunk: int, k: int,
                                   max_distance: float | None, metric: str) -> tuple[np.ndarray, np.ndarray]:
    from ._knearest import nearest_neighbours

    return _run("nearest_neighbours", nearest_neighbours, source, target, chunk, k, max_distance, metric)


# ---- the decode chain's filters -------------------------------------------------------------------


@hookimpl
def spacr_accel_minimum_filter(field: np.ndarray, size: int) -> np.ndarray:
    from ._smooth import minimum_filter

    return _run("minimum_filter", minimum_filter, field, size)


@hookimpl
def spacr_accel_gaussian_filter(field: np.ndarray, sigma: tuple[float, float], truncate: float,
                                mode: str) -> np.ndarray:
    from ._smooth import gaussian

    return _run("gaussian_filter", gaussian, field, sigma, truncate, mode, False)


@hookimpl
def spacr_accel_gaussian_laplace(field: np.ndarray, sigma: tuple[float, float], truncate: float,
                                 mode: str) -> np.ndarray:
    from ._smooth import gaussian

    return _run("gaussian_laplace", gaussian, field, sigma, truncate, mode, True)


# ---- the decode chain: base intensities and registration ----------------------------------------


@hookimpl
def spacr_accel_window_maxima(stack: np.ndarray, points: np.ndarray, size: int) -> np.ndarray:
    from ._decode import window_maxima

    return _run("window_maxima", window_maxima, stack, points, size)


@hookimpl
def spacr_accel_phase_correlate(first: np.ndarray, second: np.ndarray,
                                pairing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from ._decode import phase_correlate

    return _run("phase_correlate", phase_correlate, first, second, pairing)


@hookimpl
def spacr_accel_translate(stack: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    from ._planes import translate

    return _run("translate", translate, stack, shifts)


@hookimpl
def spacr_accel_spot_score(stack: np.ndarray) -> np.ndarray:
    from ._planes import spot_score

    return _run("spot_score", spot_score, stack)


# ---- the levels family (percentiles, clip and scale) -------------------------------------------


@hookimpl
def spacr_accel_percentiles(stack: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    from ._levels import order_statistics

    return _run("percentiles", order_statistics, stack, ranks)


@hookimpl
def spacr_accel_rescale_fields(stack: np.ndarray, scale: np.ndarray, low: np.ndarray,
                               high: np.ndarray) -> np.ndarray:
    from ._levels import rescale_fields

    return _run("rescale_fields", rescale_fields, stack, scale, low, high)
