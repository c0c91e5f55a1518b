"""The compiled loops: imported only by the background warm-up (it imports numba, ~0.4 s).

Every function here is ``nogil`` (the Python drivers in :mod:`._filter` and :mod:`._grid` split
the work between threads) and cached on disk (``cache=True``), so a later process loads the
machine code instead of compiling it again.

Two rules the loops keep, and why:

- **Slices, not offsets.** A loop over ``src[x]`` and ``src[x + step]`` does not vectorise (LLVM
  cannot prove the two reads independent of the write); the same loop over two slices taken
  before it does, and was measured 8x faster (1.2 against 10 ms for 4096 rows of 4096).
- **The contract's arithmetic, nothing faster.** No ``fastmath``: the NaN test below and the
  order of the float64 sum of squared differences (:func:`spacr_accel_core.exact.exact_squared`)
  must survive compilation, and a fused multiply-add would round differently.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True, inline="always")
def _largest(a, b):
    # The NaN rule: a window holding a NaN yields NaN. ``a > b`` alone keeps ``b`` when ``a`` is
    # NaN; the bitwise ``|`` (not ``or``) keeps the select branch-free, so it still vectorises.
    # For an integer field ``a != a`` is False and compiles away.
    return a if (a > b) | (a != a) else b  # noqa: PLR0124  # a != a is the NaN test numba compiles for every dtype


@numba.njit(nogil=True, cache=True)
def _pair(src, dst, n, step):
    first = src[:n]
    second = src[step:step + n]
    out = dst[:n]
    for x in range(n):
        out[x] = _largest(first[x], second[x])


@numba.njit(nogil=True, cache=True)
def _pair_out(src, out, n, step):
    first = src[:n]
    second = src[step:step + n]
    for x in range(n):
        out[x] = np.float32(_largest(first[x], second[x])) + np.float32(0.0)


@numba.njit(nogil=True, cache=True)
def _across(row, out, padded, spare, radius):
    """``out`` = the ``2 radius + 1`` wide running maximum of ``row``, its ends repeated, by
    doubling: the maximum over 2w is that of two overlapping w-maxima (width 15: four passes)."""
    width = row.shape[0]
    size = 2 * radius + 1
    first, last = row[0], row[width - 1]
    for x in range(radius):
        padded[x] = first
        padded[radius + width + x] = last
    middle = padded[radius:radius + width]
    for x in range(width):
        middle[x] = row[x]
    length = width + 2 * radius
    reached = 1
    flipped = False
    while True:
        step = min(reached, size - reached)
        if reached + step == size:
            _pair_out(spare if flipped else padded, out, width, step)
            return
        length -= step
        if flipped:
            _pair(spare, padded, length, step)
        else:
            _pair(padded, spare, length, step)
        flipped = not flipped
        reached += step


@numba.njit(nogil=True, cache=True)
def filter_band(field, out, down, across, first_row, stop_row):
    """Rows ``first_row:stop_row`` of the window maximum of ``field`` into float32 ``out``.

    Down the columns by van Herk/Gil-Werman: the rows, edge-repeated, fall into blocks of
    ``k = 2 down + 1``; a window starting ``j`` rows into block ``b`` is the maximum of block b's
    suffix from ``j`` and block ``b + 1``'s prefix to ``j - 1``, so each pixel costs three maxima
    whatever the window. Then across each row by :func:`_across`. ``first_row`` is a multiple of
    ``k`` (the driver cuts bands on block boundaries); returns 0.
    """
    height, width = field.shape
    k = 2 * down + 1
    suffix = np.empty((k, width), field.dtype)
    prefix = np.empty((k, width), field.dtype)
    column = np.empty(width, field.dtype)
    padded = np.empty(width + 2 * across, field.dtype)
    spare = np.empty(width + 2 * across, field.dtype)
    for block in range(first_row // k, (stop_row - 1) // k + 1):
        top = block * k - down  # the block's first row, in edge-repeated coordinates
        for j in range(k - 1, -1, -1):
            src = field[min(max(top + j, 0), height - 1)]
            dst = suffix[j]
            if j == k - 1:
                for x in range(width):
                    dst[x] = src[x]
            else:
                below = suffix[j + 1]
                for x in range(width):
                    dst[x] = _largest(src[x], below[x])
        for j in range(k):
            src = field[min(max(top + k + j, 0), height - 1)]
            dst = prefix[j]
            if j == 0:
                for x in range(width):
                    dst[x] = src[x]
            else:
                above = prefix[j - 1]
                for x in range(width):
                    dst[x] = _largest(above[x], src[x])
        for y in range(max(first_row, block * k), min(stop_row, (block + 1) * k)):
            j = y - block * k
            if j == 0:
                whole = suffix[0]
            else:
                tail = suffix[j]
                head = prefix[j - 1]
                for x in range(width):
                    column[x] = _largest(tail[x], head[x])
                whole = column
            if across == 0:
                target = out[y]
                for x in range(width):
                    target[x] = np.float32(whole[x]) + np.float32(0.0)
            else:
                _across(whole, out[y], padded, spare, across)
    return 0


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


@numba.njit(nogil=True, cache=True)
def grid_query(source, low, edge, inverse, cells, starts, order, ordered, slack, most_cells,
               found, squared, first, stop):
    """The exact nearest target of sources ``first:stop`` (lowest index on ties), ring by ring of
    cells around the source's own, stopping once no unvisited cell can hold a point as near.

    A cell whose bounding slab is already farther than the best is skipped. A source still
    unsettled after ``most_cells`` cells (far outside the targets, or in a wide empty region) gets
    ``found = -1`` for the driver to settle. Returns how many such sources there were.
    """
    dims = source.shape[1]
    nx, ny, nz = cells[0], cells[1], cells[2]
    unsettled = 0
    for i in range(first, stop):
        s0 = source[i, 0]
        s1 = source[i, 1] if dims > 1 else 0.0
        s2 = source[i, 2] if dims > 2 else 0.0
        c0 = _slot(s0, low[0], inverse[0], nx)
        c1 = _slot(s1, low[1], inverse[1], ny) if dims > 1 else 0
        c2 = _slot(s2, low[2], inverse[2], nz) if dims > 2 else 0
        best = np.inf
        winner = -1
        ring = 0
        visited = 0
        while True:
            for x in range(max(c0 - ring, 0), min(c0 + ring, nx - 1) + 1):
                on_x = abs(x - c0) == ring
                gx = _slab_gap(s0, low[0], edge[0], x, slack)
                if gx * _SHRINK > best:
                    continue
                for y in range(max(c1 - ring, 0), min(c1 + ring, ny - 1) + 1):
                    on_xy = on_x or abs(y - c1) == ring
                    gxy = gx + (_slab_gap(s1, low[1], edge[1], y, slack) if dims > 1 else 0.0)
                    if gxy * _SHRINK > best:
                        continue
                    z = max(c2 - ring, 0)
                    z_stop = min(c2 + ring, nz - 1)
                    while z <= z_stop:
                        if not (on_xy or abs(z - c2) == ring):
                            z = c2 + ring  # an inner cell, visited in an earlier ring: jump to the far face
                            continue
                        gxyz = gxy + (_slab_gap(s2, low[2], edge[2], z, slack) if dims > 2 else 0.0)
                        if gxyz * _SHRINK <= best:
                            cell = (x * ny + y) * nz + z
                            visited += 1
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
                        z += 1
            # How near can a point outside the box of rings 0..ring be? No nearer than the box's
            # nearest face that has cells beyond it.
            gap = np.inf
            beyond = False
            for k in range(dims):
                ck = c0 if k == 0 else (c1 if k == 1 else c2)
                nk = nx if k == 0 else (ny if k == 1 else nz)
                sk = s0 if k == 0 else (s1 if k == 1 else s2)
                if ck - ring > 0:
                    beyond = True
                    gap = min(gap, sk - (low[k] + (ck - ring) * edge[k]))
                if ck + ring < nk - 1:
                    beyond = True
                    gap = min(gap, low[k] + (ck + ring + 1) * edge[k] - sk)
            if not beyond:
                break
            gap -= slack
            if gap > 0 and best < gap * gap * _SHRINK:
                break
            if visited > most_cells:
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
    """Settle ``rows`` of the source by comparing them with every target (exact, lowest index)."""
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


_STRIDE = 32  # values scanned for any candidate before any is looked at one by one


@numba.njit(nogil=True, cache=True)
def _count_at_most(row, threshold):
    hits = 0
    for j in range(row.shape[0]):
        hits += row[j] <= threshold
    return hits


@numba.njit(nogil=True, cache=True)
def settle_rows(approx, thresholds, lowest_at, offset, source, target, found, squared, first, stop):
    """The exact winner of rows ``first:stop`` of one block of the ``|t|^2 - 2 s.t`` search.

    Row ``r`` of ``approx`` is source ``offset + r``; every column at or below ``thresholds[r]``
    (the row's rounded minimum, at column ``lowest_at[r]``, plus its margin:
    :class:`spacr_accel_core.exact.ExpansionPlan`) is a candidate, settled by the float64 sum of
    squared differences in coordinate order, lowest index first among equals. One vectorised pass
    counts the candidates; almost always the minimum is the only one and is the answer, and only
    otherwise is the row walked (a stride at a time, skipping strides without a candidate).
    """
    count = target.shape[0]
    for r in range(first, stop):
        row = approx[r]
        threshold = thresholds[r]
        i = offset + r
        if _count_at_most(row, threshold) == 1:
            found[i] = lowest_at[r]
            squared[i] = _squared(source, i, target, lowest_at[r])
            continue
        best = np.inf
        winner = -1
        for base in range(0, count, _STRIDE):
            end = min(count, base + _STRIDE)
            if _count_at_most(row[base:end], threshold) == 0:
                continue
            for j in range(base, end):
                if row[j] <= threshold:
                    total = _squared(source, i, target, j)
                    if total < best:  # ascending j: the first of equals is kept
                        best = total
                        winner = j
        found[i] = winner
        squared[i] = best
