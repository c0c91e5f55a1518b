"""The compiled loops: imported only by the background warm-up (it imports numba, ~0.4 s).

Every function here is ``nogil`` (the Python drivers in :mod:`._filter`, :mod:`._grid` and :mod:`._wide` split
the work between threads) and cached on disk (``cache=True``), so a later process loads the
machine code instead of compiling it again.

Two rules the loops keep, and why:

- **Slices, not offsets.** A loop over ``src[x]`` and ``src[x + step]`` does not vectorise (LLVM
  cannot prove the two reads independent of the write); the same loop over two slices taken
  before it does, and was measured 8x faster (1.2 against 10 ms for 4096 rows of 4096).
- **The contract's arithmetic, nothing faster.** No ``fastmath``: the NaN test below and the
  order of the float64 sum of squared differences (:func:`spacr_accel_core.exact.exact_squared`)
  must survive compilation, and a fused multiply-add would round differently. The one exception,
  :func:`_lesser`, drops only the NaN and signed-zero rules from a minimum of values known finite.
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
from ._filter_kernels import filter_band  # noqa: F401  (every kernel is reached through this module: the warm-up's)


@numba.njit(nogil=True, cache=True)
def grid_build(points, low, inverse, cells):
    """Bucket ``points`` (float64 ``(M, D)``, D <= 3) into a ``cells[0] x cells[1] x cells[2]``
    grid by a counting sort, stable, so a cell lists its points by ascending index.

    :returns: ``(starts, order, sorted_points, crowd)``: cell ``c`` holds ``sorted_points[
        starts[c]:starts[c + 1]]``, originally ``order[...]``; ``crowd`` is the fullest cell's count.
    """
    count, dims = points.shape
    total = cells[0] * cells[1] * cells[2]
    cell_of = np.empty(count, np.int64)
    starts = np.zeros(total + 1, np.int64)
    for i in range(count):
        flat = 0
        for k in range(3):
            c = 0
            if k < dims:
                c = _slot(points[i, k], low[k], inverse[k], cells[k])
            flat = flat * cells[k] + c
        cell_of[i] = flat
        starts[flat + 1] += 1
    crowd = 0
    for c in range(total):
        crowd = max(crowd, starts[c + 1])
        starts[c + 1] += starts[c]
    fill = starts[:-1].copy()
    order = np.empty(count, np.int64)
    ordered = np.empty((count, dims), np.float64)
    for i in range(count):
        at = fill[cell_of[i]]
        fill[cell_of[i]] = at + 1
        order[at] = i
        for k in range(dims):
            ordered[at, k] = points[i, k]
    return starts, order, ordered, crowd


@numba.njit(nogil=True, cache=True, inline="always")
def _slot(value, low, inverse, cells):
    # Clamped in floating point before the conversion: a far point (or one just past the top
    # edge) lands in the border cell, and no float too large for an int64 is ever converted.
    scaled = (value - low) * inverse
    if scaled < 1.0:
        return 0
    if scaled >= cells - 1:
        return cells - 1
    return int(scaled)


@numba.njit(nogil=True, cache=True, inline="always")
def _slab_gap(value, low, edge, cell, slack):
    """A lower bound of the squared distance along one axis from ``value`` to the points of slab
    ``cell``: the geometric gap less ``slack`` (which covers the rounding of the slab's bounds and
    of the bucketing), squared; 0 inside."""
    lower = low + cell * edge
    if value < lower:
        gap = lower - value - slack
        return gap * gap if gap > 0 else 0.0
    upper = lower + edge
    if value > upper:
        gap = value - upper - slack
        return gap * gap if gap > 0 else 0.0
    return 0.0


_SHRINK = 1.0 - 1e-9  # relative slack on a squared bound before it may rule a cell out


@numba.njit(nogil=True, cache=True, inline="always")
def _outside(value, low, high, slack):
    """A lower bound of the squared distance along one axis from ``value`` to every target: the
    gap to the targets' range ``[low, high]`` less ``slack``, squared; 0 inside."""
    gap = max(low - value, value - high) - slack
    return gap * gap if gap > 0 else 0.0


