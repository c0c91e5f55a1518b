"""The torch plugin: the device prober (from ``_probe``) and the torch backend.

This module is the entry point's target: it holds the declaration and the usability hook, and lists
what torch serves by importing each family's hooks from the family's own module (beside the code
that serves them), and the prober's hooks, so pluggy finds every hook here.

The backend runs every operation on the device :func:`spacr_accel_core.accelerator.resolve`
names: CUDA, ROCm, Metal or XPU, and the CPU when a caller forces ``backend="torch"`` on a machine
without one. It is offered to automatic dispatch only where that device is a GPU: torch on a CPU
is what the NumPy backend already does better.
"""

from __future__ import annotations

from spacr_accel_core import BackendInfo, Declaration, hookimpl
from spacr_accel_core.toolkit import ENV_DEVICE, Accelerator, call_bounded, device_request, install_command

from . import _nodes, _probe
from ._filters import (
    spacr_accel_gaussian_filter,
    spacr_accel_gaussian_laplace,
    spacr_accel_maximum_filter,
    spacr_accel_minimum_filter,
)
from ._levels import spacr_accel_percentiles, spacr_accel_rescale_fields
from ._neighbours import spacr_accel_nearest_neighbours
from ._peaks import spacr_accel_local_maxima, spacr_accel_window_maxima
from ._planes import spacr_accel_spot_score, spacr_accel_translate
from ._points import spacr_accel_attribute_reads, spacr_accel_count_within
from ._probe import (
    spacr_accel_empty_cache,
    spacr_accel_neural_engines,
    spacr_accel_probe,
)
from ._products import spacr_accel_matmul
from ._registration import spacr_accel_phase_correlate
from ._settings import MPS_FALLBACK, PASS_BYTES

# Every hook imported above is re-exported: pluggy registers the hookimpls it finds on this module.
__all__ = [
    "NAME",
    "PRIORITY",
    "SPACR_ACCEL_PLUGIN",
    "spacr_accel_attribute_reads",
    "spacr_accel_backend_info",
    "spacr_accel_count_within",
    "spacr_accel_empty_cache",
    "spacr_accel_gaussian_filter",
    "spacr_accel_gaussian_laplace",
    "spacr_accel_local_maxima",
    "spacr_accel_matmul",
    "spacr_accel_maximum_filter",
    "spacr_accel_minimum_filter",
    "spacr_accel_nearest_neighbours",
    "spacr_accel_neural_engines",
    "spacr_accel_percentiles",
    "spacr_accel_phase_correlate",
    "spacr_accel_probe",
    "spacr_accel_rescale_fields",
    "spacr_accel_spot_score",
    "spacr_accel_translate",
    "spacr_accel_window_maxima",
]

NAME = "torch"
PRIORITY = 300.0
"""Highest of the shipped backends (spaCR's order: torch, then cupy, then numpy)."""

SPACR_ACCEL_PLUGIN = Declaration(
    name=NAME, priority=PRIORITY, accelerated=True, stacks=True,
    settings=(PASS_BYTES, MPS_FALLBACK),
)
"""What this plugin is, read by the core without a call (and so without importing torch)."""


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
