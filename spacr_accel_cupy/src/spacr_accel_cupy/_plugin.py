"""The CuPy backend's plugin: the primitives on an NVIDIA card through CuPy.

This module is the entry point's target: it holds the declaration and the usability hook, and lists
what CuPy serves by importing each family's hooks from the family's own module, so pluggy finds
every hook on this module. How a primitive runs on the card (the device, ``gpu=False``, the errors)
is :mod:`._runtime`'s, shared by every family.

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

from spacr_accel_core import BackendInfo, BackendUnavailable, Declaration, hookimpl
from spacr_accel_core.toolkit import ENV_DEVICE, call_bounded, device_request, install_command

from . import _driver
from ._filters import (
    spacr_accel_gaussian_filter,
    spacr_accel_gaussian_laplace,
    spacr_accel_maximum_filter,
    spacr_accel_minimum_filter,
)
from ._kit import PASS_BYTES, TF32
from ._levels import spacr_accel_percentiles, spacr_accel_rescale_fields
from ._neighbours import spacr_accel_nearest_neighbours
from ._peaks import spacr_accel_local_maxima, spacr_accel_window_maxima
from ._planes import spacr_accel_spot_score, spacr_accel_translate
from ._products import spacr_accel_matmul
from ._registration import spacr_accel_phase_correlate

__all__ = [
    "NAME",
    "PRIORITY",
    "SPACR_ACCEL_PLUGIN",
    "spacr_accel_backend_info",
    "spacr_accel_gaussian_filter",
    "spacr_accel_gaussian_laplace",
    "spacr_accel_local_maxima",
    "spacr_accel_matmul",
    "spacr_accel_maximum_filter",
    "spacr_accel_minimum_filter",
    "spacr_accel_nearest_neighbours",
    "spacr_accel_percentiles",
    "spacr_accel_phase_correlate",
    "spacr_accel_rescale_fields",
    "spacr_accel_spot_score",
    "spacr_accel_translate",
    "spacr_accel_window_maxima",
]

NAME = "cupy"
PRIORITY = 200.0
"""Below torch, above numpy: spaCR's order."""

SPACR_ACCEL_PLUGIN = Declaration(
    name=NAME, priority=PRIORITY, accelerated=True, stacks=True,
    settings=(PASS_BYTES, TF32),
)
"""What this plugin is, read by the core without a call (and so without importing CuPy)."""


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