@numba.njit(nogil=True, cache=True)
def grid_empty(starts, cells):
    """Each cell's distance, in cells along the farthest axis (Chebyshev), to the nearest cell
    holding a target: 0 for a cell that holds one; every cell nearer than that is empty too.

    Two passes of a chamfer over the ``3 x 3 x 3`` neighbourhood with unit weights, which is
    exact for this distance: the first takes each cell's neighbours already visited in index
    order, the second those after it.
    """
    nx, ny, nz = cells[0], cells[1], cells[2]
    far = np.int32(nx + ny + nz)  # farther than any two cells of the grid
    empty = np.empty(nx * ny * nz, np.int32)
    for x in range(nx):
        for y in range(ny):
            for z in range(nz):
                cell = (x * ny + y) * nz + z
                if starts[cell + 1] > starts[cell]:
                    empty[cell] = 0
                    continue
                nearest = far
                for dx in range(-1, 1):
                    for dy in range(-1, 2):
                        for dz in range(-1, 2):
                            if dx == 0 and (dy > 0 or (dy == 0 and dz >= 0)):
                                continue  # not visited yet
                            a, b, c = x + dx, y + dy, z + dz
                            if 0 <= a < nx and 0 <= b < ny and 0 <= c < nz:
                                nearest = min(nearest, empty[(a * ny + b) * nz + c] + 1)
                empty[cell] = nearest
    for x in range(nx - 1, -1, -1):
        for y in range(ny - 1, -1, -1):
            for z in range(nz - 1, -1, -1):
                cell = (x * ny + y) * nz + z
                nearest = empty[cell]
                if nearest == 0:
                    continue
                for dx in range(0, 2):
                    for dy in range(-1, 2):
                        for dz in range(-1, 2):
                            if dx == 0 and (dy < 0 or (dy == 0 and dz <= 0)):
                                continue
                            a, b, c = x + dx, y + dy, z + dz
                            if 0 <= a < nx and 0 <= b < ny and 0 <= c < nz:
                                nearest = min(nearest, empty[(a * ny + b) * nz + c] + 1)
                empty[cell] = nearest
    return empty


_SHORT = 8  # cells of a run below which clipping it costs more than it saves (a source's own rings)


@numba.njit(nogil=True, cache=True, inline="always")
def _within(value, low, inverse, cells, room, slack, first, last):
    """The part of cells ``first..last`` along one axis whose slab may lie within ``room`` (a
    squared distance) of ``value``: the slabs are sorted along the axis, so it is one range (a cell
    more each side covers the rounding of the bucketing; each cell is still tested on its own)."""
    if room == np.inf or last - first < _SHORT:
        return first, last
    reach = np.sqrt(max(room, 0.0)) + slack
    return (max(first, _slot(value - reach, low, inverse, cells) - 1),
            min(last, _slot(value + reach, low, inverse, cells) + 1))


@numba.njit(nogil=True, cache=True, inline="always")
def _run(axis, x, y, z, first, last, base, s0, s1, s2, dims, low, edge, inverse, cells, starts, order,
         ordered, empty, slack, best, winner, steps):
    """Visit cells ``first..last`` along ``axis`` from cell ``(x, y, z)`` (its other two
    coordinates fixed, their slab gaps summed in ``base``): only those whose slab may be nearer
    than the best (:func:`_within`), leaping over empty stretches by each cell's
    :func:`grid_empty` distance; returns the updated ``(best, winner, steps)``."""
    ny, nz = cells[1], cells[2]
    sv = s0 if axis == 0 else (s1 if axis == 1 else s2)
    first, last = _within(sv, low[axis], inverse[axis], cells[axis], best / _SHRINK - base, slack, first, last)
    v = first
    while v <= last:
        steps += 1
        if axis == 0:
            x = v
        elif axis == 1:
            y = v
        else:
            z = v
        cell = (x * ny + y) * nz + z
        leap = empty[cell]
        if leap > 0:  # this cell and the next leap - 1 along the run hold nothing
            v += leap
            continue
        if (base + _slab_gap(sv, low[axis], edge[axis], v, slack)) * _SHRINK <= best:
            best, winner = _cell(cell, s0, s1, s2, dims, starts, order, ordered, best, winner)
        v += 1
    return best, winner, steps


