"""The neighbours family's compiled loops and the drivers that share them between threads: one
neighbour on a uniform grid (1 to 3 coordinates) or by a float32 GEMM (16 and more), ``k`` within a
distance on the grid, and Hamming by popcount. Imported by the hooks of :mod:`._neighbours` once the
kernel they need is ready (it imports numba, ~0.4 s), and by the warm-up.

Every compiled function here is ``nogil`` (the drivers below split the work between threads) and
cached on disk (``cache=True``), so a later process loads the machine code instead of compiling it
again. Two rules the loops keep, and why:

- **Slices, not offsets.** A loop over ``src[x]`` and ``src[x + step]`` does not vectorise (LLVM
  cannot prove the two reads independent of the write); the same loop over two slices taken
  before it does, and was measured 8x faster (1.2 against 10 ms for 4096 rows of 4096).
- **The contract's arithmetic, nothing faster.** No ``fastmath``: the NaN test below and the
  order of the float64 sum of squared differences (:func:`spacr_accel_core.exact.exact_squared`)
  must survive compilation, and a fused multiply-add would round differently. The one exception,
  :func:`_lesser`, drops only the NaN and signed-zero rules from a minimum of values known finite.
  Ties go to the lower index.

ONE NEIGHBOUR ON A GRID (:func:`grid_nearest`). Exact nearest neighbours of cell centroids on a
uniform grid (a cell list), for 1 to 3 coordinates.

WHY A GRID. spaCR's centroids cover a field about evenly; a grid of ~2 targets per cell answers
a source from its own ring of cells (9 in 2-D, 27 in 3-D, fewer after skipping those already
farther than the best), with no tree to walk. Built by one counting sort, it answered 100,000 x
100,000 in 2-D in about half pykdtree's time, exactly (the peers' ``nearest`` rows:
``python benchmarks/bench_science.py --only nearest``).

SOURCES FAR AWAY, OR IN AN EMPTY HOLE. A source's walk starts at the ring of the nearest cell
that holds a target, leaps along each ring over empty stretches, and stops once every cell beyond
its rings is provably farther than its best: a bound that counts the distance from the source to
the targets' bounding box, so a source far outside stops after a few rings instead of crossing
the grid (:func:`grid_query`; ``benchmarks/bench_numba_edges.py`` measures both against
the floor). Each empty cell's distance to the nearest cell holding a target comes from one
chamfer pass over the grid (:func:`grid_empty`).

WHERE IT DECLINES (the next backend, the NumPy floor's KD-tree, answers exactly): more than 3
coordinates, and targets crowded into few cells (tight clusters, many copies of a point), where a
uniform grid degrades and a tree does not. A source whose walk looks at more than
:data:`_STEPS` cells (so far away that rounding hides the rings' progress) is compared with every
target instead, as long as those comparisons stay within :data:`_BRUTE_PAIRS`.

WIDE POINTS (:func:`wide_nearest`). Exact nearest neighbours of wide points (16 coordinates and
more): one float32 GEMM, tile by tile, each tile folded into every row's running minimum and
candidates while it is in cache.

WHY TALL TILES. NumPy's GEMM (the BLAS's, with its threads) packs its right operand again on every
call: full-width blocks of ~100 rows repacked all 20,000 targets 200 times. Tiles of
:data:`_TILE_ROWS` x :data:`_TILE_COLUMNS` (16 MiB, in the shared cache) took the D = 64,
20,000 x 20,000 GEMM from 0.39-0.43 s to 0.35-0.36 s (best of 11, interleaved; 2048 rows then).
4096 rows rather than 2048 halve the GEMM calls and the hand-offs between threads, each a wait
for every thread: on two busy cores the search took 0.57 of faiss's time against 0.96 with 2048
rows (0.83 against 0.87 on one thread); 8192 rows and 2048 columns were no better.

WHY A RUNNING STATE. A row's threshold (its minimum plus the margin,
:class:`spacr_accel_core.exact.ExpansionPlan`) is known only after its last tile, so each tile
updates the running minimum and keeps the columns at or below the running threshold
(:func:`absorb_tile`): the threshold only falls, so no final candidate is missed, and
usually one or two columns are kept. A row with more candidates than :data:`HELD` (ties,
duplicated targets) is searched again whole, its GEMM row recomputed.

``k`` NEAREST WITHIN A DISTANCE (:func:`k_nearest`). Exact ``k`` nearest neighbours within an
optional distance on a uniform grid, for 1 to 3 coordinates.

WHY THE GRID AGAIN. The cell list of :func:`grid_nearest` answers one neighbour from a source's own
ring of cells; ``k`` neighbours need only the ``k``-th best in place of the best as the pruning bound
(:func:`grid_k_query`). A ``max_distance`` is that bound from the start: a source
whose nearest target is farther than it visits the cells within it and stops, so the half of a
shifted second field that has no partner costs almost nothing.

WHY FAR SOURCES GO TO A TREE. A source many cells outside the targets' bounding box would walk
ring after ring of cells that are all farther than its answer; the floor's KD-tree
(:func:`~spacr_accel_core.toolkit.exact_search`) answers those few exactly, and a source
farther from the box than ``max_distance`` is answered at once, without any search.

WHY THE SOURCES ARE BUCKETED FIRST. Visited in the order given, neighbouring sources of a random
list touch cells far apart; bucketed by the same grid (one counting sort), consecutive sources
read the same cells from cache. Each answer is written straight to its row in the caller's order.

WHAT IT SHARES WITH THE FLOOR. Targets repeated so often that they crowd a cell are searched
again through the floor's :func:`~spacr_accel_core.toolkit.search_distinct` (once per distinct
point), and the answer's float32 form is the floor's :func:`~spacr_accel_core.toolkit.finish`
(through that path; the grid's own answer takes the same steps compiled, in one pass, and the
tests hold the two to the same bits): the same answer bit for bit, whichever ran. Targets crowded
into few cells otherwise (tight clusters) are declined, as :func:`grid_nearest` declines them: a
tree answers those faster.

THE ``k`` BEST OF A ROW. Each source keeps its ``k`` best ``(distance, index)`` pairs in two small
sorted arrays, the worst last. A candidate enters when it is strictly better in that order, and
the worst's distance is what every cell or word is pruned against. The arrays start filled
with ``(bound, sentinel)``: a ``max_distance`` prunes exactly like a found ``k``-th neighbour would.

HAMMING (:func:`hamming_nearest`). Exact Hamming nearest neighbours of binary descriptors,
threaded, with one ``popcnt`` per 64 bits.

WHY A COMPILED BRUTE FORCE. Every pair must be compared (binary descriptors have no geometry a
tree can use), so the speed is instructions per pair: four XORs, four population counts and three
additions for ORB's 32 bytes, the source's words held in registers while a tile of targets sits in
the first-level cache, its words stored position by position so that the loop over the tile is
vectorised, population counts included (:func:`hamming_rows`). The counts are exact integers, kept
in (count, index) order per source, so there is nothing to settle; the answer's float32 form is the
NumPy floor's (:func:`~spacr_accel_core.toolkit.finish`), the same bit for bit.
"""

