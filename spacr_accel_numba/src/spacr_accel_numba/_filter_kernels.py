"""The compiled window extremes: van Herk/Gil-Werman down the columns and log-doubling along the
rows, each band of rows one ``nogil`` call (:func:`filter_band` for the maximum, :func:`minimum_band`
for the minimum). Split from :mod:`._kernels` (which re-exports the maximum: the warm-up reaches
every kernel through that module) for length; its rules hold here: slices, not offsets, and the
contract's arithmetic (a window holding a NaN is NaN, ``+0.0`` added so a negative zero never leaks).

ONE SET OF LOOPS, THE EXTREME CHOSEN AT COMPILE TIME. The blocks (:func:`_runs`, :func:`_block_row`),
the doubling pass (:func:`_across`) and the band (:func:`_band`) take ``largest``, always the
constant ``True`` or ``False`` in the compiled caller: numba types a constant argument as a literal
and compiles one variant per value, in which the choice (:func:`_extreme`) is a constant that LLVM
folds away before it vectorises the loops. (From Python a plain ``bool`` would not be a literal:
call :func:`filter_band` or :func:`minimum_band`.) The block helpers are inlined by numba
(``inline="always"``) so that each variant of :func:`_band` keeps the shape of the loop nest it
replaced: as separate functions LLVM left them as calls, each taking and dropping references to
its row views. Inlined, :func:`_band` calls the same functions and compiles to as many vector
instructions (164 for float32, 104 for uint16) as the hand-copied nest, and against the three
copies (the maximum's, the minimum's, the local maxima's), side by side on one thread, best of 21
alternating runs: the same bits; the 4096 x 4096 float32 windows (sizes 3, 15 and 31) and local
maxima within 2% either way, as two copies of the old loops differ run to run; the 1.6 ms
2048 x 2048 uint16 window at size 5 about 2% slower on the median of six processes (single runs
of it scatter by up to 8% either way). Passing :func:`_largest` itself as the argument timed the
same, but numba then embeds the function object's address in the caller, and a kernel holding an
address is not cached on disk. :func:`._science_kernels.peaks_band` builds its rows from the same
blocks and doubling pass.
"""

from __future__ import annotations

import numba
import numpy as np

from . import _locator  # noqa: F401  (before any njit: these kernels' cache stamped with every file they come from)


@numba.njit(nogil=True, cache=True, inline="always")
def _largest(a, b):
    # The NaN rule: a window holding a NaN yields NaN. ``a > b`` alone keeps ``b`` when ``a`` is
    # NaN; the bitwise ``|`` (not ``or``) keeps the select branch-free, so it still vectorises.
    # For an integer field ``a != a`` is False and compiles away.
    return a if (a > b) | (a != a) else b  # noqa: PLR0124  # a != a is the NaN test numba compiles for every dtype


@numba.njit(nogil=True, cache=True, inline="always")
def _smallest(a, b):
    # The NaN rule as in :func:`_largest`, branch-free so that it vectorises.
    return a if (a < b) | (a != a) else b  # noqa: PLR0124  # a != a is the NaN test for every dtype


@numba.njit(nogil=True, cache=True, inline="always")
def _extreme(a, b, largest):
    """:func:`_largest` or :func:`_smallest` of ``a`` and ``b``, as the constant ``largest`` says."""
    return _largest(a, b) if largest else _smallest(a, b)


@numba.njit(nogil=True, cache=True)
def _pair(src, dst, n, step, largest):
    first = src[:n]
    second = src[step:step + n]
    out = dst[:n]
    for x in range(n):
        out[x] = _extreme(first[x], second[x], largest)


@numba.njit(nogil=True, cache=True)
def _pair_out(src, out, n, step, largest):
    first = src[:n]
    second = src[step:step + n]
    for x in range(n):
        out[x] = np.float32(_extreme(first[x], second[x], largest)) + np.float32(0.0)


