"""The filters family's compiled loops and their drivers: the window maximum and minimum, and the
Gaussian passes, each band of rows one ``nogil`` call, the bands (or whole fields of a stack) shared
between threads and written straight into the result. Imported by the hooks of :mod:`._filters` once
the kernel they need is ready (it imports numba, ~0.4 s), and by the warm-up.

THE WINDOW EXTREMES. Van Herk/Gil-Werman down the columns and log-doubling along the rows
(:func:`filter_band` for the maximum, :func:`minimum_band` for the minimum). The rules of every
compiled loop of this package hold here: slices, not offsets, and the contract's arithmetic (a
window holding a NaN is NaN, ``+0.0`` added so a negative zero never leaks).

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
address is not cached on disk. :func:`._peaks_kernels.peaks_band` builds its rows from the same
blocks and doubling pass.

THE GAUSSIAN PASSES: SCIPY'S BITS. Each pass sums in float64 exactly as SciPy's ``correlate1d`` does
(see :mod:`spacr_accel_core.separable`): the centre times its weight, then each mirrored pair from the
outermost in, ``acc = acc + (left + right) * w``, each operation rounded on its own. No
``fastmath``: without it LLVM neither reorders the sum nor fuses a multiply and an add. The two
passes of a field are fused per row (the column pass of a row, rounded to float32, is at once run
along the row): the field is read from memory once and no intermediate field is written.

TAPS IN FOURS. Each pass adds four mirrored pairs to a pixel's sum in one sweep of the row, each
addition still rounded on its own and in SciPy's order, so the accumulator is read and written once
per four taps instead of once per tap: a 2960 x 2960 float32 Gaussian of sigma 3 (12 taps a side)
went from 26-27 ms to 22-23 ms on two threads, the same bits.

Working memory per thread is a few rows (a float64 accumulator and the continued row), whatever
the stack's size: a stack costs its input and its output.
"""

from __future__ import annotations

import numba
import numpy as np

from spacr_accel_core import BackendDeclined
from spacr_accel_core.toolkit import Pass, cpu_threads, gaussian_passes, laplace_terms, run_parts, source_index

from . import _locator  # noqa: F401  (before any njit: these kernels' cache stamped with every file they come from)

_MIN_THREADED_PIXELS = 1 << 18  # below this a thread hand-off costs more than it saves
_BLOCK_BYTES = 32 << 20
"""Most a thread's two block buffers (``2 x (2 radius + 1)`` rows) may take: a window so tall
that they would not fit goes to the next backend, whose stripes need no such buffers."""

_TAKEN = frozenset(np.dtype(name) for name in ("float32", "uint16", "uint8"))
"""Dtypes the Gaussian and minimum loops read as they are (any other is cast to float32, field by field)."""


# ---- the window extremes: the compiled loops --------------------------------------------------------


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


# ---- the Gaussian passes: the compiled loops ------------------------------------------------------


@numba.njit(nogil=True, cache=True, inline="always")
def _four_pairs(field, rows, radius, y, j):
    """The rows ``j``, ``j - 1``, ``j - 2`` and ``j - 3`` above row ``y`` and below it, each above
    row with its mirror below (``rows`` maps the continued rows to the field's)."""
    return (field[rows[radius + y - j]], field[rows[radius + y + j]],
            field[rows[radius + y - j + 1]], field[rows[radius + y + j - 1]],
            field[rows[radius + y - j + 2]], field[rows[radius + y + j - 2]],
            field[rows[radius + y - j + 3]], field[rows[radius + y + j - 3]])


@numba.njit(nogil=True, cache=True)
def _down(field, rows, y, radius, weights, sign, acc):
    """``acc`` = the float64 column pass of row ``y`` (``rows`` maps the continued rows to the field's)."""
    width = acc.shape[0]
    centre = field[y]
    w0 = weights[0]
    for x in range(width):
        acc[x] = np.float64(centre[x]) * w0
    j = radius
    if sign > 0:
        while j >= 4:
            a1, b1, a2, b2, a3, b3, a4, b4 = _four_pairs(field, rows, radius, y, j)
            w1, w2, w3, w4 = weights[j], weights[j - 1], weights[j - 2], weights[j - 3]
            for x in range(width):
                acc[x] = ((((acc[x] + (np.float64(a1[x]) + np.float64(b1[x])) * w1)
                            + (np.float64(a2[x]) + np.float64(b2[x])) * w2)
                           + (np.float64(a3[x]) + np.float64(b3[x])) * w3)
                          + (np.float64(a4[x]) + np.float64(b4[x])) * w4)
            j -= 4
        while j >= 1:
            above = field[rows[radius + y - j]]
            below = field[rows[radius + y + j]]
            w = weights[j]
            for x in range(width):
                acc[x] = acc[x] + (np.float64(above[x]) + np.float64(below[x])) * w
            j -= 1
    else:
        for j in range(radius, 0, -1):
            above = field[rows[radius + y - j]]
            below = field[rows[radius + y + j]]
            w = weights[j]
            for x in range(width):
                acc[x] = acc[x] + (np.float64(above[x]) - np.float64(below[x])) * w


