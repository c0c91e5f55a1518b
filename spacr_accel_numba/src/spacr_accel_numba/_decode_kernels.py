# mypy: disallow-untyped-defs=False, disallow-untyped-calls=False
"""The compiled loops of the decode chain (imports numba): the window gather and the cross-power
spectrum's normalisation, each on a share of the work given by the driver (:mod:`._decode`)."""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def gather_fields(stack, points, order, down, across, first, step, out):
    """``out[n, f]``: the maximum of the window at point ``n`` in field ``f``, for the fields
    ``first, first + step, ...``, the points visited in ``order`` (row-major: the field is read
    front to back); edges clipped, NaN winning, a maximum of zero ``+0.0``."""
    count, height, width = stack.shape
    for field in range(first, count, step):
        plane = stack[field]
        for n in order:
            y, x = points[n, 0], points[n, 1]
            top, bottom = max(0, y - down), min(height - 1, y + down)
            left, right = max(0, x - across), min(width - 1, x + across)
            best = np.float32(plane[top, left])
            seen_nan = False
            for row in range(top, bottom + 1):
                for column in range(left, right + 1):
                    value = np.float32(plane[row, column])
                    if math.isnan(value):
                        seen_nan = True
                    elif value > best or math.isnan(best):
                        best = value
            out[n, field] = np.float32(np.nan) if seen_nan else best + np.float32(0.0)


@numba.njit(nogil=True, cache=True)
def normalise_rows(first, second, start, stop):
    """Rows ``start:stop`` of ``second`` become the normalised cross-power spectrum ``A conj(B) / |.|``
    of ``first`` (A) and ``second`` (B), 0 where the product is 0; the zero frequency is set to 0 by
    the driver. ``first`` is only read (it may serve the next pair)."""
    columns = first.shape[1]
    for row in range(start, stop):
        for column in range(columns):
            a, b = first[row, column], second[row, column]
            real = a.real * b.real + a.imag * b.imag
            imag = a.imag * b.real - a.real * b.imag
            magnitude = math.sqrt(real * real + imag * imag)
            if magnitude in (0.0, math.inf):  # squares that under- or overflowed
                magnitude = math.hypot(real, imag)
            if magnitude > 0:
                scale = 1.0 / magnitude  # one division, not two (the ratio moves by an ulp at most)
                second[row, column] = complex(real * scale, imag * scale)
            else:
                second[row, column] = 0j
