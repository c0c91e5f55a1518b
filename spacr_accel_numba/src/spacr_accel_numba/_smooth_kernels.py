# mypy: disallow-untyped-defs=False, disallow-untyped-calls=False
"""The compiled loops of the decode chain's filters: the Gaussian passes, and the windowed minimum
(:func:`._filter_kernels.minimum_band`, the window maximum's loops with the minimum, re-exported).

Imported only when one of those operations first runs (``import numba`` costs ~0.5 s); every loop
is ``nogil`` (the driver :mod:`._smooth` splits the rows between threads) and cached on disk.

SCIPY'S BITS. Each pass sums in float64 exactly as SciPy's ``correlate1d`` does (see
:mod:`spacr_accel_core.separable`): the centre times its weight, then each mirrored pair from the
outermost in, ``acc = acc + (left + right) * w``, each operation rounded on its own. No
``fastmath``: without it LLVM neither reorders the sum nor fuses a multiply and an add. The two
passes of a field are fused per row (the column pass of a row, rounded to float32, is at once run
along the row): the field is read from memory once and no intermediate field is written.

TAPS IN FOURS. Each pass adds four mirrored pairs to a pixel's sum in one sweep of the row, each
addition still rounded on its own and in SciPy's order, so the accumulator is read and written once
per four taps instead of once per tap: a 2960 x 2960 float32 Gaussian of sigma 3 (12 taps a side)
went from 26-27 ms to 22-23 ms on two threads, the same bits.
"""

from __future__ import annotations

import numba
import numpy as np

from . import _locator  # noqa: F401  (before any njit: these kernels' cache stamped with every file they come from)
from ._filter_kernels import minimum_band  # noqa: F401  (the driver :mod:`._smooth` reaches every loop through this module)


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
