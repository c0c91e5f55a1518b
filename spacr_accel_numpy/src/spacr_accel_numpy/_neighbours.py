"""The neighbours family on the floor: exact nearest neighbours, lowest index on ties, in bounded
memory; the ``k`` nearest within a distance (the toolkit's search); and the exact Hamming search
of binary descriptors by word popcount.

WHY TWO METHODS. For the 2-D and 3-D centroids spaCR matches, a KD-tree answers 100,000 x 100,000
in about a quarter of a second where a chunked broadcast needs minutes and 9 GiB. At 16
coordinates and more a KD-tree degrades to a slow brute force, and a float32 matrix product (the
``|t|^2 - 2 s.t`` expansion, one BLAS call per chunk) is an order of magnitude faster.

WHY A RE-CHECK. Neither method alone gives the contract's answer. The KD-tree returns *a* nearest
point, not the lowest index among equals; the float32 expansion rounds, and picks the wrong
neighbour hundreds of times in 100,000. So both only nominate candidates with a proven error
margin, and the winner is chosen by :func:`~spacr_accel_core.exact.exact_squared`, the reference
arithmetic every backend shares: the float64 sum, coordinate by coordinate in order, of squared
differences (:mod:`spacr_accel_core.exact` holds it, the tie rule and the matrix product's plan).

HAMMING, BY BRUTE FORCE. A bit count between two descriptors is a handful of instructions, and
binary descriptors have no geometry a tree can use; every matcher spaCR's registration compares with
(OpenCV's ``BFMatcher``, faiss's ``IndexBinaryFlat``) compares every pair too. The counts are exact
small integers, so there is nothing to settle afterwards: the order is (count, index).

WHY WORDS. The rows are read as 64-bit words where their width allows (32 bytes: four words), so one
XOR and one population count (``np.bitwise_count``, NumPy 2) cover 64 bits; the counts are summed
word by word into a ``(rows, M)`` block held in a few MiB, whatever the sizes. Without
``np.bitwise_count`` (NumPy 1) the bytes are counted through a 256-entry table.
"""

from __future__ import annotations

import math

import numpy as np

from spacr_accel_core import hookimpl
from spacr_accel_core.toolkit import (
    cpu_threads,
    distances,
    distinct_rows,
    exact_squared,
    expansion_plan,
    finish,
    first_k,
    k_nearest,
    pick_lowest,
    pick_lowest_dense,
)

WIDE = 16
"""From this many coordinates on, the matrix product beats the KD-tree."""

_BRUTE_PAIRS = 1 << 16  # below this many pairs, exact brute force is the fastest thing
_BLOCK_BYTES = 48 << 20  # working set of one pass of the matrix product or the brute force
_F32_UNIT = float(np.finfo(np.float32).eps) / 2  # unit roundoff of NumPy's (IEEE) float32 GEMM
_MAX_CANDIDATES = 1 << 21  # candidate pairs one block of the matrix path may re-check exactly
_KD_SLACK = 1e-9  # relative; float64 KD-tree distances differ from the reference by ~D * 1e-16


