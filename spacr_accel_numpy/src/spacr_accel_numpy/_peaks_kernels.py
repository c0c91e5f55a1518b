"""The window maxima on the NumPy floor: base intensities at the reads, by gathering.

WHY GATHERING. The intensities of ten thousand reads in 44 fields are 440,000 small windows;
filtering the 44 fields to read one pixel in two hundred of each would do 96 million windows' work.
Here each point's window is a fixed set of flat offsets (clipped at the edges), gathered from every
field at once with ``np.take`` and reduced; points are taken in groups that keep the gathered block
cache-sized, and the fields are shared between the threads.

Imported by :func:`._peaks.spacr_accel_window_maxima` at its first call.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core.toolkit import cpu_threads, run_parts

_GATHER_BYTES = 1 << 23
"""Gathered values per group of points (8 MiB): in cache, and many points per ``np.take``."""


def window_offsets(size: int, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The window's row and column offsets, each capped by the field (a wider window only clips)."""
    down = min(size // 2, height - 1)
    across = min(size // 2, width - 1)
    rows, columns = np.meshgrid(np.arange(-down, down + 1), np.arange(-across, across + 1), indexing="ij")
    return rows.ravel(), columns.ravel()


def _gather(flat: np.ndarray, points: np.ndarray, offsets: tuple[np.ndarray, np.ndarray], shape: tuple[int, int],
            out: np.ndarray, fields: range) -> None:
    """``out[:, f]`` for the fields ``fields``: each point's window gathered and reduced."""
    height, width = shape
    rows = np.clip(points[:, 0] + offsets[0][:, None], 0, height - 1)
    columns = np.clip(points[:, 1] + offsets[1][:, None], 0, width - 1)
    index = rows * width + columns  # (window pixels, n): the reduction runs along contiguous rows
    for field in fields:
        np.max(np.take(flat[field], index), axis=0, out=out[:, field])


_THREADED_WINDOWS = 4096
"""Windows (points times fields) from which the gather is shared between threads."""


def window_maxima(stack: np.ndarray, points: np.ndarray, size: int) -> np.ndarray:
    """The ``size`` x ``size`` window's maximum at each point of every field (edges clipped, NaN winning).

    :param stack: ``(F, H, W)``, float32 or a camera dtype (the maximum is exact in any dtype and
        cast to float32 once).
    :param points: int64 ``(N, 2)`` inside the field.
    :param size: odd window edge.
    :returns: float32 ``(N, F)``, a maximum of zero ``+0.0``.
    """
    count, height, width = stack.shape
    flat = stack.reshape(count, height * width)
    offsets = window_offsets(size, height, width)
    group = max(1, _GATHER_BYTES // (offsets[0].size * stack.dtype.itemsize * 2))
    gathered = np.empty((points.shape[0], count), dtype=stack.dtype)
    # a few windows are read faster than a thread is handed work (2 points in 4 fields: 165 us a
    # call on two threads)
    threads = 1 if points.shape[0] * count < _THREADED_WINDOWS else min(count, cpu_threads())
    for start in range(0, points.shape[0], group):
        part = points[start:start + group]
        into = gathered[start:start + group]
        run_parts(_gather, [(flat, part, offsets, (height, width), into, range(first, count, threads))
                            for first in range(threads)])
    result = gathered.astype(np.float32, copy=False)
    result += np.float32(0.0)  # the contract's sign of zero
    return result