from __future__ import annotations

import logging
import math
import typing
from collections.abc import Callable
from typing import Any, NamedTuple

import llvmlite.ir
import numba
import numba.core.cgutils
import numba.extending
import numpy as np

from spacr_accel_core import BackendDeclined
from spacr_accel_core.toolkit import (
    ExpansionPlan,
    cpu_threads,
    exact_search,
    expansion_plan,
    finish,
    padded_bound,
    run_parts,
    search_distinct,
)

from . import _locator  # noqa: F401  (before any njit: these kernels' cache stamped with every file they come from)
from ._widths import DIMENSIONS, WIDE

_log = logging.getLogger(__name__)


# ---- one neighbour on the grid: the compiled loops --------------------------------------------------


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

# ---- one neighbour of wide points: the compiled loops ---------------------------------------------


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


# ---- k nearest within a distance, and Hamming: the compiled loops -----------------------------------


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
def grid_k_query(  # one loop nest, whole, so LLVM sees it entire
        source, rows, low, edge, inverse, cells, starts, order, ordered, slack, most_cells, bound, sentinel,
        found, squared, first, stop):
    """The exact ``k`` nearest targets (``k = found.shape[1]``) of sources ``first:stop`` within
    ``bound`` (a squared distance; ``inf`` for none), ring by ring of grid cells.

    As :func:`grid_query`, with the ``k``-th best in place of the best: a cell whose slab is
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
    neighbour. The walked are sorted by cell as :func:`grid_build` sorts the targets
    (stable), so neighbouring sources read the same cells from cache.

    WHY THE VERDICT IS A PASS OF ITS OWN. A shifted second field puts the sources within and
    beyond the bound in random order, and a branch on which it is (or on which border cell a source
    clamps to) was mispredicted about every other source. The first pass branches on nothing: each
    source is written to both lists, and the verdict moves their ends. Only the walked are then
    bucketed, by :func:`grid_build`'s counting sort.

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



# Cast for the type checker only: numba's intrinsic wrapper is typed as taking the typing context too.
_popcount = typing.cast("Callable[[np.uint64], int]", numba.extending.intrinsic(_ctpop_typing))


_TILE = 256
"""Targets compared with one source at a time: their four 2 KiB columns of words stay in the first-level
cache while every source of the thread streams past them (measured: 256 a little ahead of 128 and 1,024)."""


@numba.njit(nogil=True, cache=True)
def hamming_rows(source, columns, limit, sentinel, found, counted, first, stop):  # one loop nest
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



# ---- one neighbour on the grid: the driver ---------------------------------------------------------

_PER_CELL = 2.0  # targets per cell: measured best of 1, 2 and 4 in 2-D and 3-D
_CROWD = 64
"""Targets in one cell beyond which the data is clustered (for ``k`` neighbours, per two neighbours
asked), and a tree answers it."""
_STEPS = 1 << 14  # cells a source's walk may look at before the brute force settles it instead
_BRUTE_PAIRS = 1 << 26  # comparisons the brute force may make for unsettled sources in one call
_MIN_THREADED = 1 << 14  # sources below which one thread answers
_MIN_THREADED_LEFT = 64  # the same for the sources left to the brute force (each costs far more)
_SLACK = 2.0 ** -40  # relative to the coordinates' magnitude: far above every rounding, far below any distance


class _Grid(NamedTuple):
    """One grid over the targets' bounding box ``[low, high]`` (3 axes; unused ones are one cell)."""

    low: np.ndarray
    high: np.ndarray
    edge: np.ndarray
    inverse: np.ndarray
    cells: np.ndarray


