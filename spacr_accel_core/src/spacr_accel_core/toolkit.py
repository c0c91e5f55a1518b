"""What a backend author needs, in public names: used by this project's own backends exactly as by a
third party's.

- Errors: :func:`describe` and :func:`first_line` turn a driver's paragraph into the one line
  that names the cause (for a decline's reason and the doctor); the contract's exceptions.
- Precision: :class:`PrecisionWindow`, the reference-counted window in which a library's matrix
  products are IEEE float32 whatever a training script in the same process asked for (TF32).
- Tiling: :func:`pass_budget`, :func:`tiled`, :func:`run_parts`, :func:`cpu_threads`,
  :data:`HOST_PASS_BYTES`: how much one pass may hold, retried smaller on out-of-memory, and one
  CPU thread pool shared by the CPU backends.
- Exact arithmetic: :mod:`spacr_accel_core.exact` (the distance every backend's verdict uses).
- Reference implementations: :mod:`spacr_accel_core.reference` (the plain definitions of every
  operation's answer) and :mod:`spacr_accel_core.testing` (the conformance suite).
- Bounds: :func:`call_bounded`, for a driver query that might hang.
- Messages: :func:`install_command`, the command that adds an extra for how this copy was
  installed (the clone's script, or pip from an index); :func:`canonical_vendor`, a maker's name
  however a source spells it.
- Thresholds: :func:`threshold_below`, the float32 that makes ``pixel > threshold`` exact in float32
  (how the core hands ``local_maxima``'s threshold to a plugin).
"""

from __future__ import annotations

from ._bounded import call_bounded
from ._checks import threshold_below
from ._errors import (
    BackendDeclined,
    BackendOutOfMemory,
    BackendUnavailable,
    describe,
    first_line,
)
from ._install import install_command
from ._precision import PrecisionWindow
from ._records import canonical_vendor
from .tiling import HOST_PASS_BYTES, cpu_threads, pass_budget, run_parts, tiled

__all__ = [
    "HOST_PASS_BYTES",
    "BackendDeclined",
    "BackendOutOfMemory",
    "BackendUnavailable",
    "PrecisionWindow",
    "call_bounded",
    "canonical_vendor",
    "cpu_threads",
    "describe",
    "first_line",
    "install_command",
    "pass_budget",
    "run_parts",
    "threshold_below",
    "tiled",
]
