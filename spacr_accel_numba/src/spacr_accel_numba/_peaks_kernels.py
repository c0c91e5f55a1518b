# mypy: disallow-untyped-defs=False, disallow-untyped-calls=False
"""The peaks family's compiled loops and their drivers: local maxima as coordinates in one compiled
pass, and each point's window maximum in every field of a stack. Imported by the hooks of
:mod:`._peaks` once the kernel they need is ready (it imports numba, ~0.4 s), and by the warm-up.

LOCAL MAXIMA: WHY FUSED. ``argwhere((maximum_filter(f) == f) & (f > t))`` writes a filtered copy of
the field (64 MiB at 4096 x 4096, most of it in fresh pages), reads it back beside the field, then
writes and scans a mask. Here each filtered row (the filter of :mod:`._filters_kernels`, by the same
loops) is compared with the field's row while both are in cache, and only the peaks' coordinates are
kept (:func:`peaks_band`): the windowed maximum is never written out. The bands of a large field, or
whole fields of a stack, are shared between threads; the coordinates come back in row-major order.

The answer equals the NumPy floor's ``spacr_accel_numpy``'s: the maximum is
exact, the comparisons are made on the float32 values, and the threshold is the floor's
:func:`~spacr_accel_core.toolkit.threshold_below`.

WINDOW MAXIMA. Each point's window is read straight from every field (no index arrays, no
gathered copies), the windows clipped once and walked in row-major order field by field (a
field's rows stay in cache while its windows are read), the fields shared between the threads.
The walk is bound by memory latency, not arithmetic: the rows of the window 16 ahead are
prefetched, which measured on 10,000 points in 44 fields of 1480 x 1480 took one thread's gather
from 42 ms to 18 ms. Points in any order are answered in that order (sorted first when they are
not row-major already, as ``local_maxima``'s are).
"""

from __future__ import annotations

import logging
import math
import typing
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from spacr_accel_core import BackendDeclined
from spacr_accel_core.toolkit import cpu_threads, run_parts, threshold_below

from . import _locator  # noqa: F401  (before any njit: these kernels' cache stamped with every file they come from)
from ._filters_kernels import _BLOCK_BYTES, _MIN_THREADED_PIXELS, _across, _block_row, _buffers, _runs

_log = logging.getLogger(__name__)

_FILTERED = frozenset(np.dtype(name) for name in ("float32", "uint8", "uint16"))
"""Dtypes the band kernel compares in their own type (others are cast to float32 first)."""

_GATHERED = frozenset(np.dtype(name) for name in ("float32", "uint16", "uint8"))
"""Dtypes the gather is compiled for (the core casts others to float32 for this plugin)."""


# ---- local maxima: the compiled loops --------------------------------------------------------------


def _cttz_typing(typingctx, value):
    """The count of trailing zero bits of a non-zero uint64, as LLVM's ``cttz`` (one ``tzcnt``):
    where a word of a byte mask holds a peak, without a branch per byte."""
    if value != types.uint64:
        return None

    def codegen(context, builder, signature, args):  # numba calls it with these four
        word = ir.IntType(64)
        flag = ir.IntType(1)
        cttz = cgutils.get_or_insert_function(builder.module, ir.FunctionType(word, [word, flag]), "llvm.cttz.i64")
        return builder.call(cttz, [args[0], flag(1)])  # 1: zero input is undefined (never passed)

    return types.int64(types.uint64), codegen


# Cast for the type checker only: numba's intrinsic wrapper is typed as taking the typing context too.
_trailing_zeros = typing.cast("Callable[[np.uint64], int]", intrinsic(_cttz_typing))


@numba.njit(nogil=True, cache=True)
def _room(coords, held, more):
    """``coords`` with room for ``more`` rows after ``held`` (grown by doubling, the kept rows copied)."""
    if held + more <= coords.shape[0]:
        return coords
    grown = np.empty((max(2 * coords.shape[0], held + more), coords.shape[1]), np.int64)
    grown[:held] = coords[:held]
    return grown