def grid_cells(target: np.ndarray, per_cell: float) -> _Grid:
    """A grid over ``target``'s bounding box ``[low, high]`` with about ``per_cell`` targets per cell
    (the one sizing both searches use: one neighbour in :func:`grid_nearest`, ``k`` in :func:`grid_k_nearest`)."""
    count, dims = target.shape
    low = np.zeros(3)
    high = np.zeros(3)
    for axis in range(dims):  # column by column: NumPy's min(axis=0) of (N, 2) is ~20x slower
        low[axis] = target[:, axis].min()
        high[axis] = target[:, axis].max()
    extent = high - low
    live = [axis for axis in range(dims) if extent[axis] > 0]
    cells = np.ones(3, dtype=np.int64)
    wanted = max(1.0, count / per_cell)
    if live:
        side = float(np.prod(extent[live]) / wanted) ** (1.0 / len(live))
        while True:  # a thin, long cloud must not make the grid far larger than the targets
            for axis in live:
                cells[axis] = max(1, min(int(np.ceil(extent[axis] / side)), count))
            if int(np.prod(cells)) <= 4 * wanted:
                break
            side *= 1.25
    edge = np.ones(3)
    inverse = np.zeros(3)
    for axis in live:
        edge[axis] = extent[axis] / cells[axis]
        inverse[axis] = cells[axis] / extent[axis]
    return _Grid(low, high, edge, inverse, cells)


