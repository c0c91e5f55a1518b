"""Local maxima as coordinates in one compiled pass: the windowed maximum is never written out.

WHY FUSED. ``argwhere((maximum_filter(f) == f) & (f > t))`` writes a filtered copy of the field
(64 MiB at 4096 x 4096, most of it in fresh pages), reads it back beside the field, then writes and
scans a mask. Here each filtered row (the filter of :mod:`._filter`, by the same loops) is compared
with the field's row while both are in cache, and only the peaks' coordinates are kept
(:func:`._science_kernels.peaks_band`). The bands of a large field, or whole fields of a stack, are
shared between threads; the coordinates come back in row-major order.

The answer equals the NumPy floor's ``spacr_accel_numpy``'s: the maximum is
exact, the comparisons are made on the float32 values, and the threshold is the floor's
:func:`~spacr_accel_core.toolkit.threshold_below`.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

import numpy as np

from spacr_accel_core import BackendDeclined
from spacr_accel_core.toolkit import cpu_threads, run_parts, threshold_below

from ._filter import _BLOCK_BYTES, _MIN_THREADED_PIXELS
from ._knearest import kernels

_log = logging.getLogger(__name__)

_FILTERED = frozenset(np.dtype(name) for name in ("float32", "uint8", "uint16"))
"""Dtypes the band kernel compares in their own type (others are cast to float32 first)."""


def _bands(compiled: ModuleType, stack: np.ndarray, planes: range, rows: tuple[int, int], down: int,
           across: int, bounded: bool, below: np.float32) -> tuple[np.ndarray, int]:
    """One thread's share: rows ``rows`` of every field in ``planes``, as ``(plane, y, x)`` triples
    (``(y, x)`` pairs for a single field)."""
    pixels = len(planes) * (rows[1] - rows[0]) * stack.shape[2]
    # Room for a peak in every 16th pixel: only the pages written are ever touched, and a buffer
    # grown by copying cost a third of a 4096 x 4096 call with its 340,000 peaks.
    coords = np.empty((max(64, pixels >> 4), 3 if stack.shape[0] > 1 else 2), dtype=np.int64)
    held = 0
    for plane in planes:
        coords, held = compiled.peaks_band(stack[plane], plane, down, across, rows[0], rows[1], bounded, below,
                                           coords, held)
    return coords, held


def local_maxima(field: np.ndarray, size: int, threshold: float | np.floating[Any] | None = None) -> np.ndarray:
    """The coordinates of the pixels equal to their window's maximum and above ``threshold``.

    :param field: ``(..., H, W)``, non-empty; float32, uint8 and uint16 are compared in their own
        dtype, any other dtype is cast to float32 first (the contract's filter is of the float32 cast).
    :param size: the window edge, at least 1 (even raised to odd).
    :param threshold: only pixels greater than it, compared exactly (a float32 threshold, as the
        core hands a plugin, is used as it is); ``None``: every maximum. A NaN is never a peak.
    :returns: int64 ``(P, field.ndim)`` coordinates in row-major order.
    :raises BackendDeclined: a window so tall that the kernel's block buffers would exceed
        :data:`._filter._BLOCK_BYTES` per thread (the floor answers).
    """
    if field.dtype not in _FILTERED:
        field = field.astype(np.float32)
    if field.ndim < 2 or field.size == 0:
        return np.empty((0, max(field.ndim, 2)), dtype=np.int64)
    stack = np.ascontiguousarray(field).reshape((-1, *field.shape[-2:]))
    if stack.flags.writeable:  # one compiled variant: the read-only views the core passes
        stack = stack.view()
        stack.flags.writeable = False
    count, height, width = stack.shape
    size = size + 1 if size % 2 == 0 else size  # even sizes raised to odd, as the contract filters
    down, across = min(size // 2, height - 1), min(size // 2, width - 1)
    block = 2 * down + 1
    if 2 * block * width * stack.dtype.itemsize > _BLOCK_BYTES:
        raise BackendDeclined(f"a {size}-row window over {width} columns needs more than "
                              f"{_BLOCK_BYTES >> 20} MiB of block buffers per thread")
    bounded = threshold is not None
    below = threshold_below(threshold) if threshold is not None else np.float32(-np.inf)
    compiled = kernels()
    threads = 1 if stack.size < _MIN_THREADED_PIXELS else cpu_threads()
    if count >= threads or height * width < _MIN_THREADED_PIXELS:
        # Whole fields per thread, consecutive ones together (the order of the coordinates).
        edges = np.linspace(0, count, min(threads, count) + 1).astype(np.int64)
        parts = [(compiled, stack, range(int(edges[i]), int(edges[i + 1])), (0, height), down, across, bounded,
                  below) for i in range(len(edges) - 1)]
    else:
        # Few large fields: bands of whole blocks of rows per thread, field by field.
        blocks = -(-height // block)
        per = -(-blocks // threads)
        parts = [(compiled, stack, range(plane, plane + 1), (first * block, min(height, (first + per) * block)),
                  down, across, bounded, below)
                 for plane in range(count) for first in range(0, blocks, per)]
    found = run_parts(_bands, parts)
    # One part's rows are returned as they are (a view of its buffer, whose unwritten pages were
    # never touched); several are joined in order.
    rows = np.concatenate([coords[:held] for coords, held in found]) if len(found) > 1 else found[0][0][:found[0][1]]
    if field.ndim == rows.shape[1]:  # (y, x) of one field, or (plane, y, x) of a 3-D stack
        return np.ascontiguousarray(rows)
    # A single field given as (1, ..., 1, H, W), or a stack of more dimensions: the field's number
    # spelt out over the leading axes.
    out = np.empty((rows.shape[0], field.ndim), dtype=np.int64)
    out[:, -2:] = rows[:, -2:]
    planes = rows[:, 0] if rows.shape[1] == 3 else np.zeros(rows.shape[0], np.int64)
    for axis, lead in enumerate(np.unravel_index(planes, field.shape[:-2])):
        out[:, axis] = lead
    return out

def warm_job() -> object:
    """Compile (or load) the kernel for each dtype it takes, on read-only fields: for a warm-up."""
    return [local_maxima(np.zeros((4, 4), dtype=dtype), 3, 0.5) for dtype in sorted(_FILTERED, key=str)]