@numba.njit(nogil=True, cache=True)
def _along(line, columns, radius, weights, sign, acc):
    """``acc`` = the float64 row pass of ``line`` (its middle holds the row; its ends are filled
    here from ``columns``, the continued columns' map)."""
    width = acc.shape[0]
    for p in range(radius):
        line[p] = line[radius + columns[p]]
        line[radius + width + p] = line[radius + columns[radius + width + p]]
    middle = line[radius:radius + width]
    w0 = weights[0]
    for x in range(width):
        acc[x] = middle[x] * w0
    j = radius
    if sign > 0:
        while j >= 4:
            l1, r1 = line[radius - j:radius - j + width], line[radius + j:radius + j + width]
            l2, r2 = line[radius - j + 1:radius - j + 1 + width], line[radius + j - 1:radius + j - 1 + width]
            l3, r3 = line[radius - j + 2:radius - j + 2 + width], line[radius + j - 2:radius + j - 2 + width]
            l4, r4 = line[radius - j + 3:radius - j + 3 + width], line[radius + j - 3:radius + j - 3 + width]
            w1, w2, w3, w4 = weights[j], weights[j - 1], weights[j - 2], weights[j - 3]
            for x in range(width):
                acc[x] = (((acc[x] + (l1[x] + r1[x]) * w1) + (l2[x] + r2[x]) * w2)
                          + (l3[x] + r3[x]) * w3) + (l4[x] + r4[x]) * w4
            j -= 4
        while j >= 1:
            left = line[radius - j:radius - j + width]
            right = line[radius + j:radius + j + width]
            w = weights[j]
            for x in range(width):
                acc[x] = acc[x] + (left[x] + right[x]) * w
            j -= 1
    else:
        for j in range(radius, 0, -1):
            left = line[radius - j:radius - j + width]
            right = line[radius + j:radius + j + width]
            w = weights[j]
            for x in range(width):
                acc[x] = acc[x] + (left[x] - right[x]) * w


@numba.njit(nogil=True, cache=True)
def _down_pair(field, rows, y, radius, first, second, acc, spare):
    """:func:`_down` of two symmetric kernels at once (the Laplacian's two column passes): each
    mirrored pair is read and added once, then weighted by each kernel, in SciPy's order for each."""
    width = acc.shape[0]
    centre = field[y]
    for x in range(width):
        value = np.float64(centre[x])
        acc[x] = value * first[0]
        spare[x] = value * second[0]
    j = radius
    while j >= 4:
        a1, b1, a2, b2, a3, b3, a4, b4 = _four_pairs(field, rows, radius, y, j)
        w1, w2, w3, w4 = first[j], first[j - 1], first[j - 2], first[j - 3]
        v1, v2, v3, v4 = second[j], second[j - 1], second[j - 2], second[j - 3]
        for x in range(width):
            p1 = np.float64(a1[x]) + np.float64(b1[x])
            p2 = np.float64(a2[x]) + np.float64(b2[x])
            p3 = np.float64(a3[x]) + np.float64(b3[x])
            p4 = np.float64(a4[x]) + np.float64(b4[x])
            acc[x] = (((acc[x] + p1 * w1) + p2 * w2) + p3 * w3) + p4 * w4
            spare[x] = (((spare[x] + p1 * v1) + p2 * v2) + p3 * v3) + p4 * v4
        j -= 4
    while j >= 1:
        above = field[rows[radius + y - j]]
        below = field[rows[radius + y + j]]
        w, v = first[j], second[j]
        for x in range(width):
            pair = np.float64(above[x]) + np.float64(below[x])
            acc[x] = acc[x] + pair * w
            spare[x] = spare[x] + pair * v
        j -= 1


