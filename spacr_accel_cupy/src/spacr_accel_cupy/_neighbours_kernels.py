"""The neighbours family against a :class:`~._kit.Kit` (CuPy on the card, NumPy in the tests): one
Euclidean neighbour, and what ``nearest_neighbours`` serves beyond it (the ``k`` nearest within a
distance, Hamming).

ONE NEIGHBOUR. The NumPy backend's matrix-product search, per chunk of source rows: one GEMM
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

EUCLIDEAN ``k``. The one-neighbour search asked for ``k`` places: one GEMM gives
``|t|^2 - 2 s.t`` per pass (:func:`spacr_accel_core.exact.expansion_plan`), every target within the
proven margin of a row's ``k``-th smallest rounded value is a candidate (the margin bounds twice the
rounding, so the true ``k`` nearest and every tie at the ``k``-th place are in), and the candidates
are ordered on the card by the contract's float64 sum, then the index. A pass whose rounding cannot
tell its targets apart (a tight cluster, copies of one point) is answered by the exact arithmetic
against every target instead. ``max_distance`` is applied on the card to the float32 distance,
before anything is copied back.

HAMMING. The bits unpacked to 0/1 make a count a product: ``|a| + |b| - 2 a.b``. One float32 GEMM of
``[2 a, -1]`` by ``[b, |b|]`` gives ``2 a.b - |b|`` for every pair, an integer of at most ``16 B``
in magnitude at every partial sum, so exact in float32 (and under TF32, whose inputs here are all
small integers, with float32 accumulation). The order (count, index) is the order of the unique
integer key ``(8 B - score) M + index``: the keys at or below a bound on the ``k``-th smallest (the
minima of column groups, as for the Euclidean search) are the candidates, sorted per row.

Every loop is tiled from the memory free NOW, and a tile that runs out of memory is retried at
half its size, down to a floor, before the primitive gives up with ``BackendOutOfMemory``
(:func:`._runtime.tiled`). Imported by the hook of :mod:`._neighbours` at its first call.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from spacr_accel_core import BackendDeclined
from spacr_accel_core.toolkit import (
    distances,
    distinct_rows,
    exact_squared,
    expansion_plan,
    pick_lowest,
)

from ._kit import Kit, ieee_unit
from ._runtime import tiled

__all__ = ["hamming", "k_nearest", "nearest", "nearest_neighbours"]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


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
cluster source) would otherwise make the verdict sort every pair of the pass. The ``k`` search
allows this many a row for each of its places, and answers by :func:`_brute_first_k`."""
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


# ---- the k nearest within a distance, and Hamming -----------------------------------------------

_SORTED_BRUTE_BYTES_PER_PAIR = 8 * 4  # the float64 sums, one coordinate's differences, the sort's indices


