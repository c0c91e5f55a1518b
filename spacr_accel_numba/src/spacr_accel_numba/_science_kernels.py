# mypy: disallow-untyped-defs=False, disallow-untyped-calls=False
"""The compiled loops of ``k`` nearest neighbours, Hamming matching and local maxima (imports numba).

Imported only when one of those operations first runs (``import numba`` costs ~0.5 s); every loop
is ``nogil`` (the drivers :mod:`._knearest`, :mod:`._hamming` and :mod:`._peaks` split the work
between threads) and cached on disk (``cache=True``). The rules of :mod:`._kernels` hold here too:
no ``fastmath``, the float64 sum of squared differences in coordinate order, ties to the lower index.

THE ``k`` BEST OF A ROW. Each source keeps its ``k`` best ``(distance, index)`` pairs in two small
sorted arrays, the worst last. A candidate enters when it is strictly better in that order, and
the worst's distance is what every cell, word or pixel is pruned against. The arrays start filled
with ``(bound, sentinel)``: a ``max_distance`` prunes exactly like a found ``k``-th neighbour would.
"""

from __future__ import annotations

import typing
from collections.abc import Callable

import llvmlite.ir
import numba
import numba.core.cgutils
import numba.extending
import numpy as np

from . import _locator  # noqa: F401  (before any njit: these kernels' cache stamped with every file they come from)
from ._filter_kernels import _across, _block_row, _buffers, _runs
from ._kernels import _slab_gap, _slot, _squared

_SHRINK = 1.0 - 1e-9  # relative slack on a squared bound before it may rule a cell out (as _kernels)


@numba.njit(nogil=True, cache=True, inline="always")
def _insert(best, at, total, j):
    """Put ``(total, j)`` in its (distance, index) place among the ``k`` kept, dropping the worst.

    The caller has checked that it beats the worst. Returns the new worst distance.
    """
    place = best.shape[0] - 1
    while place > 0 and (best[place - 1] > total or (best[place - 1] == total and at[place - 1] > j)):
        best[place] = best[place - 1]
        at[place] = at[place - 1]
        place -= 1
    best[place] = total
    at[place] = j
    return best[best.shape[0] - 1]