@numba.njit(nogil=True, cache=True, inline="always")
def _cell(cell, s0, s1, s2, dims, starts, order, ordered, best, winner):
    """The best and winner after the points of one cell; returns them updated."""
    for p in range(starts[cell], starts[cell + 1]):
        # exact_squared's arithmetic: float64, coordinates in order
        d = s0 - ordered[p, 0]
        total = d * d
        if dims > 1:
            d = s1 - ordered[p, 1]
            total += d * d
        if dims > 2:
            d = s2 - ordered[p, 2]
            total += d * d
        j = order[p]
        if total < best or (total == best and j < winner):
            best = total
            winner = j
    return best, winner


@numba.njit(nogil=True, cache=True)
def grid_query(source, first, stop, low, high, edge, inverse, cells, starts, order, ordered, empty, slack,
               budget, found, squared):
    """The exact nearest target (lowest index on ties) of sources ``first:stop``, ring by ring of
    cells around the source's own (its nearest cell, for a source outside the grid), stopping once
    no cell beyond the rings can hold a point as near.

    WHERE A WALK STARTS. At the ring of the nearest cell holding a target (``empty``, from
    :func:`grid_empty`): every ring inside it is empty. Along each side of a ring, an empty cell's
    distance leaps over the empty cells after it, so a source in an empty hole pays for the
    targets around the hole, not for the hole's area.

    WHERE IT STOPS. A point in a cell beyond the rings' box lies past one of the box's faces, and
    within the targets' range ``[low, high]`` on every other axis; so it is no nearer than the
    gap to that face combined with the source's distances to that range on the other axes
    (:func:`_outside`). For a source far outside the targets that second part is most of the
    distance, and the walk stops after a few rings instead of crossing the whole grid.

    Every cell looked at counts against ``budget``: a source still unsettled after it (so far away
    that rounding hides the rings' progress) gets ``found = -1`` for the driver to settle. Returns
    how many such sources there were.
    """
    dims = source.shape[1]
    nx, ny, nz = cells[0], cells[1], cells[2]
    unsettled = 0
    for i in range(first, stop):
        s0 = source[i, 0]
        s1 = source[i, 1] if dims > 1 else 0.0
        s2 = source[i, 2] if dims > 2 else 0.0
        o0 = _outside(s0, low[0], high[0], slack)
        o1 = _outside(s1, low[1], high[1], slack) if dims > 1 else 0.0
        o2 = _outside(s2, low[2], high[2], slack) if dims > 2 else 0.0
        c0 = _slot(s0, low[0], inverse[0], nx)
        c1 = _slot(s1, low[1], inverse[1], ny) if dims > 1 else 0
        c2 = _slot(s2, low[2], inverse[2], nz) if dims > 2 else 0
        best = np.inf
        winner = -1
        ring = empty[(c0 * ny + c1) * nz + c2]
        steps = 0
        while True:
            if ring <= 1:  # the source's own cell and the ring around it: most sources need no more
                for x in range(max(c0 - ring, 0), min(c0 + ring, nx - 1) + 1):
                    gx = _slab_gap(s0, low[0], edge[0], x, slack)
                    if gx * _SHRINK > best:
                        continue
                    for y in range(max(c1 - ring, 0), min(c1 + ring, ny - 1) + 1):
                        gxy = gx + (_slab_gap(s1, low[1], edge[1], y, slack) if dims > 1 else 0.0)
                        if gxy * _SHRINK > best:
                            continue
                        for z in range(max(c2 - ring, 0), min(c2 + ring, nz - 1) + 1):
                            if ring == 1 and x == c0 and y == c1 and z == c2:
                                continue  # ring 0's
                            gxyz = gxy + (_slab_gap(s2, low[2], edge[2], z, slack) if dims > 2 else 0.0)
                            if gxyz * _SHRINK <= best:
                                best, winner = _cell((x * ny + y) * nz + z, s0, s1, s2, dims, starts, order,
                                                     ordered, best, winner)
            # Farther out, the ring's shell side by side, each cell once: the two faces across x
            # whole, the two across y within them, the two across z within both.
            for side in range(2 if ring > 1 else 0):
                x = c0 - ring if side == 0 else c0 + ring
                if x < 0 or x >= nx:
                    continue
                gx = _slab_gap(s0, low[0], edge[0], x, slack)
                if gx * _SHRINK > best:
                    continue
                if dims == 3:
                    y_first, y_last = _within(s1, low[1], inverse[1], ny, best / _SHRINK - gx, slack,
                                              max(c1 - ring, 0), min(c1 + ring, ny - 1))
                    for y in range(y_first, y_last + 1):
                        gxy = gx + _slab_gap(s1, low[1], edge[1], y, slack)
                        if gxy * _SHRINK <= best:
                            best, winner, steps = _run(2, x, y, 0, max(c2 - ring, 0), min(c2 + ring, nz - 1), gxy,
                                                       s0, s1, s2, dims, low, edge, inverse, cells, starts, order,
                                                       ordered, empty, slack, best, winner, steps)
                else:
                    best, winner, steps = _run(1, x, 0, 0, max(c1 - ring, 0), min(c1 + ring, ny - 1), gx,
                                               s0, s1, s2, dims, low, edge, inverse, cells, starts, order, ordered,
                                               empty, slack, best, winner, steps)
            if dims > 1 and ring > 1:
                x_first, x_last = max(c0 - ring + 1, 0), min(c0 + ring - 1, nx - 1)
                for side in range(2):
                    y = c1 - ring if side == 0 else c1 + ring
                    if y < 0 or y >= ny:
                        continue
                    gy = _slab_gap(s1, low[1], edge[1], y, slack)
                    if gy * _SHRINK > best:
                        continue
                    if dims == 3:
                        x_low, x_high = _within(s0, low[0], inverse[0], nx, best / _SHRINK - gy, slack,
                                                x_first, x_last)
                        for x in range(x_low, x_high + 1):
                            gxy = gy + _slab_gap(s0, low[0], edge[0], x, slack)
                            if gxy * _SHRINK <= best:
                                best, winner, steps = _run(2, x, y, 0, max(c2 - ring, 0), min(c2 + ring, nz - 1),
                                                           gxy, s0, s1, s2, dims, low, edge, inverse, cells, starts,
                                                           order, ordered, empty, slack, best, winner, steps)
                    else:
                        best, winner, steps = _run(0, 0, y, 0, x_first, x_last, gy, s0, s1, s2, dims, low, edge,
                                                   inverse, cells, starts, order, ordered, empty, slack, best,
                                                   winner, steps)
                if dims == 3:
                    y_first, y_last = max(c1 - ring + 1, 0), min(c1 + ring - 1, ny - 1)
                    for side in range(2):
                        z = c2 - ring if side == 0 else c2 + ring
                        if z < 0 or z >= nz:
                            continue
                        gz = _slab_gap(s2, low[2], edge[2], z, slack)
                        if gz * _SHRINK > best:
                            continue
                        x_low, x_high = _within(s0, low[0], inverse[0], nx, best / _SHRINK - gz, slack,
                                                x_first, x_last)
                        for x in range(x_low, x_high + 1):
                            gxz = gz + _slab_gap(s0, low[0], edge[0], x, slack)
                            if gxz * _SHRINK <= best:
                                best, winner, steps = _run(1, x, 0, z, y_first, y_last, gxz, s0, s1, s2, dims, low,
                                                           edge, inverse, cells, starts, order, ordered, empty, slack,
                                                           best, winner, steps)
            # The nearest a point beyond the rings' box can be: past one face that has cells
            # beyond it, and within the targets' range on the other axes.
            bound = np.inf
            beyond = False
            outside = o0 + o1 + o2 > 0.0
            for k in range(dims):
                ck = c0 if k == 0 else (c1 if k == 1 else c2)
                nk = nx if k == 0 else (ny if k == 1 else nz)
                sk = s0 if k == 0 else (s1 if k == 1 else s2)
                rest = 0.0
                if outside:  # summed, never differenced
                    rest = o1 + o2 if k == 0 else (o0 + o2 if k == 1 else o0 + o1)
                if ck - ring > 0:
                    beyond = True
                    gap = sk - (low[k] + (ck - ring) * edge[k]) - slack
                    bound = min(bound, rest + (gap * gap if gap > 0 else 0.0))
                if ck + ring < nk - 1:
                    beyond = True
                    gap = low[k] + (ck + ring + 1) * edge[k] - sk - slack
                    bound = min(bound, rest + (gap * gap if gap > 0 else 0.0))
            if not beyond or best < bound * _SHRINK:
                break
            if steps > budget:
                winner = -1
                unsettled += 1
                break
            ring += 1
        found[i] = winner
        squared[i] = best
    return unsettled