def grid_nearest(source: np.ndarray, target: np.ndarray, budget: int = _STEPS) -> tuple[np.ndarray, np.ndarray]:
    """Each source's exact nearest target (lowest index on ties) and the float64 squared distance.

    :param source: float64 ``(N, D)`` C-contiguous, ``1 <= D <= 3``, finite.
    :param target: float64 ``(M, D)`` C-contiguous, ``M >= 1``, finite.
    :param budget: cells a source's walk may look at before the brute force settles it
        (:data:`_STEPS`; the tests pass 0 to send every source there).
    :raises BackendDeclined: the targets are clustered, or too many sources lie far from them.
    """
    # numba compiles read-only arrays as other types, and no call may compile (it would wait
    # seconds, and for numba's compiler lock): a read-only input is copied.
    source = source if source.flags.writeable else source.copy()
    target = target if target.flags.writeable else target.copy()
    grid = grid_cells(target, _PER_CELL)
    starts, order, ordered, crowd = grid_build(target, grid.low, grid.inverse, grid.cells)
    if crowd > _CROWD:
        raise BackendDeclined(f"the targets crowd {crowd} into one grid cell (clustered or repeated "
                              "points): a tree answers them faster")
    count = source.shape[0]
    found = np.empty(count, dtype=np.int64)
    squared = np.empty(count, dtype=np.float64)
    if count == 0:
        return found, squared
    empty = grid_empty(starts, grid.cells)
    scale = max(float(np.abs(target).max()), float(np.abs(source).max()), 1e-300)
    threads = 1 if count < _MIN_THREADED else cpu_threads()
    bounds = np.linspace(0, count, threads + 1).astype(np.int64)
    parts = [(source, int(bounds[i]), int(bounds[i + 1]), grid.low, grid.high, grid.edge, grid.inverse, grid.cells,
              starts, order, ordered, empty, scale * _SLACK, budget, found, squared) for i in range(threads)]
    if sum(run_parts(grid_query, parts)):
        left = np.flatnonzero(found < 0)
        if left.size * target.shape[0] > _BRUTE_PAIRS:
            raise BackendDeclined(f"{left.size} sources lie far from every target: a tree answers them faster")
        threads = 1 if left.size < _MIN_THREADED_LEFT else cpu_threads()
        bounds = np.linspace(0, left.size, threads + 1).astype(np.int64)
        run_parts(brute_rows, [(source, target, left[bounds[i]:bounds[i + 1]], found, squared)
                                       for i in range(threads)])
    return found, squared


def warm_grid() -> object:
    """Compile (or load) the grid's loops on inputs of exactly the driver's types: for a warm-up."""
    points = np.arange(12, dtype=np.float64).reshape(4, 3)
    grid_nearest(points, points[::-1].copy())
    # The brute force the driver falls back on for far sources: compiled here too, so that no
    # call compiles (a call that compiles waits seconds, and for numba's compiler lock).
    return brute_rows(points, points, np.arange(4)[1:3], np.empty(4, np.int64), np.empty(4))


# ---- one neighbour of wide points: the driver --------------------------------------------------------

_F32_UNIT = float(np.finfo(np.float32).eps) / 2  # unit roundoff of an IEEE float32 GEMM
_TILE_ROWS = 4096
_TILE_COLUMNS = 1024  # with _TILE_ROWS, 16 MiB of float32: measured best of 256-8192 at M = 20,000
_AGAIN_BYTES = 8 << 20  # one block of whole GEMM rows for the rows searched again

HELD = 16
"""Candidates a row keeps across tiles before it is searched again whole."""