@numba.njit(nogil=True, cache=True)
def grid_k_query(  # noqa: PLR0912, PLR0915  # one loop nest, whole, so LLVM sees it entire
        source, rows, low, edge, inverse, cells, starts, order, ordered, slack, most_cells, bound, sentinel,
        found, squared, first, stop):
    """The exact ``k`` nearest targets (``k = found.shape[1]``) of sources ``first:stop`` within
    ``bound`` (a squared distance; ``inf`` for none), ring by ring of grid cells.

    As :func:`._kernels.grid_query`, with the ``k``-th best in place of the best: a cell whose slab is
    farther than the ``k``-th best is skipped, and the rings stop once no unvisited cell can hold a
    point as near. Source ``i``'s answer is written to row ``rows[i]`` of ``found``/``squared`` (the
    caller's order: no scatter pass after), ``-1``/``inf`` in the places no target within ``bound``
    filled. A source still unsettled after ``most_cells`` cells gets ``found[rows[i], 0] = -2`` for
    the driver to settle by brute force. Returns how many such sources there were.
    """
    dims = source.shape[1]
    k = found.shape[1]
    nx, ny, nz = cells[0], cells[1], cells[2]
    best = np.empty(k, np.float64)
    at = np.empty(k, np.int64)
    unsettled = 0
    for i in range(first, stop):
        s0 = source[i, 0]
        s1 = source[i, 1] if dims > 1 else 0.0
        s2 = source[i, 2] if dims > 2 else 0.0
        c0 = _slot(s0, low[0], inverse[0], nx)
        c1 = _slot(s1, low[1], inverse[1], ny) if dims > 1 else 0
        c2 = _slot(s2, low[2], inverse[2], nz) if dims > 2 else 0
        for q in range(k):
            best[q] = bound
            at[q] = sentinel
        worst = bound
        ring = 0
        visited = 0
        settled = True
        while True:
            for x in range(max(c0 - ring, 0), min(c0 + ring, nx - 1) + 1):
                on_x = abs(x - c0) == ring
                gx = _slab_gap(s0, low[0], edge[0], x, slack)
                if gx * _SHRINK > worst:
                    continue
                y = max(c1 - ring, 0)
                y_stop = min(c1 + ring, ny - 1)
                while y <= y_stop:
                    on_xy = on_x or abs(y - c1) == ring
                    if not on_xy and nz == 1:
                        y = c1 + ring  # an inner cell of a flat grid, visited in an earlier ring: the far edge
                        continue
                    gxy = gx + (_slab_gap(s1, low[1], edge[1], y, slack) if dims > 1 else 0.0)
                    if gxy * _SHRINK > worst:
                        y += 1
                        continue
                    z = max(c2 - ring, 0)
                    z_stop = min(c2 + ring, nz - 1)
                    while z <= z_stop:
                        if not (on_xy or abs(z - c2) == ring):
                            z = c2 + ring  # an inner cell, visited in an earlier ring: jump to the far face
                            continue
                        gxyz = gxy + (_slab_gap(s2, low[2], edge[2], z, slack) if dims > 2 else 0.0)
                        if gxyz * _SHRINK <= worst:
                            cell = (x * ny + y) * nz + z
                            visited += 1
                            for p in range(starts[cell], starts[cell + 1]):
                                d = s0 - ordered[p, 0]
                                total = d * d
                                if dims > 1:
                                    d = s1 - ordered[p, 1]
                                    total += d * d
                                if dims > 2:
                                    d = s2 - ordered[p, 2]
                                    total += d * d
                                if total <= worst:
                                    j = order[p]
                                    if total < worst or j < at[k - 1]:
                                        worst = _insert(best, at, total, j)
                        z += 1
                    y += 1
            gap = np.inf
            beyond = False
            for axis in range(dims):
                ck = c0 if axis == 0 else (c1 if axis == 1 else c2)
                nk = nx if axis == 0 else (ny if axis == 1 else nz)
                sk = s0 if axis == 0 else (s1 if axis == 1 else s2)
                if ck - ring > 0:
                    beyond = True
                    gap = min(gap, sk - (low[axis] + (ck - ring) * edge[axis]))
                if ck + ring < nk - 1:
                    beyond = True
                    gap = min(gap, low[axis] + (ck + ring + 1) * edge[axis] - sk)
            if not beyond:
                break
            gap -= slack
            if gap > 0 and worst < gap * gap * _SHRINK:
                break
            if visited > most_cells:
                settled = False
                unsettled += 1
                break
            ring += 1
        row = rows[i]
        for q in range(k):
            filled = at[q] != sentinel
            found[row, q] = at[q] if filled else -1
            squared[row, q] = best[q] if filled else np.inf
        if not settled:
            found[row, 0] = -2
    return unsettled


