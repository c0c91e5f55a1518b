"""The three primitives against a :class:`~._kit.Kit`: CuPy on the card, NumPy in the tests.

maximum_filter: ``cupyx.scipy.ndimage.maximum_filter(mode="nearest")`` on tiles of rows with a
halo. The maximum is exact, so the result equals scipy's (and the NumPy backend's) bit for bit.
The NaN rule is enforced, not hoped for: NaNs are replaced by ``-inf`` before filtering (so no
implementation's handling of an unordered value can disturb a window without one), and a filtered
NaN mask writes NaN back wherever a window held one.

matmul: float32 where float32 holds the inputs exactly (like the NumPy backend), float64 on the
card otherwise (every CUDA device takes doubles), rounded once; tiled over the rows of ``first``.
Run with CuPy's default (IEEE) compute type even where ``CUPY_TF32=1`` made float32 products TF32.

nearest_neighbours: the NumPy backend's matrix-product search, per chunk of source rows: one GEMM
gives ``|t|^2 - 2 s.t`` in float32 (:func:`spacr_accel_core.exact.expansion_plan`: scaled by a
power of two, so float32 is safe at any magnitude), every target within a proven rounding bound of
a row's best is a candidate, and the candidates are settled exactly on the card in float64
(:func:`~spacr_accel_core.exact.exact_squared` and :func:`~spacr_accel_core.exact.pick_lowest` on
CuPy arrays), lowest index among equals. Identical points are searched once (their lowest-indexed
copy), and a pass whose rounding cannot tell its targets apart (more than a few dozen candidates a
row: a tight cluster beside far outliers) is answered by the exact arithmetic against every target
instead. Where float32 products are not IEEE (``CUPY_TF32=1``: inputs rounded to 10 bits) the
search product runs in float64 instead, and the margin always uses the unit roundoff the product
really has.

Every loop is tiled from the memory free NOW, and a tile that runs out of memory is retried at
half its size, down to a floor, before the primitive gives up with ``BackendOutOfMemory``
(:func:`spacr_accel_core.tiling.tiled`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from spacr_accel_core.toolkit import (
    EXACT_IN_FLOAT32,
    distances,
    distinct_rows,
    exact_squared,
    expansion_plan,
    pick_lowest,
)
from spacr_accel_core.toolkit import tiled as run_tiles

from ._kit import Kit, ieee_unit, is_out_of_memory

__all__ = ["matmul", "maximum_filter", "nearest", "tiled"]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_FILTER_BYTES_PER_PIXEL = 4 * 6  # the tile, its filtered copy, the NaN mask and its filtered copy
_FLOOR_ROWS = 8


def tiled(total: int, tile: int, floor: int, step: Callable[[int, int], None], kit: Kit,
          what: str) -> None:
    """:func:`spacr_accel_core.tiling.tiled` with CuPy's out-of-memory test and ``kit``'s cache.

    :param total: items to cover.
    :param tile: items per tile to start with.
    :param floor: the smallest tile worth trying; a failure at or below it gives up.
    :param step: does one tile.
    :param kit: the library (its cache is released before a retry).
    :param what: the operation, for the message.
    :raises BackendOutOfMemory: a tile of ``floor`` items still did not fit.
    """
    run_tiles(total, tile, floor, step, is_out_of_memory=is_out_of_memory, release=kit.release,
              label=f"{kit.name} {what}")


# ---- maximum_filter ------------------------------------------------------------------------------


def _filter_tile(kit: Kit, tile: Any, size: int | tuple[int, ...]) -> Any:
    xp, ndimage = kit.xp, kit.ndimage
    nan = xp.isnan(tile)
    if not bool(nan.any()):
        return ndimage.maximum_filter(tile, size=size, mode="nearest")
    result = ndimage.maximum_filter(xp.where(nan, xp.float32(-np.inf), tile), size=size, mode="nearest")
    seen = ndimage.maximum_filter(nan.astype(xp.uint8), size=size, mode="nearest")
    return xp.where(seen.astype(bool), xp.float32(np.nan), result)


def maximum_filter(kit: Kit, field: np.ndarray, size: int) -> np.ndarray:
    """The ``size`` x ``size`` window maximum of a 2-D float32 field, edges repeated, NaN winning.

    :param kit: the library to run on.
    :param field: non-empty 2-D float32 (never modified).
    :param size: odd window edge, at least 3.
    :returns: a new float32 array of the field's shape.
    """
    source = np.ascontiguousarray(field, dtype=_F32)
    height, width = source.shape
    # Each axis's window capped by that axis's own length: past a radius of n - 1 it already holds
    # the whole axis from anywhere (border repeated), so the answer is the same and a thin field
    # under a huge window neither shrinks its tiles to the halo nor scans the window's width.
    radius = min(size // 2, height - 1)
    sizes = (2 * radius + 1, 2 * min(size // 2, width - 1) + 1)
    out = np.empty((height, width), dtype=_F32)
    rows = max(1, kit.budget() // (_FILTER_BYTES_PER_PIXEL * width) - (sizes[0] - 1))

    def step(start: int, stop: int) -> None:
        lo, hi = max(0, start - radius), min(height, stop + radius)
        filtered = _filter_tile(kit, kit.to_device(source[lo:hi]), sizes)
        out[start:stop] = kit.to_host(filtered[start - lo:stop - lo])

    tiled(height, rows, _FLOOR_ROWS, step, kit, "maximum_filter")
    return out


# ---- matmul --------------------------------------------------------------------------------------


def matmul(kit: Kit, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """``first @ second`` with NumPy's shape rules, as float32, tiled over the rows of ``first``.

    :param kit: the library to run on.
    :param first: non-empty real array, at least 1-D.
    :param second: the same, shape-compatible.
    :returns: the float32 product (0-d for two vectors).
    """
    with kit.ieee():
        return _matmul(kit, first, second)


def _matmul(kit: Kit, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    xp = kit.xp
    exact = first.dtype in EXACT_IN_FLOAT32 and second.dtype in EXACT_IN_FLOAT32
    dtype = _F32 if exact else _F64
    left = np.ascontiguousarray(first, dtype=dtype)
    right = kit.to_device(np.ascontiguousarray(second, dtype=dtype))
    if left.ndim == 1:
        product = xp.matmul(kit.to_device(left), right).astype(xp.float32)
        return np.asarray(kit.to_host(product), dtype=_F32)
    batch = np.broadcast_shapes(left.shape[:-2], second.shape[:-2])
    matrix_right = second.ndim >= 2
    shape = (*batch, left.shape[-2], second.shape[-1]) if matrix_right else (*batch, left.shape[-2])
    out = np.empty(shape, dtype=_F32)
    rows = left.shape[-2]
    per_row = (left.shape[-1] + 2 * (second.shape[-1] if matrix_right else 1)) * dtype.itemsize
    per_row *= max(1, int(np.prod(batch)))
    tile = max(1, kit.budget() // max(1, per_row))

    def step(start: int, stop: int) -> None:
        part = kit.to_device(np.ascontiguousarray(left[..., start:stop, :]))
        product = kit.to_host(xp.matmul(part, right).astype(xp.float32))
        if matrix_right:
            out[..., start:stop, :] = product
        else:
            out[..., start:stop] = product

    tiled(rows, tile, 1, step, kit, "matmul")
    return out


# ---- nearest_neighbours --------------------------------------------------------------------------


def _gemm_plan(kit: Kit, work: np.dtype) -> tuple[np.dtype, float]:
    """``(dtype, unit roundoff)`` for the search product: the margin must use the rounding the
    product REALLY has. Reduced float32 products (TF32, bfloat16) move to float64, which the card
    has and which keeps the candidates few (the product is D + 1 deep, so memory-bound: about twice
    the time); a float64 compute type someone reduced as well widens the margin instead."""
    if work == _F32 and kit.gemm_unit(_F32) > ieee_unit(_F32):
        work = _F64
    return work, max(ieee_unit(work), kit.gemm_unit(work))


_CANDIDATES_PER_ROW = 32
"""A pass nominating more than this many targets a row on average (plus :data:`_CANDIDATE_ALLOWANCE`)
is answered by an exact brute force instead (:func:`_brute`): points the expansion's rounding
cannot tell apart (a tight cluster beside far outliers: every cluster point a candidate of every
cluster source) would otherwise make the verdict sort every pair of the pass."""
_CANDIDATE_ALLOWANCE = 4096
_BRUTE_BYTES_PER_PAIR = 8 * 3  # the float64 sums, one coordinate's squared differences, the tie mask


def nearest(kit: Kit, source: np.ndarray, target: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest neighbours: int64 indices and float32 distances equal to the NumPy backend's.

    Identical targets are searched once, as their lowest-indexed copy, and identical sources once
    (:func:`~spacr_accel_core.exact.distinct_rows`, one host sort): every copy is otherwise a tie the
    verdict must settle, 30,000 x 30,000 equal distances for 30,000 copies of one centroid.

    :param kit: the library to run on.
    :param source: ``(N, D)`` float32, C-contiguous, finite, N >= 1.
    :param target: ``(M, D)`` float32, C-contiguous, finite, M >= 1.
    :param chunk: at most this many source rows per pass.
    """
    targets = distinct_rows(target)
    sources = distinct_rows(source)
    if sources is not None:
        source = np.ascontiguousarray(source[sources[0]])
    if targets is None:
        index, squared = _search(kit, source, target, chunk)
    else:
        found, squared = _search(kit, source, np.ascontiguousarray(target[targets[0]]), chunk)
        index = targets[0][found]
    if sources is not None:
        index, squared = index[sources[1]], squared[sources[1]]
    return index, distances(squared)


