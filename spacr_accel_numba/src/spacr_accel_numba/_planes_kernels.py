# mypy: disallow-untyped-defs=False, disallow-untyped-calls=False
"""The compiled loop of the spot score (imports numba): NumPy's float32 order, one pass over a band
of rows of the stack, driven by :mod:`._planes`.

WHY EIGHT CYCLES A SWEEP. Adding one cycle's row to the running sums at a time loads and stores
every sum once per cycle; on a 1480 x 1480 stack of 11 x 4 planes that traffic, not the reading of
the stack, was the loop's time (17 ms on two threads against 10 ms for merely reading the stack
once). Adding eight cycles' rows in one sweep, then four, then one, keeps each sum in a register
across the cycles it adds and performs the very same additions in the same order (the sum of
cycles 0 to 7 is still ``((s + a0) + a1) + ... + a7``): 11 ms, the same bits.
"""

from __future__ import annotations

import numba
import numpy as np

from . import _locator  # noqa: F401  (before any njit: these kernels' cache stamped with every file they come from)


@numba.njit(nogil=True, cache=True)
def _sum_cycles(sums, stack, k, y):
    """``sums[x] += stack[c, k, y, x]`` for every cycle ``c`` in order, eight, four or one a sweep."""
    cycles, width = stack.shape[0], stack.shape[3]
    c = 0
    while c + 8 <= cycles:
        r0, r1, r2, r3 = stack[c, k, y], stack[c + 1, k, y], stack[c + 2, k, y], stack[c + 3, k, y]
        r4, r5, r6, r7 = stack[c + 4, k, y], stack[c + 5, k, y], stack[c + 6, k, y], stack[c + 7, k, y]
        for x in range(width):
            sums[x] = (((((((sums[x] + r0[x]) + r1[x]) + r2[x]) + r3[x]) + r4[x]) + r5[x]) + r6[x]) + r7[x]
        c += 8
    while c + 4 <= cycles:
        r0, r1, r2, r3 = stack[c, k, y], stack[c + 1, k, y], stack[c + 2, k, y], stack[c + 3, k, y]
        for x in range(width):
            sums[x] = (((sums[x] + r0[x]) + r1[x]) + r2[x]) + r3[x]
        c += 4
    while c < cycles:
        r0 = stack[c, k, y]
        for x in range(width):
            sums[x] = sums[x] + r0[x]
        c += 1


@numba.njit(nogil=True, cache=True)
def _sum_squares(sums, stack, k, y, centre):
    """``sums[x] += (stack[c, k, y, x] - centre[x]) ** 2`` (the deviation rounded, then squared,
    then added) for every cycle ``c`` in order, eight, four or one a sweep."""
    cycles, width = stack.shape[0], stack.shape[3]
    c = 0
    while c + 8 <= cycles:
        r0, r1, r2, r3 = stack[c, k, y], stack[c + 1, k, y], stack[c + 2, k, y], stack[c + 3, k, y]
        r4, r5, r6, r7 = stack[c + 4, k, y], stack[c + 5, k, y], stack[c + 6, k, y], stack[c + 7, k, y]
        for x in range(width):
            m = centre[x]
            d0, d1, d2, d3 = r0[x] - m, r1[x] - m, r2[x] - m, r3[x] - m
            d4, d5, d6, d7 = r4[x] - m, r5[x] - m, r6[x] - m, r7[x] - m
            sums[x] = (((((((sums[x] + d0 * d0) + d1 * d1) + d2 * d2) + d3 * d3) + d4 * d4) + d5 * d5)
                       + d6 * d6) + d7 * d7
        c += 8
    while c + 4 <= cycles:
        r0, r1, r2, r3 = stack[c, k, y], stack[c + 1, k, y], stack[c + 2, k, y], stack[c + 3, k, y]
        for x in range(width):
            m = centre[x]
            d0, d1, d2, d3 = r0[x] - m, r1[x] - m, r2[x] - m, r3[x] - m
            sums[x] = (((sums[x] + d0 * d0) + d1 * d1) + d2 * d2) + d3 * d3
        c += 4
    while c < cycles:
        r0 = stack[c, k, y]
        for x in range(width):
            d0 = r0[x] - centre[x]
            sums[x] = sums[x] + d0 * d0
        c += 1


@numba.njit(nogil=True, cache=True)
def score_rows(stack, out, start, stop):
    """``out[y]`` for rows ``start:stop``: per pixel, the cycles summed in order from ``+0.0`` in
    float32 and divided by their count (in float64, rounded once to float32, as NumPy divides by
    its integer count), the squared deviations summed in order from ``+0.0`` and divided alike, the
    float32 square root; the channels' roots summed in order from ``+0.0`` and divided by their
    count. One row of one channel's cycles at a time: read once from memory, its second reading
    (the deviations) from cache. No fast-math: every operation is IEEE float32, as in NumPy."""
    cycles, channels, _, width = stack.shape
    total = np.empty(width, np.float32)
    centre = np.empty(width, np.float32)
    spread = np.empty(width, np.float32)
    for y in range(start, stop):
        total[:] = np.float32(0.0)
        for k in range(channels):
            centre[:] = np.float32(0.0)
            _sum_cycles(centre, stack, k, y)
            for x in range(width):
                centre[x] = np.float32(np.float64(centre[x]) / cycles)
            spread[:] = np.float32(0.0)
            _sum_squares(spread, stack, k, y, centre)
            for x in range(width):
                total[x] = total[x] + np.sqrt(np.float32(np.float64(spread[x]) / cycles))
        line = out[y]
        for x in range(width):
            line[x] = np.float32(np.float64(total[x]) / channels)