def nearest_neighbours(kit: Kit, source: np.ndarray, target: np.ndarray, chunk: int, k: int,
                       max_distance: float | None, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """The ``spacr_accel_nearest_neighbours`` answer: ``(N,)`` for ``k=1``, ``(N, k)`` otherwise."""
    if metric == "hamming":
        index, found = hamming(kit, source, target, chunk, k, max_distance)
    elif k == 1 and max_distance is None:
        return nearest(kit, source, target, chunk)
    else:
        index, found = k_nearest(kit, source, target, chunk, k, max_distance)
    return (index[:, 0], found[:, 0]) if k == 1 else (index, found)


def _first_k(xp: Any, local: Any, cols: Any, exact: Any, count: int, k: int) -> tuple[Any, Any]:
    """Per local row the first ``k`` candidates by (exact distance, index): ``(count, k)``, ``-1``/inf."""
    keys = xp.stack([cols.astype(xp.float64), exact, local.astype(xp.float64)])
    order = xp.lexsort(keys)
    local, cols, exact = local[order], cols[order], exact[order]
    starts = xp.searchsorted(local, xp.arange(count, dtype=local.dtype))
    rank = xp.arange(local.shape[0]) - starts[local]
    kept = rank < k
    index = xp.full((count, k), -1, dtype=xp.int64)
    best = xp.full((count, k), xp.inf, dtype=xp.float64)
    index[local[kept], rank[kept]] = cols[kept]
    best[local[kept], rank[kept]] = exact[kept]
    return index, best


_GROUPS_PER_PLACE = 8


def _kth_bound(xp: Any, approx: Any, have: int) -> Any:
    """Per row a value at least its ``have``-th smallest: every target of the ``have`` nearest is at
    or below it. The ``have``-th smallest of ANY ``have`` distinct entries is such a bound, so the
    row is cut into groups whose minima take one reduction pass, and the ``have``-th smallest of
    those few minima is taken (a partition of a whole million-column row would sort it on the card).
    """
    rows, m = approx.shape
    groups = _GROUPS_PER_PLACE * have
    if m < 4 * groups:
        return xp.partition(approx, have - 1, axis=1)[:, have - 1] if have < m else approx.max(axis=1)
    width = m // groups
    minima = approx[:, :groups * width].reshape(rows, groups, width).min(axis=2)
    return xp.partition(minima, have - 1, axis=1)[:, have - 1]


def _brute_first_k(xp: Any, s_dev: Any, t_dev: Any, k: int) -> tuple[Any, Any]:
    """Rows ``s_dev`` against every target by the contract's arithmetic: the first ``k``."""
    exact = exact_squared(s_dev[:, None, :], t_dev[None, :, :])
    # CuPy's sort is always stable and takes no other kind; NumPy's must be asked for it.
    order = xp.argsort(exact, axis=1, **({"kind": "stable"} if xp is np else {}))[:, :k]
    return order.astype(xp.int64), xp.take_along_axis(exact, order, axis=1)


def _store(xp: Any, index: Any, found: Any, rows: slice, chosen: Any, squared: Any,
           max_distance: float | None) -> None:
    """Write a pass's answer, as float32 distances, with neighbours beyond ``max_distance`` dropped."""
    with np.errstate(over="ignore"):  # beyond float32's range the distance IS inf
        near = xp.sqrt(squared).astype(xp.float32)
    missing = chosen < 0
    if max_distance is not None:
        missing |= near.astype(xp.float64) > max_distance
    have = chosen.shape[1]
    index[rows, :have] = xp.where(missing, -1, chosen)
    found[rows, :have] = xp.where(missing, xp.float32(np.inf), near)


def k_nearest(kit: Kit, source: np.ndarray, target: np.ndarray, chunk: int, k: int,
              max_distance: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Each source's ``k`` nearest targets within ``max_distance``: ``(N, k)`` int64 and float32.

    :param source: ``(N, D)`` float32, C-contiguous, finite, N >= 1.
    :param target: ``(M, D)`` float32, C-contiguous, finite, M >= 1.
    """
    xp = kit.xp
    n, m = source.shape[0], target.shape[0]
    have = min(k, m)
    work, unit = _gemm_plan(kit, _F32)
    plan = expansion_plan(source, target, work, unit)
    left, right, margin = kit.to_device(plan.left), kit.to_device(plan.right), kit.to_device(plan.margin)
    s_dev, t_dev = kit.to_device(source.astype(np.float64)), kit.to_device(target.astype(np.float64))
    index = xp.full((n, k), -1, dtype=xp.int64)
    found = xp.full((n, k), xp.inf, dtype=xp.float32)
    rows = max(1, min(chunk, kit.budget() // max(1, m * (work.itemsize + 2 + 8))))

    def step(start: int, stop: int) -> None:
        approx = xp.matmul(left[start:stop], right)
        nominated = approx <= (_kth_bound(xp, approx, have) + margin[start:stop])[:, None]
        del approx
        if int(xp.count_nonzero(nominated)) > _CANDIDATES_PER_ROW * have * (stop - start) + _CANDIDATE_ALLOWANCE:
            del nominated
            brute_rows = max(1, kit.budget() // (m * _SORTED_BRUTE_BYTES_PER_PAIR))
            for lo in range(start, stop, brute_rows):
                hi = min(stop, lo + brute_rows)
                chosen, squared = _brute_first_k(xp, s_dev[lo:hi], t_dev, have)
                _store(xp, index, found, slice(lo, hi), chosen, squared, max_distance)
            return
        local, cols = xp.nonzero(nominated)
        del nominated
        cols = cols.astype(xp.int64)
        exact = exact_squared(s_dev, t_dev, start + local, cols)
        chosen, squared = _first_k(xp, local.astype(xp.int64), cols, exact, stop - start, have)
        _store(xp, index, found, slice(start, stop), chosen, squared, max_distance)

    with kit.ieee():
        tiled(n, rows, 1, step, kit, "nearest_neighbours")
    return np.asarray(kit.to_host(index), dtype=np.int64), np.asarray(kit.to_host(found), dtype=_F32)


def _bits(xp: Any, rows: Any) -> Any:
    """uint8 rows of packed bits as rows of 0/1 (CuPy's ``unpackbits`` takes no axis: the rows are
    unpacked flat, which in C order is row after row)."""
    return xp.unpackbits(xp.ascontiguousarray(rows).ravel()).reshape(rows.shape[0], -1)


def _unpacked(xp: Any, bits: Any, left: bool) -> Any:
    """``[2 a, -1]`` (``left``) or ``[b, |b|]`` transposed, float32, from uint8 rows of packed bits."""
    ones = _bits(xp, bits).astype(xp.float32)
    if left:
        return xp.concatenate([ones * 2, xp.full((ones.shape[0], 1), -1, dtype=xp.float32)], axis=1)
    return xp.ascontiguousarray(xp.concatenate([ones, ones.sum(axis=1, keepdims=True)], axis=1).T)


def hamming(kit: Kit, source: np.ndarray, target: np.ndarray, chunk: int, k: int,
            max_distance: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Each descriptor's ``k`` nearest by differing bits, exactly, lowest index among equals.

    :param source: uint8 ``(N, B)`` rows of packed bits, N >= 1.
    :param target: uint8 ``(M, B)``, M >= 1.
    :returns: int64 and float32 ``(N, k)`` (exact integer counts), nearest first.
    :raises BackendDeclined: descriptors so wide that a partial sum outgrows float32's integers.
    """
    xp = kit.xp
    n, width = source.shape
    m = target.shape[0]
    if 16 * width >= 1 << 24:
        raise BackendDeclined(f"descriptors of {width} bytes: counts beyond float32's exact integers")
    have = min(k, m)
    s_bits, t_bits = kit.to_device(source), kit.to_device(target)
    left, right = _unpacked(xp, s_bits, True), _unpacked(xp, t_bits, False)
    s_count = _bits(xp, s_bits).sum(axis=1, dtype=xp.int64)
    columns = xp.arange(m, dtype=xp.int64)
    limit = None if max_distance is None or max_distance >= 8 * width else math.floor(max_distance)
    index = xp.full((n, k), -1, dtype=xp.int64)
    found = xp.full((n, k), xp.inf, dtype=xp.float32)
    rows = max(1, min(chunk, kit.budget() // max(1, m * (4 + 8 + 8))))
    offset = 8 * width

    def step(start: int, stop: int) -> None:
        score = xp.matmul(left[start:stop], right)
        key = (offset - score).astype(xp.int64) * m + columns[None, :]
        del score
        local, cols = xp.nonzero(key <= _kth_bound(xp, key, have)[:, None])
        local, cols = local.astype(xp.int64), cols.astype(xp.int64)
        # Unique keys below 2**53: exact in float64, so (row, key) order is (count, index) order.
        chosen, first = _first_k(xp, local, cols, key[local, cols].astype(xp.float64), stop - start, have)
        del key
        count = s_count[start:stop, None] + (first.astype(xp.int64) // m - offset)
        if limit is not None:
            chosen = xp.where(count > limit, -1, chosen)
        index[start:stop, :have] = chosen
        found[start:stop, :have] = xp.where(chosen < 0, xp.float32(np.inf), count.astype(xp.float32))

    with kit.ieee():
        tiled(n, rows, min(rows, 16), step, kit, "nearest_neighbours")
    return np.asarray(kit.to_host(index), dtype=np.int64), np.asarray(kit.to_host(found), dtype=_F32)
