"""The torch plugin's hookimpls: the device prober (from ``_probe``) and the torch backend.

The backend runs the three primitives on the device :func:`spacr_accel_core.accelerator.resolve`
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
    name=NAME, priority=PRIORITY, accelerated=True,
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
    from ._ops import maximum_filter

    return _run("maximum_filter", maximum_filter, field, size)


@hookimpl
def spacr_accel_local_maxima(field: np.ndarray, size: int, threshold: np.float32 | None) -> np.ndarray:
    from ._ops import local_maxima

    return _run("local_maxima", local_maxima, field, size, threshold)


@hookimpl
def spacr_accel_matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:  # out= is copied in by the core
    from ._ops import matmul

    return _run("matmul", matmul, first, second)


@hookimpl
def spacr_accel_nearest_neighbours(source: np.ndarray, target: np.ndarray,
                                   chunk: int) -> tuple[np.ndarray, np.ndarray]:
    from ._nearest import nearest

    return _run("nearest_neighbours", nearest, source, target, chunk)