@numba.njit(nogil=True, cache=True)
def grid_sources(source, low, high, inverse, cells, reach, far_out):
    """Which sources the grid walks, bucketed into its cells.

    A source's squared distance to the targets' box ``[low, high]`` (no target is nearer) decides:
    within ``far_out`` and ``reach`` (the squared bound with its slack), it is walked; within
    ``reach`` but farther out than ``far_out``, the KD-tree answers it; beyond ``reach``, it has no
    neighbour. The walked are sorted by cell as :func:`._kernels.grid_build` sorts the targets
    (stable), so neighbouring sources read the same cells from cache.

    WHY THE VERDICT IS A PASS OF ITS OWN. A shifted second field puts the sources within and
    beyond the bound in random order, and a branch on which it is (or on which border cell a source
    clamps to) was mispredicted about every other source. The first pass branches on nothing: each
    source is written to both lists, and the verdict moves their ends. Only the walked are then
    bucketed, by :func:`._kernels.grid_build`'s counting sort.

    :returns: ``(rows, bucketed, elsewhere, scale)``: the walked sources' original rows and float64
        coordinates in cell order, the rows the tree answers, and the largest coordinate magnitude
        of the walked sources (0 for none).
    """
    count, dims = source.shape
    walked = np.empty(count, np.int64)
    far = np.empty(count, np.int64)
    kept = 0
    sent = 0
    for i in range(count):
        gap = 0.0
        for axis in range(dims):
            value = source[i, axis]
            step = max(low[axis] - value, value - high[axis], 0.0)
            gap += step * step
        within = gap <= reach
        walk = within and gap <= far_out
        walked[kept] = i
        far[sent] = i
        kept += walk
        sent += within and not walk
    total = cells[0] * cells[1] * cells[2]
    cell_of = np.empty(kept, np.int64)
    starts = np.zeros(total + 1, np.int64)
    scale = 0.0
    for w in range(kept):
        i = walked[w]
        flat = 0
        for axis in range(3):
            c = 0
            if axis < dims:
                value = source[i, axis]
                c = _slot(value, low[axis], inverse[axis], cells[axis])
                scale = max(scale, abs(value))
            flat = flat * cells[axis] + c
        cell_of[w] = flat
        starts[flat + 1] += 1
    for c in range(total):
        starts[c + 1] += starts[c]
    rows = np.empty(kept, np.int64)
    bucketed = np.empty((kept, dims), np.float64)
    for w in range(kept):
        at = starts[cell_of[w]]
        starts[cell_of[w]] = at + 1
        i = walked[w]
        rows[at] = i
        for axis in range(dims):
            bucketed[at, axis] = source[i, axis]
    return rows, bucketed, far[:sent].copy(), scale


@numba.njit(nogil=True, cache=True)
def finish_places(index, squared, limit, out_index, out_found):
    """:func:`~spacr_accel_core.toolkit.finish` in one pass over the places of an answer, flat
    (1-D: a loop over rows of one or two places each ran four times slower): each place's float32
    distance (the float64 square root, rounded once), ``-1``/``inf`` where there is no neighbour or
    its float32 distance exceeds ``limit`` (compared in float64; ``inf`` for no limit).

    The floor's NumPy takes the same steps (``np.sqrt``, a cast to float32, a float64 comparison),
    so the bits are the same; its six passes over the answer and their temporaries cost a shifted
    field's bounded search a tenth of its time. Selections, not branches: a shifted field drops
    every other place, in random order.
    """
    for p in range(index.shape[0]):
        j = index[p]
        distance = np.float32(np.sqrt(squared[p]))
        keep = (j >= 0) & (np.float64(distance) <= limit)
        out_index[p] = j if keep else -1
        out_found[p] = distance if keep else np.float32(np.inf)


@numba.njit(nogil=True, cache=True)
def brute_k_rows(source, target, rows, bound, sentinel, found, squared):
    """Settle ``rows`` of the source against every target: the exact ``k`` best within ``bound``."""
    k = found.shape[1]
    best = np.empty(k, np.float64)
    at = np.empty(k, np.int64)
    for r in range(rows.shape[0]):
        i = rows[r]
        for q in range(k):
            best[q] = bound
            at[q] = sentinel
        worst = bound
        for j in range(target.shape[0]):  # ascending j: an equal distance never displaces a kept one
            total = _squared(source, i, target, j)
            if total < worst or (total == worst and j < at[k - 1]):
                worst = _insert(best, at, total, j)
        for q in range(k):
            found[i, q] = at[q]
            squared[i, q] = best[q]


def _ctpop_typing(typingctx, value):
    """The population count of a uint64, as LLVM's ``ctpop``: one ``popcnt`` instruction where the
    CPU has it. numba has no popcount of its own, and a byte table costs 8 loads per word."""
    if value != numba.types.uint64:
        return None  # an int64 result: the count is below 65, and comparisons stay signed

    def codegen(context, builder, signature, args):  # numba calls it with these four
        word = llvmlite.ir.IntType(64)
        ctpop = numba.core.cgutils.get_or_insert_function(
            builder.module, llvmlite.ir.FunctionType(word, [word]), "llvm.ctpop.i64")
        return builder.call(ctpop, args)

    return numba.types.int64(numba.types.uint64), codegen