@numba.njit(nogil=True, cache=True, inline="always")
def _squared(source, i, target, j):
    """``exact_squared`` of one pair: the float64 sum of squared differences, coordinates in order."""
    d = source[i, 0] - target[j, 0]
    total = d * d
    for k in range(1, source.shape[1]):
        d = source[i, k] - target[j, k]
        total += d * d
    return total


@numba.njit(nogil=True, cache=True)
def brute_rows(source, target, rows, found, squared):
    """Settle ``rows`` of the source by comparing them with every target (exact, lowest index).
    The driver gives each thread its own slice of the rows."""
    count = target.shape[0]
    for r in range(rows.shape[0]):
        i = rows[r]
        best = np.inf
        winner = -1
        for j in range(count):
            total = _squared(source, i, target, j)
            if total < best:  # ascending j: the first of equals is kept
                best = total
                winner = j
        found[i] = winner
        squared[i] = best


_CHUNK = 256
"""Columns of a GEMM row summarised by one minimum: measured flat from 128 to 1,024 (2.6-2.8 us per
20,000-column row), twice as slow at 4,096, where the second look rereads too much of the row."""


def _minnum_typing(typingctx, a, b):
    """The smaller of two float32 values, as LLVM's ``minnum`` marked no-NaN and no-signed-zero.

    WHY AN INTRINSIC. It is the one float minimum LLVM vectorises inside a reduction loop: numba's
    ``min`` and ``fastmath`` compile to one scalar ``vminss`` after another (numba flags the
    comparison, not the select), 7.2 us for a row of 20,000, against 1.5 us for this. Only for
    values known finite, as the GEMM's rows are; the sign of a zero cannot change a threshold.
    """
    if a != numba.types.float32 or b != numba.types.float32:
        return None

    def codegen(context, builder, signature, args):  # numba calls it with these four
        single = llvmlite.ir.FloatType()
        minnum = numba.core.cgutils.get_or_insert_function(
            builder.module, llvmlite.ir.FunctionType(single, [single, single]), "llvm.minnum.f32")
        return builder.call(minnum, args, fastmath=("nnan", "nsz"))

    return numba.types.float32(numba.types.float32, numba.types.float32), codegen