@numba.njit(nogil=True, cache=True)
def _across(padded, out, spare, width, radius, largest):
    """``out`` = the ``2 radius + 1`` wide running maximum (``largest``) or minimum
    of the row held in ``padded[radius:radius + width]``, its ends repeated (the
    extreme of a window clipped to the row), by doubling: the extreme over 2w is that of two
    overlapping w-extremes (width 15: four passes). The caller writes the row straight into
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
            _pair_out(spare if flipped else padded, out, width, step, largest)
            return
        length -= step
        if flipped:
            _pair(spare, padded, length, step, largest)
        else:
            _pair(padded, spare, length, step, largest)
        flipped = not flipped
        reached += step


@numba.njit(nogil=True, cache=True, inline="always")
def _buffers(field, down, across):
    """A band's working rows, in the field's dtype: the suffix and the prefix runs of a block
    (``2 down + 1`` rows each, :func:`_runs`), and the padded row :func:`_across` reads with its spare."""
    k, width = 2 * down + 1, field.shape[1]
    return (np.empty((k, width), field.dtype), np.empty((k, width), field.dtype),
            np.empty(width + 2 * across, field.dtype), np.empty(width + 2 * across, field.dtype))


@numba.njit(nogil=True, cache=True, inline="always")
def _runs(field, suffix, prefix, top, k, largest):
    """The runs of the block of ``k`` rows (``suffix``'s and ``prefix``'s) starting at row ``top`` (in
    edge-repeated coordinates): ``suffix[j]`` = the extreme of the block's rows ``j`` to ``k - 1``,
    ``prefix[j]`` = that of the next block's rows ``0`` to ``j``."""
    height, width = field.shape
    for j in range(k - 1, -1, -1):
        src = field[min(max(top + j, 0), height - 1)]
        dst = suffix[j]
        if j == k - 1:
            for x in range(width):
                dst[x] = src[x]
        else:
            below = suffix[j + 1]
            for x in range(width):
                dst[x] = _extreme(src[x], below[x], largest)
    for j in range(k):
        src = field[min(max(top + k + j, 0), height - 1)]
        dst = prefix[j]
        if j == 0:
            for x in range(width):
                dst[x] = src[x]
        else:
            above = prefix[j - 1]
            for x in range(width):
                dst[x] = _extreme(above[x], src[x], largest)


@numba.njit(nogil=True, cache=True, inline="always")
def _block_row(suffix, prefix, j, middle, largest):
    """``middle`` = the column extreme of the window starting ``j`` rows into the block whose runs
    :func:`_runs` filled: the block's suffix from ``j`` with the next block's prefix to ``j - 1``."""
    width = suffix.shape[1]
    tail = suffix[j]
    if j == 0:
        for x in range(width):
            middle[x] = tail[x]
    else:
        head = prefix[j - 1]
        for x in range(width):
            middle[x] = _extreme(tail[x], head[x], largest)


@numba.njit(nogil=True, cache=True)
def _band(field, out, down, across, first_row, stop_row, largest):
    """Rows ``first_row:stop_row`` of the window maximum (``largest``) or minimum of ``field`` into float32 ``out``.

    Down the columns by van Herk/Gil-Werman: the rows, edge-repeated, fall into blocks of
    ``k = 2 down + 1``; a window starting ``j`` rows into block ``b`` is the extreme of block b's
    suffix from ``j`` and block ``b + 1``'s prefix to ``j - 1``, so each pixel costs three
    comparisons whatever the window. Then across each row by :func:`_across`. ``first_row`` is a
    multiple of ``k`` (the driver cuts bands on block boundaries); returns 0.
    """
    width = field.shape[1]
    k = 2 * down + 1
    suffix, prefix, padded, spare = _buffers(field, down, across)
    # The column extreme goes straight into the padded row the across pass reads.
    middle = padded[across:across + width]
    for block in range(first_row // k, (stop_row - 1) // k + 1):
        _runs(field, suffix, prefix, block * k - down, k, largest)
        for y in range(max(first_row, block * k), min(stop_row, (block + 1) * k)):
            _block_row(suffix, prefix, y - block * k, middle, largest)
            if across == 0:  # a one-column field: no across pass, only the cast
                target = out[y]
                for x in range(width):
                    target[x] = np.float32(middle[x]) + np.float32(0.0)
            else:
                _across(padded, out[y], spare, width, across, largest)
    return 0


@numba.njit(nogil=True, cache=True)
def filter_band(field, out, down, across, first_row, stop_row):
    """Rows ``first_row:stop_row`` of the window maximum of ``field`` into float32 ``out`` (:func:`_band`)."""
    return _band(field, out, down, across, first_row, stop_row, True)


@numba.njit(nogil=True, cache=True)
def minimum_band(field, out, down, across, first_row, stop_row):
    """Rows ``first_row:stop_row`` of the window minimum of ``field`` into float32 ``out``
    (:func:`_band`; ``first_row`` a multiple of ``2 down + 1``). A minimum of zero is ``+0.0``."""
    return _band(field, out, down, across, first_row, stop_row, False)
