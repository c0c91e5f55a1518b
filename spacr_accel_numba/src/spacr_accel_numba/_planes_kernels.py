# mypy: disallow-untyped-defs=False, disallow-untyped-calls=False
"""The planes family's compiled loop and its driver: the spot score in NumPy's float32 order of
operations, one compiled pass per band of rows, the bands shared between the CPU's threads. Imported
by the hook of :mod:`._planes` once the kernel is ready (it imports numba, ~0.4 s), and by the
warm-up.

WHY IT IS NumPy's ANSWER. NumPy's float32 ``std(axis=0)`` of a C-ordered ``(C, K, Y, X)`` stack adds
the cycles pixel by pixel in order from ``+0.0`` (the cycle axis is never the inner loop while more
than one pixel is reduced, so no pairwise blocks), divides by the count in float64 (its count is an
``intp``) and rounds once, squares each float32 deviation, sums the squares the same way, divides,
takes the float32 square root; ``mean(axis=0)`` over the channels adds those in order and divides.
The kernel does exactly these operations in that order per pixel (IEEE float32, no fast-math, no
fused multiply-add), so its bits are NumPy's, NaN and infinity included. The core hands every
backend at least two pixels (a single pixel is summed pairwise, and answered by the core).

WHY NOT THE TRANSLATION. A translation is a copy: NumPy's slice copy of a contiguous run is the C
library's ``memcpy``, and the floor writes each byte once. A compiled copy loop measured at half
that speed on a 1480 x 1480 float32 plane, and threads did not pay on a shared two-core machine,
so numba leaves the translation to the floor (docs/decisions.md).

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

from spacr_accel_core.toolkit import cpu_threads, run_parts

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


# ---- the driver -----------------------------------------------------------------------------------


SPLIT_ROWS = 16
"""Rows below which the score runs in one thread (a hand-off costs more than such a band)."""


def spot_score(stack: np.ndarray) -> np.ndarray:
    """float32 ``(Y, X)`` of a C-contiguous float32 ``(C, K, Y, X)`` stack (NumPy's bits)."""
    source = np.ascontiguousarray(stack, dtype=np.float32)
    if source.flags.writeable:  # one compiled variant: the read-only views the core passes
        source = source.view()
        source.flags.writeable = False
    height = source.shape[2]
    out = np.empty(source.shape[2:], dtype=np.float32)
    threads = 1 if height < SPLIT_ROWS else min(cpu_threads(), height)
    edges = np.linspace(0, height, threads + 1).astype(int)
    run_parts(score_rows, [(source, out, int(edges[i]), int(edges[i + 1])) for i in range(threads)])
    return out


def warm_score() -> object:
    """Compile (or load) the kernel on inputs of exactly the driver's types: for a warm-up."""
    stack = np.zeros((2, 1, 2, 2), dtype=np.float32)
    stack.flags.writeable = False
    return spot_score(stack)