# Cast for the type checker only: numba's intrinsic wrapper is typed as taking the typing context too.
_lesser = typing.cast("Callable[[np.float32, np.float32], np.float32]", numba.extending.intrinsic(_minnum_typing))


@numba.njit(nogil=True, cache=True, inline="always")
def _chunk_lows(row, norms, lows, lowest):
    """Each :data:`_CHUNK` columns' minimum of ``row + norms`` into ``lows``, in one vectorised
    pass; returns the smaller of ``lowest`` and the row's own minimum.

    WHY TWO HALVES. One running minimum per chunk is one chain of dependent ``minnum``s: LLVM
    vectorises it, but each vector waits for the last (0.22 ns a value from the core's own cache).
    The two halves of a chunk as two minima are two independent chains, and the loop runs at the
    load ports' pace (0.035 ns a value), six times faster; read from the shared cache instead, both
    wait on memory (0.15 ns).
    """
    width = row.shape[0]
    half = _CHUNK // 2
    for c in range(lows.shape[0]):
        start = c * _CHUNK
        if start + _CHUNK <= width:
            first = np.float32(np.inf)
            second = np.float32(np.inf)
            for j in range(start, start + half):
                first = _lesser(first, row[j] + norms[j])
                second = _lesser(second, row[j + half] + norms[j + half])
            chunk_low = _lesser(first, second)
        else:
            chunk_low = np.float32(np.inf)
            for j in range(start, width):
                chunk_low = _lesser(chunk_low, row[j] + norms[j])
        lows[c] = chunk_low
        lowest = _lesser(lowest, chunk_low)
    return lowest