def _cttz_typing(typingctx, value):
    """The count of trailing zero bits of a non-zero uint64, as LLVM's ``cttz`` (one ``tzcnt``):
    where a word of a byte mask holds a peak, without a branch per byte."""
    if value != numba.types.uint64:
        return None

    def codegen(context, builder, signature, args):  # numba calls it with these four
        word = llvmlite.ir.IntType(64)
        flag = llvmlite.ir.IntType(1)
        cttz = numba.core.cgutils.get_or_insert_function(
            builder.module, llvmlite.ir.FunctionType(word, [word, flag]), "llvm.cttz.i64")
        return builder.call(cttz, [args[0], flag(1)])  # 1: zero input is undefined (never passed)

    return numba.types.int64(numba.types.uint64), codegen


# Casts for the type checker only: numba's intrinsic wrapper is typed as taking the typing context too.
_trailing_zeros = typing.cast("Callable[[np.uint64], int]", numba.extending.intrinsic(_cttz_typing))
_popcount = typing.cast("Callable[[np.uint64], int]", numba.extending.intrinsic(_ctpop_typing))


_TILE = 256
"""Targets compared with one source at a time: their four 2 KiB columns of words stay in the first-level
cache while every source of the thread streams past them (measured: 256 a little ahead of 128 and 1,024)."""


@numba.njit(nogil=True, cache=True)
def hamming_rows(source, columns, limit, sentinel, found, counted, first, stop):  # noqa: PLR0912  # one loop nest
    """The ``k`` targets with the fewest differing bits (``k = found.shape[1]``) for sources
    ``first:stop``, lowest index among equals, at most ``limit`` bits apart.

    ``source`` is uint64 words ``(N, W)`` of packed bits; ``columns`` the targets' words transposed,
    ``(W, M)``, so that a source's counts against a tile of :data:`_TILE` targets are one loop over
    contiguous words, which LLVM vectorises (the population count included). Each source's ``k``
    best are kept in ``found``/``counted`` between tiles (``limit + 1`` and ``sentinel`` where
    nothing is kept); a tile is only looked at again when its smallest count beats the ``k``-th
    best. Tiles run in ascending index, so an equal count never displaces a kept one.
    """
    k = found.shape[1]
    words = source.shape[1]
    count = columns.shape[1]
    counts = np.empty(_TILE, np.int64)
    for i in range(first, stop):
        for q in range(k):
            counted[i, q] = limit + 1
            found[i, q] = sentinel
    for tile in range(0, count, _TILE):
        end = min(count, tile + _TILE)
        width = end - tile
        for i in range(first, stop):
            row_count = counted[i]
            row_found = found[i]
            worst = row_count[k - 1]
            lowest = worst
            if words == 4:  # ORB's 32 bytes: one pass, the source's words held in registers
                c0, c1 = columns[0, tile:end], columns[1, tile:end]
                c2, c3 = columns[2, tile:end], columns[3, tile:end]
                a0, a1, a2, a3 = source[i, 0], source[i, 1], source[i, 2], source[i, 3]
                for j in range(width):
                    d = (_popcount(a0 ^ c0[j]) + _popcount(a1 ^ c1[j])
                         + _popcount(a2 ^ c2[j]) + _popcount(a3 ^ c3[j]))
                    counts[j] = d
                    lowest = min(lowest, d)
            else:
                word = source[i, 0]
                column = columns[0, tile:end]
                for j in range(width):
                    counts[j] = _popcount(word ^ column[j])
                for w in range(1, words):
                    word = source[i, w]
                    column = columns[w, tile:end]
                    for j in range(width):
                        counts[j] += _popcount(word ^ column[j])
                for j in range(width):
                    lowest = min(lowest, counts[j])
            if lowest < worst:
                for j in range(width):
                    if counts[j] < worst:
                        worst = _insert(row_count, row_found, counts[j], tile + j)
    return 0


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

    The window maximum is :func:`._filter_kernels.filter_band`'s, row by row, by its loops (the
    van Herk/Gil-Werman blocks of :func:`._filter_kernels._runs` and :func:`._filter_kernels._block_row`
    down the columns, :func:`._filter_kernels._across` along the row), but each filtered row is compared with the
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
