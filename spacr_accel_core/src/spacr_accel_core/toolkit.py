"""What a backend author needs, in public names: used by this project's own backends exactly as by a
third party's.

- Errors: :func:`describe` and :func:`first_line` turn a driver's paragraph into the one line
  that names the cause (for a decline's reason and the doctor); the contract's exceptions;
  :func:`translated_errors`, a ``with`` block whose errors are put in the contract's words, and
  :func:`call_translated`, one primitive's call inside it.
- Precision: :class:`PrecisionWindow`, the reference-counted window in which a library's matrix
  products are IEEE float32 whatever a training script in the same process asked for (TF32).
- Tiling: :func:`pass_budget`, :func:`tiles` (a loop of :class:`Tile`), :func:`tiled`,
  :func:`cpu_pool`, :func:`settled`, :func:`run_parts`, :func:`cpu_threads`,
  :data:`HOST_PASS_BYTES`: how much one pass may hold, retried smaller on out-of-memory, and one
  CPU thread pool shared by the CPU backends (an executor a backend maps its own function over,
  or :func:`run_parts`, handed the function).
- Exact arithmetic (also in :mod:`spacr_accel_core.exact`): :func:`exact_squared`, :func:`distances`,
  :func:`pick_lowest`, :func:`pick_lowest_dense`, :func:`distinct_rows`, :func:`expansion_plan`,
  :func:`integer_matmul`, :data:`EXACT_IN_FLOAT32` (the distance every backend's verdict uses).
- The exact k nearest (the floor's, shared): :func:`k_nearest`, :func:`exact_search` (a KD-tree
  nominates, exact distances decide; needs SciPy), :func:`search_distinct`, :func:`padded_bound`,
  :func:`finish`, :func:`first_k`.
- The Gaussian passes (also in :mod:`spacr_accel_core.separable`): :class:`Pass`,
  :func:`gaussian_passes`, :func:`laplace_terms`, :func:`source_index`.
- The device: :class:`Accelerator`, :func:`resolve`, :func:`host_devices`, :func:`memory`, :data:`ENV_DEVICE`,
  :func:`device_request` and :func:`parse_device` (what ``SPACR_DEVICE`` asks for, read one way).
- Reference implementations: :mod:`spacr_accel_core.reference` (the plain definitions of every
  operation's answer) and :mod:`spacr_accel_core.testing` (the conformance suite).
- Bounds: :func:`call_bounded`, for a driver query that might hang.
- Settings: :func:`setting_value`, a setting the plugin declares, read where the core reads its own.

- Messages: :func:`install_command`, the command that adds an extra for how this copy was
  installed (the clone's script, or pip from an index); :func:`canonical_vendor`, a maker's name
  however a source spells it.
- Registration's transforms: :func:`real_spectrum` and :func:`real_surface`, float64 ``rfft2``
  and ``irfft2`` one axis at a time, the order in which SciPy's pocketfft splits every pass
  between threads (needs SciPy); :func:`reference_runs`, a stack's pairs cut into runs per thread
  grouped by their reference field (transformed once a run), :func:`by_reference` (a run's pairs
  each with its reference's spectrum, computed once), :func:`correlation_runs`, a call's
  runs and the threads each transform may use (a lone pair split between them), and
  :func:`correlate_by_reference`, which walks them given one pair's computation.
- Thresholds: :func:`threshold_below`, the float32 that makes ``pixel > threshold`` exact in float32
  (how the core hands ``local_maxima``'s threshold to a plugin).
- Landmarks: :func:`spaced_peaks`, ``peak_local_max``'s border, order and spacing walk, in bounded
  memory (the floor's ``spaced_peaks``); :func:`triangle_matches`, spaCR's triangle matching on
  stacks with its per-item calls' bits, one item at a time where this NumPy rounds stacks otherwise
  (the floor's ``match_triangles``; needs SciPy).

This module is the one door: the shipped backends and the examples import only from here, from
``spacr_accel_core`` itself (the contract) and, in their tests, from :mod:`spacr_accel_core.testing`
(a test in ``tests/registry_layout`` keeps it so).
"""

from __future__ import annotations

from .contract._errors import (
    BackendDeclined,
    BackendOutOfMemory,
    BackendUnavailable,
    BackendWarming,
    describe,
    first_line,
)
from .contract._install import install_command
from .contract._records import Accelerator, canonical_vendor
from .devices._machine import host_devices, resolve
from .devices._memory import memory
from .devices._probers import DeviceRequest, device_request, parse_device
from .dispatch._bounded import call_bounded
from .dispatch._settings import ENV_DEVICE, setting_value
from .kit._exact import (
    EXACT_IN_FLOAT32,
    ExpansionPlan,
    distances,
    distinct_rows,
    exact_squared,
    expansion_plan,
    integer_matmul,
    pick_lowest,
    pick_lowest_dense,
)
from .kit._knearest import exact_search, finish, first_k, k_nearest, padded_bound, search_distinct
from .kit._peaks import spaced_peaks
from .kit._points import Neighbourhoods, attribute_by_tree, decide_attribution, neighbourhoods, padded_reach
from .kit._precision import PrecisionWindow
from .kit._separable import Pass, gaussian_passes, laplace_terms, source_index
from .kit._spectra import (
    by_reference,
    correlate_by_reference,
    correlation_runs,
    real_spectrum,
    real_surface,
    reference_runs,
)
from .kit._tiling import HOST_PASS_BYTES, Tile, cpu_pool, cpu_threads, pass_budget, run_parts, settled, tiled, tiles
from .kit._translate import call_translated, translated_errors
from .kit._triangles import triangle_matches
from .operations._checks import threshold_below

__all__ = [
    "ENV_DEVICE",
    "EXACT_IN_FLOAT32",
    "HOST_PASS_BYTES",
    "Accelerator",
    "BackendDeclined",
    "BackendOutOfMemory",
    "BackendUnavailable",
    "BackendWarming",
    "DeviceRequest",
    "ExpansionPlan",
    "Neighbourhoods",
    "Pass",
    "PrecisionWindow",
    "Tile",
    "attribute_by_tree",
    "by_reference",
    "call_bounded",
    "call_translated",
    "canonical_vendor",
    "correlate_by_reference",
    "correlation_runs",
    "cpu_pool",
    "cpu_threads",
    "decide_attribution",
    "describe",
    "device_request",
    "distances",
    "distinct_rows",
    "exact_search",
    "exact_squared",
    "expansion_plan",
    "finish",
    "first_k",
    "first_line",
    "gaussian_passes",
    "host_devices",
    "install_command",
    "integer_matmul",
    "k_nearest",
    "laplace_terms",
    "memory",
    "neighbourhoods",
    "padded_bound",
    "padded_reach",
    "parse_device",
    "pass_budget",
    "pick_lowest",
    "pick_lowest_dense",
    "real_spectrum",
    "real_surface",
    "reference_runs",
    "resolve",
    "run_parts",
    "search_distinct",
    "setting_value",
    "settled",
    "source_index",
    "spaced_peaks",
    "threshold_below",
    "tiled",
    "tiles",
    "translated_errors",
    "triangle_matches",
]