@numba.njit(nogil=True, cache=True)
def settle_rows(approx, norms, margin, offset, source, target, found, squared, first, stop):
    """The exact winner of rows ``first:stop`` of one block of the ``|t|^2 - 2 s.t`` search.

    Row ``r`` of ``approx + norms`` (float32: ``-2 s.t``, then ``|t|^2`` added) is source
    ``offset + r``; every column at or below the row's
    minimum plus ``margin[offset + r]`` (the float32 sum the floor makes:
    :class:`spacr_accel_core.exact.ExpansionPlan`) is a candidate, settled by the float64 sum of
    squared differences in coordinate order, lowest index first among equals.

    WHY IN ONE PASS. A single vectorised pass over the row takes the minimum of each
    :data:`_CHUNK` columns; only the chunks whose minimum is at or below the threshold, almost
    always the one holding the row's minimum alone, are looked at again, while they are still in
    this core's cache. NumPy's argmin followed by a count of the candidates read every row twice
    from the shared cache: 6.2 against 2.6 us per row of 20,000.
    """
    count = target.shape[0]
    chunks = (count + _CHUNK - 1) // _CHUNK
    lows = np.empty(chunks, dtype=np.float32)
    for r in range(first, stop):
        row = approx[r]
        i = offset + r
        lowest = _chunk_lows(row, norms, lows, np.float32(np.inf))
        threshold = lowest + margin[i]
        best = np.inf
        winner = -1
        for c in range(chunks):
            if lows[c] > threshold:
                continue
            for j in range(c * _CHUNK, min(count, (c + 1) * _CHUNK)):
                if row[j] + norms[j] <= threshold:
                    total = _squared(source, i, target, j)
                    if total < best:  # ascending j: the first of equals is kept
                        best = total
                        winner = j
        found[i] = winner
        squared[i] = best


@numba.njit(nogil=True, cache=True)
def absorb_tile(tile, norms, column, margin, offset, lowest, held_at, held_value, held, first, stop):
    """Fold one column tile of the ``|t|^2 - 2 s.t`` search into rows ``first:stop``' running state.

    Row ``r`` of ``tile + norms`` (float32: the GEMM's ``-2 s.t``, then ``|t|^2`` of targets
    ``column`` onwards added) is source ``offset + r`` against those targets.
    ``lowest[r]`` is the smallest value seen so far; ``held_at[r, :held[r]]`` and ``held_value``
    keep, in ascending column order, every column seen so far at or below the running threshold,
    ``lowest + margin[offset + r]``. The threshold only falls, so every column at or below the
    final one (the floor's candidate test) is held when the last tile is folded in. A row whose
    candidates outgrow ``held_at`` even after dropping those above the threshold is marked
    ``held[r] = -1``, to be searched again whole (ties, duplicated targets).

    As in :func:`settle_rows`, one vectorised pass takes each :data:`_CHUNK`'s minimum, and only
    the chunks at or below the threshold are looked at again, while the tile is in cache.
    """
    width = tile.shape[1]
    capacity = held_at.shape[1]
    chunks = (width + _CHUNK - 1) // _CHUNK
    lows = np.empty(chunks, dtype=np.float32)
    for r in range(first, stop):
        row = tile[r]
        lowest_here = _chunk_lows(row, norms, lows, lowest[r])
        lowest[r] = lowest_here
        count = held[r]
        if count < 0:
            continue
        threshold = lowest_here + margin[offset + r]
        for c in range(chunks):
            if lows[c] > threshold:
                continue
            for j in range(c * _CHUNK, min(width, (c + 1) * _CHUNK)):
                value = row[j] + norms[j]
                if value <= threshold:
                    if count == capacity:
                        count = _drop_above(held_at[r], held_value[r], count, threshold)
                        if count == capacity:
                            count = -1
                            break
                    held_at[r, count] = column + j
                    held_value[r, count] = value
                    count += 1
            if count < 0:
                break
        held[r] = count


@numba.njit(nogil=True, cache=True)
def _drop_above(at, value, count, threshold):
    """Keep, in order, the first ``count`` held columns at or below ``threshold``; their number."""
    kept = 0
    for h in range(count):
        if value[h] <= threshold:
            at[kept] = at[h]
            value[kept] = value[h]
            kept += 1
    return kept


@numba.njit(nogil=True, cache=True)
def settle_held(lowest, margin, offset, held_at, held_value, held, source, target, found, squared):
    """The exact winner of each row :func:`absorb_tile` kept whole (``held[r] >= 0``): its held
    columns at or below the final threshold, settled by :func:`_squared`, lowest index first."""
    for r in range(lowest.shape[0]):
        if held[r] < 0:
            continue
        i = offset + r
        threshold = lowest[r] + margin[i]
        best = np.inf
        winner = -1
        for h in range(held[r]):  # ascending column: the first of equals is kept
            if held_value[r, h] <= threshold:
                j = held_at[r, h]
                total = _squared(source, i, target, j)
                if total < best:
                    best = total
                    winner = j
        found[i] = winner
        squared[i] = best
