"""The compiled windowed maximum: van Herk/Gil-Werman down the columns and log-doubling along the
rows, each band of rows one ``nogil`` call (:func:`filter_band`). Split from :mod:`._kernels` (which
re-exports it: the warm-up reaches every kernel through that module) for length; its rules hold
here: slices, not offsets, and the contract's arithmetic (a window holding a NaN is NaN, ``+0.0``
added so a negative zero never leaks).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True, inline="always")
def _largest(a, b):
    # The NaN rule: a window holding a NaN yields NaN. ``a > b`` alone keeps ``b`` when ``a`` is
    # NaN; the bitwise ``|`` (not ``or``) keeps the select branch-free, so it still vectorises.
    # For an integer field ``a != a`` is False and compiles away.
    return a if (a > b) | (a != a) else b  # noqa: PLR0124  # a != a is the NaN test numba compiles for every dtype


@numba.njit(nogil=True, cache=True)
def _pair(src, dst, n, step):
    first = src[:n]
    second = src[step:step + n]
    out = dst[:n]
    for x in range(n):
        out[x] = _largest(first[x], second[x])


@numba.njit(nogil=True, cache=True)
def _pair_out(src, out, n, step):
    first = src[:n]
    second = src[step:step + n]
    for x in range(n):
        out[x] = np.float32(_largest(first[x], second[x])) + np.float32(0.0)


@numba.njit(nogil=True, cache=True)
def _across(padded, out, spare, width, radius):
    """``out`` = the ``2 radius + 1`` wide running maximum of the row held in
    ``padded[radius:radius + width]``, its ends repeated, by doubling: the maximum over 2w is that
    of two overlapping w-maxima (width 15: four passes). The caller writes the row straight into
    ``padded`` (one copy fewer per row)."""
    size = 2 * radius + 1
    first, last = padded[radius], padded[radius + width - 1]
    for x in range(radius):
        padded[x] = first
        padded[radius + width + x] = last
    length = width + 2 * radius
    reached = 1
    flipped = False
    while True:
        step = min(reached, size - reached)
        if reached + step == size:
            _pair_out(spare if flipped else padded, out, width, step)
            return
        length -= step
        if flipped:
            _pair(spare, padded, length, step)
        else:
            _pair(padded, spare, length, step)
        flipped = not flipped
        reached += step


@numba.njit(nogil=True, cache=True)
def filter_band(field, out, down, across, first_row, stop_row):
    """Rows ``first_row:stop_row`` of the window maximum of ``field`` into float32 ``out``.

    Down the columns by van Herk/Gil-Werman: the rows, edge-repeated, fall into blocks of
    ``k = 2 down + 1``; a window starting ``j`` rows into block ``b`` is the maximum of block b's
    suffix from ``j`` and block ``b + 1``'s prefix to ``j - 1``, so each pixel costs three maxima
    whatever the window. Then across each row by :func:`_across`. ``first_row`` is a multiple of
    ``k`` (the driver cuts bands on block boundaries); returns 0.
    """
    height, width = field.shape
    k = 2 * down + 1
    suffix = np.empty((k, width), field.dtype)
    prefix = np.empty((k, width), field.dtype)
    padded = np.empty(width + 2 * across, field.dtype)
    spare = np.empty(width + 2 * across, field.dtype)
    # The column maximum goes straight into the padded row the across pass reads.
    middle = padded[across:across + width]
    for block in range(first_row // k, (stop_row - 1) // k + 1):
        top = block * k - down  # the block's first row, in edge-repeated coordinates
        for j in range(k - 1, -1, -1):
            src = field[min(max(top + j, 0), height - 1)]
            dst = suffix[j]
            if j == k - 1:
                for x in range(width):
                    dst[x] = src[x]
            else:
                below = suffix[j + 1]
                for x in range(width):
                    dst[x] = _largest(src[x], below[x])
        for j in range(k):
            src = field[min(max(top + k + j, 0), height - 1)]
            dst = prefix[j]
            if j == 0:
                for x in range(width):
                    dst[x] = src[x]
            else:
                above = prefix[j - 1]
                for x in range(width):
                    dst[x] = _largest(above[x], src[x])
        for y in range(max(first_row, block * k), min(stop_row, (block + 1) * k)):
            j = y - block * k
            tail = suffix[j]
            if j == 0:
                for x in range(width):
                    middle[x] = tail[x]
            else:
                head = prefix[j - 1]
                for x in range(width):
                    middle[x] = _largest(tail[x], head[x])
            if across == 0:  # a one-column field: no across pass, only the cast
                target = out[y]
                for x in range(width):
                    target[x] = np.float32(middle[x]) + np.float32(0.0)
            else:
                _across(padded, out[y], spare, width, across)
    return 0