@numba.njit(nogil=True, cache=True)
def peaks_band(  # noqa: PLR0912  # one loop nest, whole, so LLVM sees it entire
        field, plane, down, across, first_row, stop_row, bounded, below, coords, held):
    """The local maxima of rows ``first_row:stop_row`` of one 2-D field, appended to ``coords``.

    The window maximum is :func:`._filters_kernels.filter_band`'s, row by row, by its loops (the
    van Herk/Gil-Werman blocks of :func:`._filters_kernels._runs` and :func:`._filters_kernels._block_row`
    down the columns, :func:`._filters_kernels._across` along the row), but each filtered row is compared with the
    field's row while both are in cache, and only the coordinates of the pixels equal to it (and
    greater than the float32 ``below`` when ``bounded``) are kept: the
    filtered field is never written out. ``first_row`` is a multiple of ``2 down + 1``.

    :returns: ``(coords, held)``: the int64 buffer, ``(capacity, 3)`` rows ``(plane, y, x)`` or
        ``(capacity, 2)`` rows ``(y, x)`` as it was passed, and its count.
    """
    width = field.shape[1]
    k = 2 * down + 1
    suffix, prefix, padded, spare = _buffers(field, down, across)
    row_max = np.empty(width, np.float32)
    columns = np.empty(width, np.int64)
    mask = np.zeros(-(-width // 8) * 8, np.uint8)  # the tail past the width stays 0
    words = mask.view(np.uint64)
    middle = padded[across:across + width]
    for block in range(first_row // k, (stop_row - 1) // k + 1):
        if down > 0:
            _runs(field, suffix, prefix, block * k - down, k, True)
        for y in range(max(first_row, block * k), min(stop_row, (block + 1) * k)):
            if down == 0:  # a one-row field: no pass down the columns
                src = field[y]
                for x in range(width):
                    middle[x] = src[x]
            else:
                _block_row(suffix, prefix, y - block * k, middle, True)
            if across == 0:
                for x in range(width):
                    row_max[x] = np.float32(middle[x])
            else:
                _across(padded, row_max, spare, width, across, True)
            # Which pixels are peaks, as a byte mask in one vectorised pass (a NaN equals nothing);
            # then only the 8-byte words of the mask holding a peak are looked at again.
            values = field[y]
            if bounded:
                for x in range(width):
                    value = np.float32(values[x])
                    mask[x] = (value == row_max[x]) & (value > below)
            else:
                for x in range(width):
                    mask[x] = np.float32(values[x]) == row_max[x]
            hits = 0
            for w in range(words.shape[0]):
                word = words[w]
                while word:  # one pass per peak: the lowest set byte, then cleared
                    columns[hits] = 8 * w + (_trailing_zeros(word) >> 3)
                    hits += 1
                    word &= word - np.uint64(1)
            if hits:
                coords = _room(coords, held, hits)
                first = coords.shape[1] - 2  # (plane, y, x) for a stack, (y, x) for one field
                for h in range(hits):
                    if first:
                        coords[held + h, 0] = plane
                    coords[held + h, first] = y
                    coords[held + h, first + 1] = columns[h]
                held += hits
    return coords, held


# ---- window maxima: the compiled loops --------------------------------------------------------------

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



# ---- local maxima: the driver ---------------------------------------------------------------------


def _bands(stack: np.ndarray, planes: range, rows: tuple[int, int], down: int,
           across: int, bounded: bool, below: np.float32) -> tuple[np.ndarray, int]:
    """One thread's share: rows ``rows`` of every field in ``planes``, as ``(plane, y, x)`` triples
    (``(y, x)`` pairs for a single field)."""
    pixels = len(planes) * (rows[1] - rows[0]) * stack.shape[2]
    # Room for a peak in every 16th pixel: only the pages written are ever touched, and a buffer
    # grown by copying cost a third of a 4096 x 4096 call with its 340,000 peaks.
    coords = np.empty((max(64, pixels >> 4), 3 if stack.shape[0] > 1 else 2), dtype=np.int64)
    held = 0
    for plane in planes:
        coords, held = peaks_band(stack[plane], plane, down, across, rows[0], rows[1], bounded, below, coords, held)
    return coords, held


def local_maxima(field: np.ndarray, size: int, threshold: float | np.floating[Any] | None = None) -> np.ndarray:
    """The coordinates of the pixels equal to their window's maximum and above ``threshold``.

    :param field: ``(..., H, W)``, non-empty; float32, uint8 and uint16 are compared in their own
        dtype, any other dtype is cast to float32 first (the contract's filter is of the float32 cast).
    :param size: the window edge, at least 1 (even raised to odd).
    :param threshold: only pixels greater than it, compared exactly (a float32 threshold, as the
        core hands a plugin, is used as it is); ``None``: every maximum. A NaN is never a peak.
    :returns: int64 ``(P, field.ndim)`` coordinates in row-major order.
    :raises BackendDeclined: a window so tall that the kernel's block buffers would exceed
        :data:`._filters_kernels._BLOCK_BYTES` per thread (the floor answers).
    """
    if field.dtype not in _FILTERED:
        field = field.astype(np.float32)
    if field.ndim < 2 or field.size == 0:
        return np.empty((0, max(field.ndim, 2)), dtype=np.int64)
    stack = np.ascontiguousarray(field).reshape((-1, *field.shape[-2:]))
    if stack.flags.writeable:  # one compiled variant: the read-only views the core passes
        stack = stack.view()
        stack.flags.writeable = False
    count, height, width = stack.shape
    size = size + 1 if size % 2 == 0 else size  # even sizes raised to odd, as the contract filters
    down, across = min(size // 2, height - 1), min(size // 2, width - 1)
    block = 2 * down + 1
    if 2 * block * width * stack.dtype.itemsize > _BLOCK_BYTES:
        raise BackendDeclined(f"a {size}-row window over {width} columns needs more than "
                              f"{_BLOCK_BYTES >> 20} MiB of block buffers per thread")
    bounded = threshold is not None
    below = threshold_below(threshold) if threshold is not None else np.float32(-np.inf)
    threads = 1 if stack.size < _MIN_THREADED_PIXELS else cpu_threads()
    if count >= threads or height * width < _MIN_THREADED_PIXELS:
        # Whole fields per thread, consecutive ones together (the order of the coordinates).
        edges = np.linspace(0, count, min(threads, count) + 1).astype(np.int64)
        parts = [(stack, range(int(edges[i]), int(edges[i + 1])), (0, height), down, across, bounded,
                  below) for i in range(len(edges) - 1)]
    else:
        # Few large fields: bands of whole blocks of rows per thread, field by field.
        blocks = -(-height // block)
        per = -(-blocks // threads)
        parts = [(stack, range(plane, plane + 1), (first * block, min(height, (first + per) * block)),
                  down, across, bounded, below)
                 for plane in range(count) for first in range(0, blocks, per)]
    found = run_parts(_bands, parts)
    # One part's rows are returned as they are (a view of its buffer, whose unwritten pages were
    # never touched); several are joined in order.
    rows = np.concatenate([coords[:held] for coords, held in found]) if len(found) > 1 else found[0][0][:found[0][1]]
    if field.ndim == rows.shape[1]:  # (y, x) of one field, or (plane, y, x) of a 3-D stack
        return np.ascontiguousarray(rows)
    # A single field given as (1, ..., 1, H, W), or a stack of more dimensions: the field's number
    # spelt out over the leading axes.
    out = np.empty((rows.shape[0], field.ndim), dtype=np.int64)
    out[:, -2:] = rows[:, -2:]
    planes = rows[:, 0] if rows.shape[1] == 3 else np.zeros(rows.shape[0], np.int64)
    for axis, lead in enumerate(np.unravel_index(planes, field.shape[:-2])):
        out[:, axis] = lead
    return out


def warm_peaks() -> object:
    """Compile (or load) the kernel for each dtype it takes, on read-only fields: for a warm-up."""
    return [local_maxima(np.zeros((4, 4), dtype=dtype), 3, 0.5) for dtype in sorted(_FILTERED, key=str)]


# ---- window maxima: the driver --------------------------------------------------------------------


def window_maxima(stack: np.ndarray, points: np.ndarray, size: int) -> np.ndarray:
    """float32 ``(N, F)``: each point's window maximum in every field of an ``(F, H, W)`` stack."""
    if stack.dtype not in _GATHERED:
        raise BackendDeclined(f"the gather is compiled for float32, uint16 and uint8, not {stack.dtype}")
    count, height, width = stack.shape
    source = np.ascontiguousarray(stack)
    if source.flags.writeable:  # one compiled variant: the read-only views the core passes
        source = source.view()
        source.flags.writeable = False
    rows = np.asarray(points, dtype=np.int64)
    flat = rows[:, 0] * width + rows[:, 1]
    # any sort: equal points have equal windows, so the order among them cannot show
    order = np.arange(flat.size) if bool(np.all(flat[1:] >= flat[:-1])) else np.argsort(flat)
    down, across = min(size // 2, height - 1), min(size // 2, width - 1)
    ys, xs = rows[order, 0], rows[order, 1]
    top, left = np.maximum(ys - down, 0), np.maximum(xs - across, 0)
    high = np.minimum(ys + down, height - 1) - top + 1
    wide = np.minimum(xs + across, width - 1) - left + 1
    out = np.empty((count, rows.shape[0]), dtype=np.float32)  # a field's values side by side
    threads = 1 if rows.shape[0] * count < 4096 else min(count, cpu_threads())
    run_parts(gather_fields, [(source, top, left, high, wide, order, first, threads, out)
                              for first in range(threads)])
    return np.ascontiguousarray(out.T)



def warm_gather() -> object:
    """Compile (or load) the gather for each dtype it takes, on read-only stacks: for a warm-up."""
    points = np.zeros((1, 2), dtype=np.int64)
    done = []
    for dtype in sorted(_GATHERED, key=str):
        stack = np.zeros((1, 4, 4), dtype=dtype)
        stack.flags.writeable = False
        done.append(window_maxima(stack, points, 3))
    return done