@numba.njit(nogil=True, cache=True)
def _columns_of_row(field, rows, y, down, signs, lines, rh, acc, spare):
    """Each term's column pass of row ``y``, rounded to float32 as SciPy writes it, into the middle
    of that term's continued row ``lines[term]`` (the row itself where the rows are not smoothed)."""
    terms, width = lines.shape[0], acc.shape[0]
    rv = down.shape[1] - 1
    if rv < 0:
        source = field[y]
        for term in range(terms):
            middle = lines[term, rh:rh + width]
            for x in range(width):
                middle[x] = np.float64(source[x])
        return
    if terms == 2 and signs[0, 0] > 0 and signs[1, 0] > 0:
        _down_pair(field, rows, y, rv, down[0], down[1], acc, spare)
        first, second = lines[0, rh:rh + width], lines[1, rh:rh + width]
        for x in range(width):
            first[x] = np.float64(np.float32(acc[x]))
            second[x] = np.float64(np.float32(spare[x]))
        return
    for term in range(terms):
        _down(field, rows, y, rv, down[term], signs[term, 0], acc)
        middle = lines[term, rh:rh + width]
        for x in range(width):
            middle[x] = np.float64(np.float32(acc[x]))


@numba.njit(nogil=True, cache=True)
def smooth_band(field, out, rows, columns, down, across, signs, first_row, stop_row):
    """Rows ``first_row:stop_row`` of one field's Gaussian (one term) or Laplacian (two terms).

    :param field: ``(H, W)`` float32, uint16 or uint8, read as float64 (exact).
    :param out: ``(H, W)`` float32: each term rounded to float32, the terms added in float32.
    :param rows: the continued rows' map (length ``H + 2 rv``); ``columns`` likewise.
    :param down: ``(terms, rv + 1)`` float64 half-weights of each term's column pass, or
        ``(terms, 0)`` when the rows are not smoothed; ``across`` likewise along the rows.
    :param signs: ``(terms, 2)``: each pass's symmetry, ``1`` or ``-1``.
    """
    width = field.shape[1]
    terms = signs.shape[0]
    rh = max(across.shape[1] - 1, 0)
    acc = np.empty(width, np.float64)
    spare = np.empty(width, np.float64)
    lines = np.empty((terms, width + 2 * rh), np.float64)
    for y in range(first_row, stop_row):
        _columns_of_row(field, rows, y, down, signs, lines, rh, acc, spare)
        target = out[y]
        for term in range(terms):
            if across.shape[1] > 0:
                _along(lines[term], columns, rh, across[term], signs[term, 1], acc)
            else:
                acc[:] = lines[term, :width]
            if term == 0:
                for x in range(width):
                    target[x] = np.float32(acc[x])
            else:
                for x in range(width):
                    target[x] = target[x] + np.float32(acc[x])
    return 0


# ---- the drivers ----------------------------------------------------------------------------------


