# mypy: disallow-untyped-defs=False, disallow-untyped-calls=False
"""The compiled loop of the spot score (imports numba): NumPy's float32 order, one pass over a band
of rows of the stack, driven by :mod:`._planes`."""

from __future__ import annotations

import numba
import numpy as np


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
            for c in range(cycles):
                row = stack[c, k, y]
                for x in range(width):
                    centre[x] = centre[x] + row[x]
            for x in range(width):
                centre[x] = np.float32(np.float64(centre[x]) / cycles)
            spread[:] = np.float32(0.0)
            for c in range(cycles):
                row = stack[c, k, y]
                for x in range(width):
                    deviation = row[x] - centre[x]
                    spread[x] = spread[x] + deviation * deviation
            for x in range(width):
                total[x] = total[x] + np.sqrt(np.float32(np.float64(spread[x]) / cycles))
        line = out[y]
        for x in range(width):
            line[x] = np.float32(np.float64(total[x]) / channels)