def _brute(kit: Kit, s_dev: Any, t_dev: Any, start: int, stop: int, index: Any, best: Any) -> None:
    """Rows ``start:stop`` by the contract's arithmetic against every target, on the card, in
    sub-passes the budget holds: the smallest exact sum, then the lowest index among equals."""
    xp = kit.xp
    m = t_dev.shape[0]
    rows = max(1, kit.budget() // (m * _BRUTE_BYTES_PER_PAIR))
    columns = xp.arange(m, dtype=xp.int64)
    for lo in range(start, stop, rows):
        hi = min(stop, lo + rows)
        exact = exact_squared(s_dev[lo:hi, None, :], t_dev[None, :, :])
        least = exact.min(axis=1)
        # The lowest column among the equal minima, by an integer minimum (no reliance on which
        # of several equal values a library's argmin reports).
        index[lo:hi] = xp.where(exact == least[:, None], columns[None, :], m).min(axis=1)
        best[lo:hi] = least


def _search(kit: Kit, source: np.ndarray, target: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """``(indices, exact float64 squared distances)`` on the host, for distinct-or-not points."""
    xp = kit.xp
    n, m = source.shape[0], target.shape[0]
    work, unit = _gemm_plan(kit, _F32)
    plan = expansion_plan(source, target, work, unit)
    left_dev, right_dev = kit.to_device(plan.left), kit.to_device(plan.right)
    margin_dev = kit.to_device(plan.margin)
    s_dev, t_dev = kit.to_device(source.astype(np.float64)), kit.to_device(target.astype(np.float64))
    index = xp.empty(n, dtype=xp.int64)
    best = xp.empty(n, dtype=xp.float64)
    rows = max(1, min(chunk, kit.budget() // max(1, m * (work.itemsize + 2))))

    def step(start: int, stop: int) -> None:
        approx = xp.matmul(left_dev[start:stop], right_dev)
        threshold = approx.min(axis=1) + margin_dev[start:stop]
        nominated = approx <= threshold[:, None]
        del approx
        if int(xp.count_nonzero(nominated)) > _CANDIDATES_PER_ROW * (stop - start) + _CANDIDATE_ALLOWANCE:
            del nominated
            _brute(kit, s_dev, t_dev, start, stop, index, best)
            return
        local, cols = xp.nonzero(nominated)
        del nominated
        cols = cols.astype(xp.int64)
        # The verdict, on the card: the contract's float64 arithmetic, then its tie rule.
        exact = exact_squared(s_dev, t_dev, start + local, cols)
        index[start:stop], best[start:stop] = pick_lowest(local, cols, exact, stop - start, xp=xp)

    tiled(n, rows, 1, step, kit, "nearest_neighbours")
    return np.asarray(kit.to_host(index), dtype=np.int64), np.asarray(kit.to_host(best), dtype=np.float64)
