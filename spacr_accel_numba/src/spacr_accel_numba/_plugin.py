"""The numba backend's plugin: the CPU's fastest exact filter and low-dimensional search.

This module is the entry point's target: it holds the declaration and the hooks that are no
operation (usability, the warm-up), and lists what numba serves by importing each family's hooks
from the family's own module (beside the loops that serve them), so pluggy finds every hook here.

WHAT IT IS, WITHOUT IMPORTING NUMBA. :data:`SPACR_ACCEL_PLUGIN` is read when the plugin loads;
:func:`spacr_accel_backend_info` only looks for numba on the path (``import numba`` costs ~0.5 s,
which discovery must not pay). A kernel numba's cache holds for this code is loaded by the first
call that needs it; the others are compiled in the background from the first call on
(:mod:`._warm`), and until such a kernel is ready its calls decline and the NumPy floor answers them.
"""

from __future__ import annotations

import importlib.util
from typing import Final

from spacr_accel_core import BackendInfo, Declaration, WarmState, hookimpl
from spacr_accel_core.toolkit import install_command

from . import _compiler, _warm
from ._filters import (
    spacr_accel_gaussian_filter,
    spacr_accel_gaussian_laplace,
    spacr_accel_maximum_filter,
    spacr_accel_minimum_filter,
)
from ._levels import spacr_accel_percentiles, spacr_accel_rescale_fields
from ._neighbours import spacr_accel_nearest_neighbours
from ._peaks import spacr_accel_local_maxima, spacr_accel_window_maxima
from ._planes import spacr_accel_spot_score
from ._points import spacr_accel_attribute_reads, spacr_accel_count_within
from ._registration import spacr_accel_phase_correlate

__all__ = [
    "NAME",
    "PRIORITY",
    "SPACR_ACCEL_PLUGIN",
    "spacr_accel_attribute_reads",
    "spacr_accel_backend_info",
    "spacr_accel_count_within",
    "spacr_accel_gaussian_filter",
    "spacr_accel_gaussian_laplace",
    "spacr_accel_local_maxima",
    "spacr_accel_maximum_filter",
    "spacr_accel_minimum_filter",
    "spacr_accel_nearest_neighbours",
    "spacr_accel_percentiles",
    "spacr_accel_phase_correlate",
    "spacr_accel_rescale_fields",
    "spacr_accel_spot_score",
    "spacr_accel_warm_state",
    "spacr_accel_warm_up",
    "spacr_accel_window_maxima",
]

NAME: Final = "numba"
PRIORITY: Final = 120.0
"""Above the NumPy floor (100), whose answers it repeats bit for bit, faster; below every
accelerated backend (CuPy 200, torch 300): a usable GPU still wins."""

SPACR_ACCEL_PLUGIN: Final = Declaration(
    name=NAME, priority=PRIORITY, accelerated=False,
    # Camera fields filtered in their own dtype (the ones the filter is compiled for: uint8,
    # uint16); the core casts an int8 or int16 field to float32 for this plugin.
    field_dtypes=tuple(name for name in _warm.FIELD_DTYPES if name != "float32"),
    # The kernel writes ``maximum + 0.0`` (a float field) or the exact cast of an integer, so a
    # maximum of zero is ``+0.0`` already, and the core skips its own ``+0.0`` pass.
    positive_zeros=True,
    # local_maxima and the decode filters take a stack (..., H, W) in one threaded pass; the core
    # hands maximum_filter one field at a time.
    stacks=frozenset({"local_maxima", "minimum_filter", "gaussian_filter", "gaussian_laplace"}),
    settings=(_compiler.COMPILE, _compiler.KERNELS),
)
"""What this plugin is, read by the core without a call."""


@hookimpl
def spacr_accel_backend_info() -> BackendInfo:
    """Usable where numba is installed; looked for, not imported (that is the warm-up's to do)."""
    if importlib.util.find_spec("numba") is None:
        return BackendInfo(usable=False,
                           note=f"numba is not installed; `{install_command('numba')}`")
    if _warm.failure() is not None:
        return BackendInfo(usable=False, note=f"numba could not compile here ({_warm.failure()})")
    return BackendInfo(usable=True, note="numba-compiled loops on the CPU (compiled in the background on first use)")


@hookimpl
def spacr_accel_warm_up(timeout: float) -> bool:
    """Compile (or load from numba's cache) every kernel now, waiting at most ``timeout`` seconds."""
    return _warm.warm(timeout)


@hookimpl
def spacr_accel_warm_state() -> WarmState:
    """Kernels cached of all, and whether a compiler runs now (read from the cache folder alone)."""
    return _warm.state()
