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
gives ``|t|^2 - 2 s.t`` in float32, every target within a proven rounding bound of a row's best
is a candidate, and the candidates are settled exactly on the card in float64 (the contract's
sum of squared differences in coordinate order), lowest index among equals. Where float32
products are not IEEE (``CUPY_TF32=1``: inputs rounded to 10 bits) the search product runs in
float64 instead, and the margin always uses the unit roundoff the product really has.

Every loop is tiled from the memory free NOW, and a tile that runs out of memory is retried at
half its size, down to a floor, before the primitive gives up with ``BackendOutOfMemory``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from spacr_accel_core import BackendOutOfMemory

from ._kit import Kit, ieee_unit, is_out_of_memory

__all__ = ["matmul", "maximum_filter", "nearest", "tiled"]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_EXACT_IN_F32 = frozenset(
    np.dtype(t) for t in (np.float32, np.float16, np.bool_, np.int8, np.uint8, np.int16, np.uint16)
)
_FILTER_BYTES_PER_PIXEL = 4 * 6  # the tile, its filtered copy, the NaN mask and its filtered copy
_FLOOR_ROWS = 8


def tiled(total: int, tile: int, floor: int, step: Callable[[int, int], None], kit: Kit,
          what: str) -> None:
    """Run ``step(start, stop)`` over ``range(total)``, halving a tile that runs out of memory.

    The retry resumes at the tile that failed, so finished work is kept: a card another job fills
    half-way through a plate costs smaller tiles, not the plate.

    :param total: items to cover.
    :param tile: items per tile to start with.
    :param floor: the smallest tile worth trying; a failure at or below it gives up.
    :param step: does one tile.
    :param kit: the library (its cache is released before a retry).
    :param what: the operation, for the message.
    :raises BackendOutOfMemory: a tile of ``floor`` items still did not fit.
    """
    tile = max(1, tile)
    floor = max(1, min(floor, tile))
    start = 0
    while start < total:
        stop = min(total, start + tile)
        try:
            step(start, stop)
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            reason = f"{type(exc).__name__}: {exc}"
        else:
            start = stop
            continue
        # Outside the handler: the traceback, and the tile's arrays it holds, are gone.
        kit.release()
        if stop - start <= floor:
            raise BackendOutOfMemory(
                f"{kit.name} {what}: out of memory even for {stop - start} item(s) per pass: {reason}"
            )
        tile = max(floor, (stop - start) // 2)


# ---- maximum_filter ------------------------------------------------------------------------------


def _filter_tile(kit: Kit, tile: Any, size: int) -> Any:
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
    radius = size // 2
    out = np.empty((height, width), dtype=_F32)
    rows = max(1, kit.budget() // (_FILTER_BYTES_PER_PIXEL * width) - (size - 1))

    def step(start: int, stop: int) -> None:
        lo, hi = max(0, start - radius), min(height, stop + radius)
        filtered = _filter_tile(kit, kit.to_device(source[lo:hi]), size)
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
    exact = first.dtype in _EXACT_IN_F32 and second.dtype in _EXACT_IN_F32
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


def _pick(kit: Kit, local: Any, cols: Any, exact: Any, count: int) -> tuple[Any, Any]:
    """Per local row, the candidate with the smallest exact distance, then the lowest index.

    One lexicographic sort (row, distance, index); the first of each row wins. Every row has at
    least one candidate (its own best), so every row is written.
    """
    xp = kit.xp
    keys = xp.stack([cols.astype(xp.float64), exact, local.astype(xp.float64)])
    order = xp.lexsort(keys)
    local, cols, exact = local[order], cols[order], exact[order]
    first = xp.ones(local.shape[0], dtype=bool)
    first[1:] = local[1:] != local[:-1]
    index = xp.empty(count, dtype=xp.int64)
    best = xp.empty(count, dtype=xp.float64)
    index[local[first]] = cols[first]
    best[local[first]] = exact[first]
    return index, best


def _gemm_plan(kit: Kit, work: np.dtype) -> tuple[np.dtype, float]:
    """``(dtype, unit roundoff)`` for the search product: the margin must use the rounding the
    product REALLY has. Reduced float32 products (TF32, bfloat16) move to float64, which the card
    has and which keeps the candidates few (the product is D + 1 deep, so memory-bound: about twice
    the time); a float64 compute type someone reduced as well widens the margin instead."""
    if work == _F32 and kit.gemm_unit(_F32) > ieee_unit(_F32):
        work = _F64
    return work, max(ieee_unit(work), kit.gemm_unit(work))


def nearest(kit: Kit, source: np.ndarray, target: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest neighbours: int64 indices and float32 distances equal to the NumPy backend's.

    :param kit: the library to run on.
    :param source: ``(N, D)`` float32, C-contiguous, finite, N >= 1.
    :param target: ``(M, D)`` float32, C-contiguous, finite, M >= 1.
    :param chunk: at most this many source rows per pass.
    """
    xp = kit.xp
    n, m, dims = source.shape[0], target.shape[0], source.shape[1]
    s64 = source.astype(np.float64)
    t64 = target.astype(np.float64)
    # Centring shrinks |s| and |t|, and with them the rounding margin and the candidate count.
    centre = t64.mean(axis=0)
    s_centred = s64 - centre
    t_centred = t64 - centre
    t_norm2 = np.square(t_centred).sum(axis=1)
    # Coordinates whose float32 squares would overflow are searched in float64 (the card has it).
    largest = float(max(np.abs(s_centred).max(), np.abs(t_centred).max()))
    work = _F32 if largest < 2.0 ** 60 / np.sqrt(dims + 1) else _F64
    work, unit = _gemm_plan(kit, work)
    # One GEMM gives |t|^2 - 2 s.t directly: [-2 s, 1] . [t, |t|^2].
    left = np.empty((n, dims + 1), dtype=work)
    left[:, :dims] = -2.0 * s_centred
    left[:, dims] = 1.0
    right = np.empty((dims + 1, m), dtype=work)
    right[:dims] = t_centred.T
    right[dims] = t_norm2
    s_length = np.sqrt(np.square(s_centred).sum(axis=1))
    t_longest = float(np.sqrt(t_norm2.max()))
    # A proven bound on |rounded expansion - exact| for any pair of this row (rounding of the
    # centred coordinates, of |t|^2, of the dot product and of the sum), generously rounded up;
    # the smallest normal number per term covers underflow.
    margin = 2.0 * (2 * dims + 16) * unit * np.square(s_length + t_longest)
    margin += 8.0 * (dims + 2) * float(np.finfo(work).tiny)
    left_dev, right_dev = kit.to_device(left), kit.to_device(right)
    margin_dev = kit.to_device(margin.astype(work))
    s_dev, t_dev = kit.to_device(s64), kit.to_device(t64)
    index = xp.empty(n, dtype=xp.int64)
    best = xp.empty(n, dtype=xp.float64)
    rows = max(1, min(chunk, kit.budget() // max(1, m * (work.itemsize + 2))))

    def step(start: int, stop: int) -> None:
        approx = xp.matmul(left_dev[start:stop], right_dev)
        threshold = approx.min(axis=1) + margin_dev[start:stop]
        local, cols = xp.nonzero(approx <= threshold[:, None])
        del approx
        cols = cols.astype(xp.int64)
        # The verdict: the contract's float64 arithmetic, one rounding per operation, in order.
        exact = xp.square(s_dev[start + local, 0] - t_dev[cols, 0])
        for axis in range(1, dims):
            exact += xp.square(s_dev[start + local, axis] - t_dev[cols, axis])
        index[start:stop], best[start:stop] = _pick(kit, local, cols, exact, stop - start)

    tiled(n, rows, 1, step, kit, "nearest_neighbours")
    squared = kit.to_host(best)
    return np.asarray(kit.to_host(index), dtype=np.int64), np.sqrt(squared).astype(_F32)