def window_maximum(field: np.ndarray, size: int) -> np.ndarray:
    """The ``size`` x ``size`` window maximum of a 2-D field, edges repeated, as float32.

    :param field: non-empty 2-D float32, uint8 or uint16 (a camera field is filtered in its own
        dtype and cast once when written: the cast is exact and monotone).
    :param size: odd window edge, at least 3; each axis's radius is capped by its own length.
    :raises BackendDeclined: a window so tall that the block buffers would exceed
        :data:`_BLOCK_BYTES` per thread.
    """
    height, width = field.shape
    down, across = min(size // 2, height - 1), min(size // 2, width - 1)
    block = 2 * down + 1
    if 2 * block * width * field.dtype.itemsize > _BLOCK_BYTES:
        raise BackendDeclined(f"a {size}-row window over {width} columns needs more than "
                              f"{_BLOCK_BYTES >> 20} MiB of block buffers per thread")
    if not field.flags.c_contiguous:
        field = np.ascontiguousarray(field)
    if field.flags.writeable:  # the kernel is compiled for the read-only views the core passes
        field = field.view()
        field.flags.writeable = False
    out = np.empty((height, width), dtype=np.float32)
    blocks = -(-height // block)
    threads = 1 if height * width < _MIN_THREADED_PIXELS else min(cpu_threads(), blocks)
    per = -(-blocks // threads)
    parts = [(field, out, down, across, first * block, min(height, (first + per) * block))
             for first in range(0, blocks, per)]
    run_parts(filter_band, parts)
    return out


def warm_filter(dtype: str) -> object:
    """Compile (or load) the window maximum's band for ``dtype`` on a read-only field (the core hands
    plugins read-only views): for a warm-up."""
    sample = np.zeros((4, 4), dtype=dtype)
    sample.flags.writeable = False
    return filter_band(sample, np.empty((4, 4), np.float32), 1, 1, 0, 4)


def _weights(terms: tuple[tuple[Pass, ...], ...], axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Each term's half-weights along ``axis`` as ``(terms, radius + 1)`` (``(terms, 0)`` when the
    axis is not smoothed), and their signs."""
    chosen = [next((p for p in passes if p.axis == axis), None) for passes in terms]
    if chosen[0] is None:
        return np.zeros((len(terms), 0)), np.ones(len(terms), np.int64)
    return (np.array([p.weights for p in chosen if p is not None], dtype=np.float64),
            np.array([p.sign for p in chosen if p is not None], dtype=np.int64))


def _parts(count: int, height: int, width: int, block: int) -> list[tuple[int, int, int]]:
    """``(field, first_row, stop_row)`` per thread: whole fields when there are enough, else bands
    of each field (each a multiple of ``block`` rows from the field's top)."""
    threads = 1 if count * height * width < _MIN_THREADED_PIXELS else cpu_threads()
    if count >= threads or height * width < _MIN_THREADED_PIXELS:
        return [(field, 0, height) for field in range(count)]
    blocks = -(-height // block)
    per = -(-blocks // threads)
    return [(field, first * block, min(height, (first + per) * block))
            for field in range(count) for first in range(0, blocks, per)]


def _run(band: object, stack: np.ndarray, into: np.ndarray, parts: list[tuple[int, int, int]], *args: object) -> None:
    threads = cpu_threads()

    def share(first: int) -> None:
        for number in range(first, len(parts), threads):
            plane, start, stop = parts[number]
            band(stack[plane], into[plane], *args, start, stop)  # type: ignore[operator]  # a compiled kernel

    run_parts(share, [(first,) for first in range(min(threads, len(parts)))])


def _prepared(field: np.ndarray, out: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if field.dtype not in _TAKEN:
        field = field.astype(np.float32)  # a float64 or int16 field: the contract's float32 cast
    stack = np.ascontiguousarray(field).reshape(-1, *field.shape[-2:])
    if stack.flags.writeable:  # one compiled variant: the read-only views the core passes
        stack = stack.view()
        stack.flags.writeable = False
    result = np.empty(field.shape, np.float32) if out is None else out
    return stack, result, result.reshape(stack.shape)


def gaussian(field: np.ndarray, sigma: tuple[float, float], out: np.ndarray | None, truncate: float, mode: str,
             laplace: bool) -> np.ndarray:
    """``gaussian_filter`` (or ``gaussian_laplace``) of every field of ``(..., H, W)``, SciPy's bits.

    :param field: float32, uint16 or uint8 (read as they are); other dtypes cast to float32.
    :param sigma: ``(rows, columns)``, not both skipped (the core answers that).
    :param out: the float32 result to write into, or ``None``.
    :param truncate: the reach in standard deviations.
    :param mode: ``"reflect"`` or ``"nearest"``.
    :param laplace: the Laplacian of the Gaussian rather than the Gaussian.
    """
    terms = laplace_terms(sigma, truncate) if laplace else (gaussian_passes(sigma, truncate),)
    down, down_signs = _weights(terms, -2)
    across, across_signs = _weights(terms, -1)
    stack, result, into = _prepared(field, out)
    _, height, width = stack.shape
    rows = source_index(height, max(down.shape[1] - 1, 0), mode)
    columns = source_index(width, max(across.shape[1] - 1, 0), mode)
    signs = np.ascontiguousarray(np.stack([down_signs, across_signs], axis=1))
    _run(smooth_band, stack, into, _parts(stack.shape[0], height, width, 1), rows, columns,
         down, across, signs)
    return result


def minimum(field: np.ndarray, size: int, out: np.ndarray | None) -> np.ndarray:
    """The ``size`` x ``size`` window minimum of every field (the window clipped to the field,
    which both boundary modes give), a NaN winning, a zero ``+0.0``."""
    stack, result, into = _prepared(field, out)
    _, height, width = stack.shape
    down, across = min(size // 2, height - 1), min(size // 2, width - 1)
    block = 2 * down + 1
    if 2 * block * width * stack.dtype.itemsize > _BLOCK_BYTES:
        raise BackendDeclined(f"a {size}-row window over {width} columns needs more than "
                              f"{_BLOCK_BYTES >> 20} MiB of block buffers per thread")
    _run(minimum_band, stack, into, _parts(stack.shape[0], height, width, block), down, across)
    return result


def warm_smooth() -> object:
    """Compile (or load) each loop on read-only fields of each dtype it takes: for a warm-up."""
    done = []
    for dtype in sorted(_TAKEN, key=str):
        sample = np.zeros((4, 4), dtype=dtype)
        sample.flags.writeable = False
        done += [gaussian(sample, (1.0, 1.0), None, 4.0, "reflect", laplace=False),
                 gaussian(sample, (1.0, 0.0), None, 4.0, "reflect", laplace=True),
                 gaussian(sample, (1.0, 1.0), None, 4.0, "reflect", laplace=True),
                 minimum(sample, 3, None), minimum(np.zeros((16, 4), dtype=dtype), 9, None)]
    return done
