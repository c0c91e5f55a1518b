"""The NumPy backend's plugin: the floor that always runs, fast and exact.

This module is the entry point's target: it holds the declaration, and lists what the floor serves
by importing each family's hooks from the family's own module (where the code that serves them
lives), so pluggy finds every hook on this module.
"""

from __future__ import annotations

from spacr_accel_core import Declaration

from ._filters import (
    spacr_accel_gaussian_filter,
    spacr_accel_gaussian_laplace,
    spacr_accel_maximum_filter,
    spacr_accel_minimum_filter,
)
from ._landmarks import spacr_accel_match_triangles, spacr_accel_spaced_peaks
from ._levels import spacr_accel_percentiles, spacr_accel_rescale_fields
from ._neighbours import spacr_accel_nearest_neighbours
from ._peaks import spacr_accel_local_maxima, spacr_accel_window_maxima
from ._planes import spacr_accel_spot_score, spacr_accel_translate
from ._points import spacr_accel_attribute_reads, spacr_accel_count_within
from ._products import spacr_accel_matmul
from ._registration import spacr_accel_phase_correlate

__all__ = [
    "PRIORITY",
    "SPACR_ACCEL_PLUGIN",
    "spacr_accel_attribute_reads",
    "spacr_accel_count_within",
    "spacr_accel_gaussian_filter",
    "spacr_accel_gaussian_laplace",
    "spacr_accel_local_maxima",
    "spacr_accel_match_triangles",
    "spacr_accel_matmul",
    "spacr_accel_maximum_filter",
    "spacr_accel_minimum_filter",
    "spacr_accel_nearest_neighbours",
    "spacr_accel_percentiles",
    "spacr_accel_phase_correlate",
    "spacr_accel_rescale_fields",
    "spacr_accel_spaced_peaks",
    "spacr_accel_spot_score",
    "spacr_accel_translate",
    "spacr_accel_window_maxima",
]

PRIORITY = 100.0
"""Lowest of the shipped backends; and ``try_last``: everything else is tried first, this always answers."""

SPACR_ACCEL_PLUGIN = Declaration(
    name="numpy", priority=PRIORITY, accelerated=False, try_last=True,
    # Camera fields the filter takes in their own dtype (:data:`._filters.NARROW`).
    field_dtypes=("uint8", "int8", "uint16", "int16"),
    # A stack is filtered field by field in one threaded pass (:func:`._filters.maximum_filter_stack`).
    stacks=True,
)
"""What this plugin is, read by the core without a call. It needs no usability answer: NumPy and
SciPy are its own dependencies, so it always runs."""