def wide_nearest(source: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each source's exact nearest target (lowest index on ties) and the float64 squared distance.

    :param source: float32 or float64 ``(N, D)`` finite points (D >= 1).
    :param target: likewise ``(M, D)``, M >= 1.
    """
    n, m, dims = source.shape[0], target.shape[0], source.shape[1]
    plan = expansion_plan(source, target, np.float32, _F32_UNIT)
    # The plan's product is D + 1 deep, its last term 1 x |t|^2: the GEMM runs D deep (a depth the
    # BLAS's kernels take whole) and the kernels add |t|^2, the sum's last term, as they read.
    left, right, norms = plan.left[:, :dims], plan.right[:dims], plan.right[dims]
    s64 = np.ascontiguousarray(source, dtype=np.float64)
    t64 = np.ascontiguousarray(target, dtype=np.float64)
    # numba compiles read-only arrays as other types, and no call may compile: copied if so.
    s64 = s64 if s64.flags.writeable else s64.copy()
    t64 = t64 if t64.flags.writeable else t64.copy()
    found = np.empty(n, dtype=np.int64)
    squared = np.empty(n, dtype=np.float64)
    rows, columns = min(n, _TILE_ROWS), min(m, _TILE_COLUMNS)
    tile = np.empty((rows, columns), dtype=np.float32)
    lowest = np.empty(rows, dtype=np.float32)
    held_at = np.empty((rows, HELD), dtype=np.int64)
    held_value = np.empty((rows, HELD), dtype=np.float32)
    held = np.empty(rows, dtype=np.int64)
    again: list[np.ndarray] = []
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        lowest[:] = np.inf
        held[:] = 0
        bounds = np.linspace(0, stop - start, min(cpu_threads(), stop - start) + 1).astype(np.int64)
        for column in range(0, m, columns):
            block = tile[:stop - start, :min(m, column + columns) - column]
            np.matmul(left[start:stop], right[:, column:column + block.shape[1]], out=block)
            sums = norms[column:column + block.shape[1]]
            run_parts(absorb_tile, [(block, sums, column, plan.margin, start, lowest, held_at, held_value,
                                             held, int(bounds[i]), int(bounds[i + 1]))
                                            for i in range(len(bounds) - 1)])
        settle_held(lowest[:stop - start], plan.margin, start, held_at, held_value, held, s64, t64,
                            found, squared)
        again.append(start + np.flatnonzero(held[:stop - start] < 0))
    _search_again(plan, np.concatenate(again), s64, t64, found, squared)
    return found, squared


def _search_again(plan: ExpansionPlan, rows: np.ndarray, s64: np.ndarray, t64: np.ndarray, found: np.ndarray,
                  squared: np.ndarray) -> None:
    """Settle ``rows`` (indices into the source) from their whole GEMM rows (:func:`settle_rows`)."""
    m, dims = t64.shape
    step = max(1, _AGAIN_BYTES // (4 * m))
    for first in range(0, rows.shape[0], step):
        chosen = rows[first:first + step]
        approx = plan.left[chosen, :dims] @ plan.right[:dims]  # |t|^2 added by the kernel, as above
        part_found = np.empty(chosen.shape[0], dtype=np.int64)
        part_squared = np.empty(chosen.shape[0], dtype=np.float64)
        settle_rows(approx, plan.right[dims], plan.margin[chosen], 0, s64[chosen], t64, part_found,
                            part_squared, 0, chosen.shape[0])
        found[chosen] = part_found
        squared[chosen] = part_squared


def warm_wide() -> object:
    """Compile (or load) the GEMM search's loops on inputs of exactly the driver's types: for a warm-up."""
    # More equal targets than a row holds: the whole-row search again is compiled too.
    points = np.zeros((HELD + 1, WIDE), dtype=np.float32)
    return wide_nearest(points[:4], points)


# ---- k nearest within a distance: the driver -----------------------------------------------------

_MOST_CELLS = 4096  # cells a source may visit before it is settled by brute force instead
_FAR_CELLS = 8.0
"""Cells beyond the targets' bounding box from which a source goes to the KD-tree: the rings of
cells around a source that far out are mostly empty, and walking them costs more than a tree."""
_MIN_THREADED_K = 1 << 13  # sources below which one thread answers the k nearest
_SMALL_PAIRS = 1 << 16  # pairs few enough to compare outright when the grid is crowded


class _Crowded(BackendDeclined):
    """The targets crowd into few cells: repeated points (searched again as distinct ones) or a
    tight cluster (declined)."""


def _per_cell(k: int) -> float:
    """Targets per cell: 2 for one neighbour (measured by :func:`grid_nearest`); about ``k`` for more, so a
    source's ``k`` nearest mostly lie in its own ring of cells."""
    return max(2.0, float(k))


def _call(work: Callable[..., Any], *arguments: Any) -> Any:
    """``work(*arguments)``: two different kernels handed to :func:`run_parts` as one work."""
    return work(*arguments)


def _far_out(edge: np.ndarray, inverse: np.ndarray, dims: int) -> float:
    """The squared distance from the targets' box beyond which a source goes to the KD-tree (see
    :data:`_FAR_CELLS`): ``inf`` for targets that are one point (no axis to measure cells along)."""
    live = inverse[:dims] > 0
    return (_FAR_CELLS * float(edge[:dims][live].max())) ** 2 if live.any() else np.inf


def grid_k_nearest(source: np.ndarray, target: np.ndarray, k: int,
                   bound: float) -> tuple[np.ndarray, np.ndarray]:
    """The exact first ``min(k, M)`` targets within ``bound`` of every source, by the grid.

    :param source: float32 ``(N, D)``, ``1 <= D <= 3``, finite.
    :param target: float32 ``(M, D)``, ``M >= 1``, finite.
    :param bound: the padded search radius (:func:`~spacr_accel_core.toolkit.padded_bound`).
    :returns: int64 indices and float64 exact squared distances, ``(N, min(k, M))``, ``-1``/``inf``
        where no target lies within ``bound``.
    :raises BackendDeclined: crowded targets, or too many sources far from every target.
    """
    s64 = np.ascontiguousarray(source, dtype=np.float64)
    t64 = np.ascontiguousarray(target, dtype=np.float64)
    n, m = s64.shape[0], t64.shape[0]
    have = min(k, m)
    low, high, edge, inverse, cells = grid_cells(t64, _per_cell(have))
    limit = bound * bound if np.isfinite(bound) else np.inf
    # WHY ONE COMPILED PASS CHOOSES THE SOURCES. A bounded search is worth having only if the
    # sources beyond the bound cost almost nothing. Chosen in NumPy (a distance to the box, masks,
    # a gather), with the walked ones' answers scattered back and the rest filled after, they took
    # as long as walking the others (100,000 sources, half beyond the bound: 7 ms of 14, and the
    # bounded call 0.63 to 0.86 of the unbounded one from run to run). One pass now chooses and
    # buckets them (:func:`grid_sources`), and the walk writes each answer in its
    # row. It and the targets' grid are built side by side where the points are enough to pay for
    # the hand-off (20 sources and 30 targets: 187 us a call side by side, 91 one after the other).
    reach = limit * (1.0 + 1e-9)  # the partition's slack over the bound's square: far above its rounding
    far_out = _far_out(edge, inverse, s64.shape[1])
    builds: list[tuple[Any, ...]] = [(grid_build, t64, low, inverse, cells),
                                     (grid_sources, s64, low, high, inverse, cells, reach, far_out)]
    (starts, order, ordered, crowd), (rows, bucketed, elsewhere, largest) = (
        run_parts(_call, builds) if n + m >= _MIN_THREADED else [_call(*build) for build in builds])
    if crowd > _CROWD * max(1, have // 2):
        raise _Crowded(f"the targets crowd {crowd} into one grid cell (clustered or repeated points): "
                       "a tree answers them faster")
    index = np.full((n, have), -1, dtype=np.int64)  # the rows not walked: the tree's, and those with
    best = np.full((n, have), np.inf)  # no neighbour within the bound
    count = rows.shape[0]
    scale = max(-float(low.min()), float(high.max()), largest, 1e-300)
    threads = 1 if count < _MIN_THREADED_K else cpu_threads()
    edges = np.linspace(0, count, threads + 1).astype(np.int64)
    parts = [(bucketed, rows, low, edge, inverse, cells, starts, order, ordered, scale * _SLACK, _MOST_CELLS,
              limit, m, index, best, int(edges[i]), int(edges[i + 1])) for i in range(threads)]
    unsettled = sum(run_parts(grid_k_query, parts))
    if unsettled:
        if unsettled * m > _BRUTE_PAIRS:
            raise BackendDeclined(f"{unsettled} sources lie far from every target: a tree answers them faster")
        _settle(s64, t64, limit, index, best)
    if elsewhere.size:
        index[elsewhere], best[elsewhere] = exact_search(np.ascontiguousarray(source[elsewhere]), target, k, bound)
    return index, best


def _settle(s64: np.ndarray, t64: np.ndarray, limit: float, index: np.ndarray, best: np.ndarray) -> None:
    """Settle the rows the walk left unsettled (``-2``) by comparing them with every target, in place."""
    left = np.flatnonzero(index[:, 0] == -2)
    found = np.empty((left.size, index.shape[1]), dtype=np.int64)
    squared = np.empty((left.size, index.shape[1]), dtype=np.float64)
    brute_k_rows(np.ascontiguousarray(s64[left]), t64, np.arange(left.size, dtype=np.int64), limit,
                          t64.shape[0], found, squared)
    missing = found >= t64.shape[0]  # places no target within the bound filled
    found[missing] = -1
    squared[missing] = np.inf
    index[left] = found
    best[left] = squared


def k_nearest(source: np.ndarray, target: np.ndarray, k: int,
              max_distance: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each source's ``k`` nearest targets within ``max_distance``, exactly, lowest index among equals.

    :param source: float32 ``(N, D)`` C-contiguous, finite, ``D <= 3`` (as the core hands a plugin).
    :param target: float32 ``(M, D)``, likewise; ``M`` may be below ``k`` or 0.
    :param k: neighbours per source, at least 1.
    :param max_distance: neighbours whose float32 distance exceeds it are ``-1``/``inf``; it also
        prunes the search.
    :returns: int64 ``(N, k)`` and float32 ``(N, k)``, nearest first: the NumPy floor's answer.
    :raises BackendDeclined: more than 3 coordinates, crowded targets, or too many sources far
        from every target (the floor answers those).
    """
    if source.shape[1] > DIMENSIONS:
        raise BackendDeclined(f"the grid takes at most {DIMENSIONS} coordinates, not {source.shape[1]}")
    n, m = source.shape[0], target.shape[0]
    if n == 0 or m == 0:
        return finish(np.full((n, 0), -1, np.int64), np.zeros((n, 0)), k, max_distance)
    bound = padded_bound(max_distance)
    try:
        # Straight to the grid: looking for repeated points first would cost two sorts a call.
        index, squared = grid_k_nearest(source, target, k, bound)
    except _Crowded:
        pass
    else:
        return _finish(index, squared, k, max_distance)

    def search(points: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        try:
            return grid_k_nearest(points, targets, k, bound)
        except _Crowded:
            if points.shape[0] * targets.shape[0] > _SMALL_PAIRS:
                raise
            return exact_search(points, targets, k, bound)  # a few pairs: compared outright

    return search_distinct(search, source, target, k, max_distance)


def _finish(index: np.ndarray, squared: np.ndarray, k: int,
            max_distance: float | None) -> tuple[np.ndarray, np.ndarray]:
    """The floor's :func:`~spacr_accel_core.toolkit.finish`, bit for bit, in one compiled pass
    (:func:`finish_places`); the places past ``index``'s columns (fewer targets
    than ``k``) are ``-1``/``inf``."""
    rows, have = index.shape
    limit = np.inf if max_distance is None else float(max_distance)
    out_index = np.empty((rows, have), dtype=np.int64)
    out_found = np.empty((rows, have), dtype=np.float32)
    finish_places(np.ascontiguousarray(index).ravel(), np.ascontiguousarray(squared).ravel(), limit,
                            out_index.ravel(), out_found.ravel())
    if have == k:
        return out_index, out_found
    wide_index = np.full((rows, k), -1, dtype=np.int64)
    wide_found = np.full((rows, k), np.inf, dtype=np.float32)
    wide_index[:, :have] = out_index
    wide_found[:, :have] = out_found
    return wide_index, wide_found


def warm_knearest() -> object:
    """Compile (or load) the kernels on inputs of exactly the driver's types: for a warm-up."""
    points = np.arange(12, dtype=np.float32).reshape(4, 3)
    wide = points.astype(np.float64)
    found = np.empty((4, 2), dtype=np.int64)
    # The brute force of sources the walk leaves unsettled runs rarely: compiled here, not then.
    brute_k_rows(wide, wide, np.arange(4, dtype=np.int64), np.inf, 4, found, np.empty((4, 2)))
    return k_nearest(points, points[::-1].copy(), 2, 5.0)


# ---- Hamming: the driver ---------------------------------------------------------------------------

_MIN_THREADED_PAIRS = 1 << 20  # pairs below which one thread answers


def _words(rows: np.ndarray) -> np.ndarray:
    """``rows`` (uint8) as read-only uint64 words, zero-padded to a multiple of 8 bytes (zeros never
    differ). Read-only always: numba compiles a read-only array as another type, and the core hands
    plugins read-only views, so the kernel is compiled (and warmed) for that one type."""
    width = rows.shape[1]
    padded_width = -(-width // 8) * 8
    if padded_width == width and rows.flags.c_contiguous:
        words = rows.view(np.uint64)
    else:
        padded = np.zeros((rows.shape[0], max(8, padded_width)), dtype=np.uint8)
        padded[:, :width] = rows
        words = padded.view(np.uint64)
    words = words.view()
    words.flags.writeable = False
    return words


def hamming_nearest(source: np.ndarray, target: np.ndarray, k: int,
                    max_distance: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each descriptor's ``k`` nearest by differing bits, lowest index among equals.

    :param source: uint8 ``(N, B)`` rows of packed bits.
    :param target: uint8 ``(M, B)``; ``M`` may be below ``k`` or 0.
    :param k: neighbours per source, at least 1 (2 for the ratio test).
    :param max_distance: neighbours with more differing bits are ``-1``/``inf``.
    :returns: int64 ``(N, k)`` and float32 ``(N, k)`` exact counts: the NumPy floor's answer.
    """
    n, m = source.shape[0], target.shape[0]
    have = min(k, m)
    if n == 0 or m == 0:
        return finish(np.full((n, 0), -1, np.int64), np.zeros((n, 0)), k, max_distance)
    bits = 8 * source.shape[1]
    limit = bits if max_distance is None or math.isinf(max_distance) else min(bits, math.floor(max_distance))
    s = _words(source)
    columns = np.ascontiguousarray(_words(target).T)  # (W, M): a tile's words contiguous per position
    columns.flags.writeable = False
    found = np.empty((n, have), dtype=np.int64)
    counted = np.empty((n, have), dtype=np.int64)
    threads = 1 if n * m < _MIN_THREADED_PAIRS else min(cpu_threads(), n)
    edges = np.linspace(0, n, threads + 1).astype(np.int64)
    run_parts(hamming_rows, [(s, columns, limit, m, found, counted, int(edges[i]), int(edges[i + 1]))
                                        for i in range(threads)])
    missing = found >= m
    found[missing] = -1
    squared = np.square(counted.astype(np.float64))
    squared[missing] = np.inf
    return finish(found, squared, k, max_distance)


def warm_hamming() -> object:
    """Compile (or load) the kernel on inputs of exactly the driver's types: for a warm-up."""
    rows = np.arange(64, dtype=np.uint8).reshape(2, 32)
    return hamming_nearest(rows, rows, 1), hamming_nearest(rows[:, :5], rows[:, :5], 2, 3.0)