def _brute(source: np.ndarray, target: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    s64 = source.astype(np.float64)
    t64 = target.astype(np.float64)
    n, m = source.shape[0], target.shape[0]
    rows = max(1, min(chunk, _BLOCK_BYTES // (16 * m)))
    index = np.empty(n, dtype=np.int64)
    best = np.empty(n, dtype=np.float64)
    for start in range(0, n, rows):
        block = exact_squared(s64[start:start + rows, None, :], t64[None, :, :])
        index[start:start + rows], best[start:start + rows] = pick_lowest_dense(block)
    return index, best


def _kdtree(source: np.ndarray, target: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    from scipy.spatial import cKDTree  # heavy: imported on first use, never at import time

    s64 = source.astype(np.float64)
    t64 = target.astype(np.float64)
    n, m = source.shape[0], target.shape[0]
    # An unbalanced tree builds in a third of the time and queries as fast on cell centroids.
    tree = cKDTree(t64, balanced_tree=False, compact_nodes=False)
    if m == 1:
        index = np.zeros(n, dtype=np.int64)
        return index, exact_squared(s64, t64[index])
    found, nominee = tree.query(s64, k=2, workers=cpu_threads())
    nearest = nominee[:, 0].astype(np.int64)
    # A second point within rounding of the first may be the true (or lower-indexed) winner.
    ambiguous = np.flatnonzero(found[:, 1] <= found[:, 0] * (1 + _KD_SLACK))
    if ambiguous.size:
        nearest[ambiguous] = _kd_ties(tree, s64[ambiguous], t64, found[ambiguous, 0], chunk)
    return nearest, exact_squared(s64, t64[nearest])


def _kd_ties(tree: object, s64: np.ndarray, t64: np.ndarray, closest: np.ndarray, chunk: int) -> np.ndarray:
    """Resolve rows whose two nearest are within rounding: gather every point that close."""
    m = t64.shape[0]
    result = np.empty(s64.shape[0], dtype=np.int64)
    limit = closest * (1 + _KD_SLACK)
    pending = np.arange(s64.shape[0])
    k = 4
    while pending.size:
        k = min(k, m)
        rows_per_pass = max(1, min(chunk, (1 << 22) // k))
        unresolved = []
        for start in range(0, pending.size, rows_per_pass):
            part = pending[start:start + rows_per_pass]
            distance, column = tree.query(s64[part], k=k, workers=cpu_threads())  # type: ignore[attr-defined]  # cKDTree
            within = distance <= limit[part, None]
            if k < m:
                more = within[:, -1]  # the k-th is still a tie: there may be more beyond it
                unresolved.append(part[more])
                keep = ~more
                part, within, column = part[keep], within[keep], column[keep]
            local, cols = np.nonzero(within)
            cols = column[local, cols].astype(np.int64)
            exact = exact_squared(s64[part[local]], t64[cols])
            chosen, _ = pick_lowest(local, cols, exact, part.size)
            result[part] = chosen
        pending = np.concatenate(unresolved) if unresolved else np.empty(0, dtype=np.int64)
        k *= 4
    return result


def _matrix(source: np.ndarray, target: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    n, m = source.shape[0], target.shape[0]
    s64 = source.astype(np.float64)
    t64 = target.astype(np.float64)
    plan = expansion_plan(source, target, np.float32, _F32_UNIT)
    rows = max(1, min(chunk, _BLOCK_BYTES // (5 * m)))
    index = np.empty(n, dtype=np.int64)
    best = np.empty(n, dtype=np.float64)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        approx = plan.left[start:stop] @ plan.right
        threshold = approx.min(axis=1) + plan.margin[start:stop]
        flat = np.flatnonzero(approx <= threshold[:, None])
        if flat.size > _MAX_CANDIDATES:
            # Points float32 cannot tell apart (a tight cluster beside a far outlier): the
            # re-check would hold every pair, so answer this block by exact brute force instead.
            index[start:stop], best[start:stop] = _brute(source[start:stop], target, chunk)
            continue
        # The flat form: NumPy's 2-D nonzero is ~20x slower than flatnonzero on a block this shape
        # (measured 46 ms against 2 ms on 500 x 20,000), and it was half the D=64 search's time.
        local, cols = np.divmod(flat, m)
        exact = exact_squared(s64, t64, start + local, cols)
        index[start:stop], best[start:stop] = pick_lowest(local, cols, exact, stop - start)
    return index, best


def _search(source: np.ndarray, target: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    n, m, d = source.shape[0], target.shape[0], source.shape[1]
    if n * m <= _BRUTE_PAIRS:
        return _brute(source, target, chunk)
    if d < WIDE:
        return _kdtree(source, target, chunk)
    return _matrix(source, target, chunk)


def nearest(source: np.ndarray, target: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest neighbours (see the module docstring): int64 indices, float32 distances.

    Identical targets are searched once, as their lowest-indexed copy
    (:func:`~spacr_accel_core.exact.distinct_rows`): 30,000 copies of one centroid took 92 s as
    30,000 x 30,000 ties and take milliseconds as one point. Identical sources are searched once
    too (they have one answer).
    """
    small = source.shape[0] * target.shape[0] <= _BRUTE_PAIRS  # brute force: ties cost nothing extra
    targets = None if small else distinct_rows(target)
    sources = None if small else distinct_rows(source)
    if sources is not None:
        source = source[sources[0]]
    if targets is None:
        index, squared = _search(source, target, chunk)
    else:
        found, squared = _search(source, target[targets[0]], chunk)
        index = targets[0][found]
    if sources is not None:
        index, squared = index[sources[1]], squared[sources[1]]
    return index, distances(squared)


# ---- Hamming --------------------------------------------------------------------------------------

_HAMMING_BLOCK_BYTES = 16 << 20  # one block's counts and XOR scratch: stays in the shared cache's reach
_TABLE = np.array([bin(value).count("1") for value in range(256)], dtype=np.uint8)
"""Bits set in each byte: the population count where NumPy has no ``bitwise_count``."""


def _words(rows: np.ndarray) -> np.ndarray:
    """``rows`` as the widest unsigned words its width divides (uint64, uint32, uint16 or bytes)."""
    data = np.ascontiguousarray(rows)
    width = data.shape[1]
    if not hasattr(np, "bitwise_count"):
        return data
    for dtype in (np.uint64, np.uint32, np.uint16):
        size = np.dtype(dtype).itemsize
        if width % size == 0 and width > 0:
            return data.view(dtype)
    return data


def counts(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The differing bits of every pair of ``source`` (a small block) and ``target``: ``(n, M)`` int32.

    :param source: uint8 ``(n, B)``.
    :param target: uint8 ``(M, B)``.
    """
    s, t = _words(source), _words(target)
    n, m = s.shape[0], t.shape[0]
    total = np.zeros((n, m), dtype=np.int32)
    if s.shape[1] == 0:
        return total
    scratch = np.empty((n, m), dtype=s.dtype)
    counted = np.empty((n, m), dtype=np.uint8)
    columns = np.ascontiguousarray(t.T)  # one contiguous row of words per position
    for word in range(s.shape[1]):
        np.bitwise_xor(s[:, word, None], columns[word][None, :], out=scratch)
        if hasattr(np, "bitwise_count"):
            np.bitwise_count(scratch, out=counted)
        else:
            np.take(_TABLE, scratch, out=counted)
        total += counted
    return total


def hamming_nearest(source: np.ndarray, target: np.ndarray, k: int, max_distance: float | None = None,
                    chunk: int = 1 << 16) -> tuple[np.ndarray, np.ndarray]:
    """Each descriptor's ``k`` nearest by differing bits, exactly, lowest index among equals.

    :param source: uint8 ``(N, B)`` rows of packed bits.
    :param target: uint8 ``(M, B)``; ``M`` may be below ``k`` or 0.
    :param k: neighbours per source, at least 1 (2 for the ratio test).
    :param max_distance: neighbours with more differing bits are ``-1``/``inf``.
    :param chunk: most sources per block (the block is also capped by :data:`_HAMMING_BLOCK_BYTES`).
    :returns: int64 ``(N, k)`` and float32 ``(N, k)`` (exact integer counts), nearest first.
    """
    n, m = source.shape[0], target.shape[0]
    have = min(k, m)
    index = np.full((n, have), -1, dtype=np.int64)
    squared = np.empty((n, have), dtype=np.float64)
    if n and m:
        rows = max(1, min(int(chunk), _HAMMING_BLOCK_BYTES // (16 * m)))
        for start in range(0, n, rows):
            block = counts(source[start:start + rows], target)
            # k = 1: argmin's first minimum is the lowest index; otherwise the partition of first_k.
            chosen = np.argmin(block, axis=1)[:, None] if have == 1 else first_k(block, have)
            index[start:start + rows] = chosen
            squared[start:start + rows] = np.take_along_axis(block, chosen, axis=1)
    # finish() takes squared distances: the counts squared are exact in float64, and its square
    # root gives the count back exactly.
    np.square(squared, out=squared)
    limit = None if max_distance is None or math.isinf(max_distance) else max_distance
    return finish(index, squared, k, limit)


# ---- the family's hook ----------------------------------------------------------------------------


@hookimpl
def spacr_accel_nearest_neighbours(source: np.ndarray, target: np.ndarray, chunk: int, k: int,
                                   max_distance: float | None, metric: str) -> tuple[np.ndarray, np.ndarray]:
    if metric == "hamming":
        index, distance = hamming_nearest(source, target, k, max_distance)
    elif k == 1 and max_distance is None:
        return nearest(source, target, chunk)  # the per-tile case: the floor's own k=1 search
    else:
        index, distance = k_nearest(source, target, k, max_distance, chunk)
    return (index[:, 0].copy(), distance[:, 0].copy()) if k == 1 else (index, distance)
