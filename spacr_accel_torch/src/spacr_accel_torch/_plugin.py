"""The torch plugin's hookimpls: the device prober (from ``_probe``) and the torch backend.

The backend runs every operation on the device :func:`spacr_accel_core.accelerator.resolve`
names: CUDA, ROCm, Metal or XPU, and the CPU when a caller forces ``backend="torch"`` on a machine
without one. It is offered to automatic dispatch only where that device is a GPU: torch on a CPU
is what the NumPy backend already does better.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from spacr_accel_core import BackendInfo, Declaration, cpu_requested, hookimpl
from spacr_accel_core.toolkit import (
    ENV_DEVICE,
    Accelerator,
    call_bounded,
    call_translated,
    device_request,
    install_command,
)

from . import _nodes, _probe
from ._probe import (  # noqa: F401  (re-exported: pluggy registers the module's hookimpls)
    spacr_accel_empty_cache,
    spacr_accel_neural_engines,
    spacr_accel_probe,
)
from ._settings import MPS_FALLBACK, PASS_BYTES

NAME = "torch"
PRIORITY = 300.0
"""Highest of the shipped backends (spaCR's order: torch, then cupy, then numpy)."""

SPACR_ACCEL_PLUGIN = Declaration(
    name=NAME, priority=PRIORITY, accelerated=True, stacks=True,
    settings=(PASS_BYTES, MPS_FALLBACK),
)
"""What this plugin is, read by the core without a call (and so without importing torch)."""

_T = TypeVar("_T")

def _detect_bounded() -> Accelerator | None:
    """Our own prober's DETECTION, under the bound the core puts on probes.

    WHY NOT ``resolve()``. This hook runs while a dispatch or the doctor waits for its answer;
    ``resolve()`` walks every prober through the registry (and the question "can torch run here"
    must not depend on another plugin's probe), so the backend asks its own distribution's prober
    directly (the one that drives every torch device); the primitives themselves use ``resolve()``.

    WHY NOT THE SELECTING PROBE (``spacr_accel_probe(torch=None)``). It measures float64 and
    bfloat16 by allocating on the device, and this hook runs on the first ``ops.*`` call of the
    process, ``gpu=False`` included: that would take a CUDA context on a shared card for a process
    that never runs on it. Detection allocates nothing; measuring waits for ``resolve()``.
    """
    return call_bounded(lambda: _probe.detect(include_cuda=True), "the torch device probe")


@hookimpl
def spacr_accel_backend_info() -> BackendInfo:
    """Usable for automatic dispatch only where torch has a GPU of any vendor to run on."""
    forced = device_request()
    if forced.cpu:
        return BackendInfo(False, f"{ENV_DEVICE}={forced.text} forces the CPU (backend='torch' still runs there)")
    absent = _nodes._no_device_node()
    if absent is not None:
        return BackendInfo(False, f"{absent}; backend='torch' runs on the CPU when forced")
    try:
        found = _detect_bounded()
    except RuntimeError as exc:
        return BackendInfo(False, f"no torch device: {exc} (`{install_command('torch')}`)")
    if found is None or not found.is_gpu:
        why = found.note if found is not None and found.note else "torch found no GPU here"
        return BackendInfo(False, f"{why}; backend='torch' runs on the CPU when forced")
    return BackendInfo(True, f"torch on {found.device} ({found.label})")


def _run(what: str, work: Callable[..., _T], *args: Any) -> _T:
    """Run one primitive on the resolved device (the CPU when the call forced torch with
    ``gpu=False``), translating the device's errors for dispatch."""
    from ._runtime import cpu_target, target, translate

    device = cpu_target() if cpu_requested() else target()
    return call_translated(translate, what, work, *args, device)


@hookimpl
def spacr_accel_maximum_filter(field: np.ndarray, size: int) -> np.ndarray:
    from ._stacks import maximum_filter_stack

    return _run("maximum_filter", maximum_filter_stack, field, size)


@hookimpl
def spacr_accel_local_maxima(field: np.ndarray, size: int, threshold: np.float32 | None) -> np.ndarray:
    from ._stacks import local_maxima_stack

    return _run("local_maxima", local_maxima_stack, field, size, threshold)


@hookimpl
def spacr_accel_matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:  # out= is copied in by the core
    from ._ops import matmul

    return _run("matmul", matmul, first, second)


@hookimpl
def spacr_accel_nearest_neighbours(source: np.ndarray, target: np.ndarray, chunk: int, k: int,
                                   max_distance: float | None, metric: str) -> tuple[np.ndarray, np.ndarray]:
    from ._serve import nearest_neighbours

    return _run("nearest_neighbours", nearest_neighbours, source, target, chunk, k, max_distance, metric)


# ---- the decode chain's filters -------------------------------------------------------------------


@hookimpl
def spacr_accel_minimum_filter(field: np.ndarray, size: int) -> np.ndarray:
    from ._smooth import minimum

    return _run("minimum_filter", minimum, field, size)


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
def spacr_accel_attribute_reads(peaks: np.ndarray, centroids: np.ndarray, radius: np.ndarray, footprint: float,
                                tie: float) -> tuple[np.ndarray, np.ndarray]:
    from ._points import attribute_reads

    return _run("attribute_reads", attribute_reads, peaks, centroids, radius, footprint, tie)


@hookimpl
def spacr_accel_count_within(moved: np.ndarray, target: np.ndarray, limit: float) -> np.ndarray:
    from ._points import count_within

    return _run("count_within", count_within, moved, target, limit)


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
