# mypy: disallow-untyped-defs=False, disallow-untyped-calls=False
"""The compiled loops of the decode chain (imports numba): the window gather and the cross-power
spectrum's normalisation, each on a share of the work given by the driver (:mod:`._decode`)."""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from . import _locator  # noqa: F401  (before any njit: these kernels' cache stamped with every file they come from)

AHEAD = 16
"""Windows ahead of the one being reduced whose rows are prefetched: the gather is bound by memory
latency (a field's rows are read a few cache lines at a time, too sparse for the hardware's
prefetcher), and measured on 44 fields of 1480 x 1480 this halves its time (8 to 64 all alike)."""


def _prefetch(typingctx, array, row, column):
    """A hint to bring ``array[row, column]``'s cache line in (LLVM's ``llvm.prefetch``, a read, kept
    in every cache level): it retires at once, where a load that misses holds up the ones after it."""
    signature = types.void(array, row, column)

    def codegen(context, builder, sig, args):
        kind = sig.args[0]
        view = context.make_array(kind)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, kind, view, [args[1], args[2]], wraparound=False)
        byte = ir.IntType(8).as_pointer()
        word = ir.IntType(32)
        hint = ir.FunctionType(ir.VoidType(), [byte, word, word, word])
        # The overload's name comes from the pointer type (``p0i8``, or ``p0`` under opaque pointers).
        function = builder.module.declare_intrinsic("llvm.prefetch", [byte], hint)
        builder.call(function, [builder.bitcast(pointer, byte), ir.Constant(word, 0), ir.Constant(word, 3),
                                ir.Constant(word, 1)])
        return context.get_dummy_value()

    return signature, codegen


prefetch: Any = intrinsic(_prefetch)  # called in compiled code as ``prefetch(array, row, column)``


@numba.njit(nogil=True, cache=True)
def _three_by_three(plane, y, x):
    """The maximum of the 3 x 3 window whose top-left pixel is ``(y, x)``, and whether it holds NaN
    (the maximum is then meaningless and the caller writes NaN)."""
    best = np.float32(plane[y, x])
    seen_nan = False
    for row in range(y, y + 3):
        a, b, c = np.float32(plane[row, x]), np.float32(plane[row, x + 1]), np.float32(plane[row, x + 2])
        seen_nan |= math.isnan(a) | math.isnan(b) | math.isnan(c)
        best = max(best, a, b, c)
    return best, seen_nan


@numba.njit(nogil=True, cache=True)
def gather_fields(stack, top, left, high, wide, order, first, step, out):
    """``out[f, order[i]]``: the maximum of window ``i`` (rows ``top[i]`` on, ``high[i]`` of them;
    columns ``left[i]`` on, ``wide[i]`` of them) in field ``f``, for the fields ``first, first +
    step, ...``; the windows come in row-major order, so each field is read front to back while
    its rows are in cache, the rows of the window :data:`AHEAD` on prefetched. NaN wins (tracked
    apart, so the maximum itself is a branch-free select), a maximum of zero is ``+0.0``."""
    count = stack.shape[0]
    windows = top.shape[0]
    for field in range(first, count, step):
        plane = stack[field]
        into = out[field]
        for i in range(windows):
            if i + AHEAD < windows:
                ahead = i + AHEAD
                for row in range(top[ahead], top[ahead] + high[ahead]):
                    prefetch(plane, row, left[ahead])
                    prefetch(plane, row, left[ahead] + wide[ahead] - 1)
            y, x, rows, columns = top[i], left[i], high[i], wide[i]
            if rows == 3 and columns == 3:  # spaCR's window away from the edges: unrolled, 20 % less CPU
                best, seen_nan = _three_by_three(plane, y, x)
            else:
                best = np.float32(plane[y, x])
                seen_nan = False
                for row in range(y, y + rows):
                    for column in range(x, x + columns):
                        value = np.float32(plane[row, column])
                        seen_nan |= math.isnan(value)
                        best = value if value > best else best
            into[order[i]] = np.float32(np.nan) if seen_nan else best + np.float32(0.0)


@numba.njit(nogil=True, cache=True)
def normalise_rows(first, second, start, stop):
    """Rows ``start:stop`` of ``second`` become the normalised cross-power spectrum ``A conj(B) / |.|``
    of ``first`` (A) and ``second`` (B), 0 where the product is 0; the zero frequency is set to 0 by
    the driver. ``first`` is only read (it may serve the next pair). The magnitude's reciprocal is one
    square root and one division (an ulp from spaCR's two divisions); a square that could have under-
    or overflowed takes ``hypot`` instead."""
    columns = first.shape[1]
    for row in range(start, stop):
        for column in range(columns):
            a, b = first[row, column], second[row, column]
            real = a.real * b.real + a.imag * b.imag
            imag = a.imag * b.real - a.real * b.imag
            square = real * real + imag * imag
            if 1e-290 < square < 1e290:
                scale = 1.0 / math.sqrt(square)
            else:
                magnitude = math.hypot(real, imag)
                scale = 1.0 / magnitude if magnitude > 0 else 0.0
            second[row, column] = complex(real * scale, imag * scale)


@numba.njit(nogil=True, cache=True, fastmath=True)
def row_statistics(surface, start, stop, maxima, sums):
    """``maxima[r]`` and ``sums[r]``: row ``r``'s maximum and sum of absolute values, rows
    ``start:stop``, in one vectorised pass over a finite surface (``fastmath`` lets both reductions
    run in SIMD lanes: the maximum is exact in any order, the sum moves by rounding only). The
    driver finds the first maximum as the first row holding the largest row maximum, then that
    row's first maximum: the flat ``argmax``."""
    columns = surface.shape[1]
    for row in range(start, stop):
        best = surface[row, 0]
        total = 0.0
        for column in range(columns):
            value = surface[row, column]
            best = max(best, value)
            total += abs(value)
        maxima[row] = best
        sums[row] = total
