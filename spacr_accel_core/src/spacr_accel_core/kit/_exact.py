"""The exact nearest-neighbour machinery every backend shares: for third-party backend authors.

WHAT "NEAREST" MEANS. The contract's distance between two points is the float64 sum, coordinate
by coordinate IN ORDER, of the squared differences of their float32 coordinates
(:func:`exact_squared`); a source's nearest target is the one with the smallest such sum, and
among equal sums the lowest index (:func:`pick_lowest`). Any other arithmetic (a float32 sum, a
different order, a fused multiply-add, ``|t|^2 - 2 s.t``) rounds differently and, on real data,
picks a different neighbour hundreds of times in 100,000; so every backend gives the same answer
only if the final verdict is this one.

HOW TO BE FAST AND STILL EXACT. Search with any fast, rounded arithmetic, but let it only
NOMINATE: every target whose rounded distance is within a proven error bound of the row's
rounded best is a candidate, and the candidates are settled by the arithmetic above.
:func:`expansion_plan` prepares the most useful such search, one matrix product giving
``|t|^2 - 2 s.t`` for every pair, together with its bound. How a device backend sizes the tiles
of such a search, and retries one that runs out of memory, is :mod:`spacr_accel_core.tiling`.

This module needs only NumPy and is cheap to import. :func:`exact_squared` uses nothing but
indexing and arithmetic operators, and :func:`pick_lowest` the ``xp`` namespace passed in, so a
backend may hand them CuPy arrays (and the former torch tensors) and keep the verdict on the card.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

import numpy as np

__all__ = ["EXACT_IN_FLOAT32", "ExpansionPlan", "distances", "distinct_rows", "exact_squared", "expansion_plan",
           "integer_matmul", "pick_lowest",
           "pick_lowest_dense"]

EXACT_IN_FLOAT32: Final[frozenset[np.dtype]] = frozenset(
    np.dtype(t) for t in (np.float32, np.float16, np.bool_, np.int8, np.uint8, np.int16, np.uint16)
)
"""The dtypes every value of which float32 holds exactly. ``matmul`` multiplies operands of these
in float32 (what spaCR did on every backend); two integer operands of which one is wider (int32,
int64, uint32, uint64) give their exact integer product rounded once to float32
(:func:`integer_matmul`); any other wider operand (float64, or an integer beside a float) multiplies
in float64 and the float64 product is rounded to float32."""

_FLOAT64_EXACT = 1 << 53  # every integer below this, and every sum of such, is exact in float64
_INT64_SAFE = 1 << 62  # every partial sum stays inside int64, and its float64 rounding too


def _largest_magnitude(array: np.ndarray) -> int | float:
    """``max |x|`` without an ``np.abs`` copy (which also overflows int64's min): a Python int for
    an integer (or bool) array, a float otherwise; 0 for an empty array."""
    if array.size == 0:
        return 0
    exact = int if array.dtype.kind in "biu" else float
    return max(exact(array.max()), -exact(array.min()))


def integer_matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """``first @ second`` of integer (or bool) operands: the exact integer product, rounded ONCE to float32.

    WHY NOT FLOAT64 THEN FLOAT32. Beyond 2**53 float64 rounds the operands (and the sums), and the
    float32 rounding that follows can then round the wrong way: ``[[2**62 + 2**38 + 1]] @ [[1]]``
    lands on a float32 midpoint in float64 and ties to even, ``2**38 + 1`` below the exact value,
    where the nearest float32 is ``2**38 - 1`` above it. An integer product has one right answer,
    the float32 nearest to it, and this returns that.

    HOW, CHEAPLY. A bound on every partial sum, ``max|a| * max|b| * K``, picks the arithmetic: below
    2**53 float64 is exact, so NumPy's float64 ``@`` and one cast (the common case, as fast as
    before); below 2**62 int64 is exact and its cast to float32 is one correctly rounded conversion;
    beyond that, Python integers, then a round-to-odd step to float64 (exact in the last bit) and the
    cast, which together round once (float64 has more than 24 + 2 bits).

    :param first: integer or bool array, at least 1-D, non-empty (NumPy's ``@`` shape rules).
    :param second: the same.
    :returns: the float32 product (0-d for two vectors); beyond float32's range, ``inf``.
    """
    inner = first.shape[-1]
    bound = _largest_magnitude(first) * _largest_magnitude(second) * inner
    if bound < _FLOAT64_EXACT:
        product = np.matmul(first.astype(np.float64), second.astype(np.float64))
        return np.asarray(product, dtype=np.float64).astype(np.float32)
    if bound < _INT64_SAFE:
        product = np.matmul(first.astype(np.int64), second.astype(np.int64))
        return np.asarray(product, dtype=np.int64).astype(np.float32)
    exact = np.asarray(np.matmul(first.astype(object), second.astype(object)), dtype=object)
    nearest = exact.astype(np.float64)  # Python's int -> float: correctly rounded, to nearest even
    residual = np.frompyfunc(lambda value, approx: (value > int(approx)) - (value < int(approx)), 2, 1)
    side = np.asarray(residual(exact, nearest), dtype=np.int64)
    # Round to odd: an inexact value whose float64 neighbour is even moves to the odd neighbour on
    # its own side, so no float64 value that stands for an inexact one is ever a float32 midpoint.
    even = (nearest.view(np.int64) & 1) == 0
    nudge = (side != 0) & even
    nearest = np.where(nudge, np.nextafter(nearest, np.where(side > 0, np.inf, -np.inf)), nearest)
    with np.errstate(over="ignore"):  # beyond float32's range the answer is inf, as a cast gives
        return np.asarray(nearest.astype(np.float32))


def exact_squared(source: Any, target: Any, rows: Any = None, cols: Any = None) -> Any:
    """The contract's squared distances of pairs of points: float64, coordinates summed in order.

    ``total = d0*d0; total += d1*d1; ...`` with ``dk = source[..., k] - target[..., k]``: one
    rounding per operation, in the same order everywhere, so any two implementations that follow
    it agree bit for bit (a device that fuses the multiply into the add does NOT: run each step as
    its own operation there).

    :param source: float64 ``(P, D)`` points (or any shape broadcasting against ``target`` with the
        coordinates last). NumPy, or any array type with NumPy's indexing and operators (CuPy
        arrays, torch tensors: the torch backend runs its on-device verdict through this).
        Convert float32 inputs to float64 first: the differences must not round in float32.
    :param target: float64 points, likewise.
    :param rows: optional integer indices: pair ``source[rows]`` instead of ``source``, gathered
        one coordinate at a time, so no ``(P, D)`` copy of the gathered points is made.
    :param cols: optional integer indices into ``target``, likewise (give both or neither).
    :returns: the float64 squared distances, of the broadcast shape without the last axis.
    """
    if (rows is None) != (cols is None):
        raise ValueError("exact_squared: give both rows and cols, or neither")

    def difference(axis: int) -> Any:
        if rows is None:
            return source[..., axis] - target[..., axis]
        return source[rows, axis] - target[cols, axis]

    first = difference(0)
    total = first * first
    for axis in range(1, source.shape[-1]):
        step = difference(axis)
        total += step * step
    return total


def distances(squared: np.ndarray) -> np.ndarray:
    """The float32 Euclidean distances for exact float64 squared distances.

    A distance beyond float32's range (``[[-3e38]]`` against ``[[3e38]]``) is ``inf``: that IS the
    answer, so NumPy's overflow warning is silenced here. Left on, a caller running under
    ``warnings.simplefilter("error")`` would see every backend fail on valid input.

    :param squared: the float64 squared distances, as found.
    """
    with np.errstate(over="ignore"):
        found: np.ndarray = np.sqrt(squared).astype(np.float32)
    return found


def pick_lowest(rows: Any, cols: Any, squared: Any, count: int, *,
                xp: ModuleType = np) -> tuple[Any, Any]:
    """Per row, the candidate with the smallest exact squared distance, then the lowest column.

    One lexicographic sort by (row, distance, column); the first candidate of each row wins. This
    is the contract's tie rule: among targets at equal distance the lowest index.

    :param rows: int ``(P,)`` row of each candidate pair, in ``range(count)``.
    :param cols: int ``(P,)`` target index of each pair (below 2**53).
    :param squared: float64 ``(P,)`` exact squared distances (:func:`exact_squared`).
    :param count: how many rows; every one must have at least one candidate.
    :param xp: the array namespace of the inputs: NumPy, or CuPy to pick on the card.
    :returns: ``(index, best)``: int64 and float64 arrays of length ``count``.
    :raises ArithmeticError: a row had no candidate. A correct search always nominates at least
        each row's own rounded best, so this is a broken (non-finite) error bound; returning the
        uninitialised entries would hand garbage indices to the caller.
    """
    # One (3, P) array of keys, the last the primary: CuPy's lexsort takes only that form, and
    # indices below 2**53 are exact in float64.
    keys = xp.stack([cols.astype(xp.float64), squared.astype(xp.float64, copy=False),
                     rows.astype(xp.float64)])
    order = xp.lexsort(keys)
    rows, cols, squared = rows[order], cols[order], squared[order]
    first = xp.ones(rows.shape[0], dtype=bool)
    first[1:] = rows[1:] != rows[:-1]
    if int(xp.count_nonzero(first)) != count:
        raise ArithmeticError("nearest_neighbours: a row had no candidate (non-finite margin)")
    index = xp.empty(count, dtype=xp.int64)
    best = xp.empty(count, dtype=xp.float64)
    index[rows[first]] = cols[first]
    best[rows[first]] = squared[first]
    return index, best


def pick_lowest_dense(squared: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a dense block of exact squared distances, the smallest, then the lowest column.

    The tie rule of :func:`pick_lowest` for a search that computed every pair: ``argmin`` returns
    the FIRST minimum, which is the lowest index on a tie, in one pass over the block (a sort of
    every pair, as :func:`pick_lowest` makes of its candidates, would cost ``log`` of the block
    more for the same answer).

    :param squared: float64 ``(N, M)``, M >= 1 (:func:`exact_squared` of every pair).
    :returns: ``(index, best)``: int64 and float64 arrays of length N.
    """
    index = np.argmin(squared, axis=1).astype(np.int64, copy=False)
    best: np.ndarray = squared[np.arange(squared.shape[0]), index]
    return index, best


_MIX = np.uint64(0x9E3779B97F4A7C15)  # an odd 64-bit constant (2**64 / golden ratio): spreads the bits
_FEW_REPEATS = 64  # a first coordinate repeated at most 1 in this many points: the search's ties are cheap


def distinct_rows(points: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(keep, owner)``: the lowest index of each distinct row of float32 points, ascending, and
    for every row the position in ``keep`` of its copy; ``None`` when de-duplicating would not pay.

    WHY. Identical targets are the worst case of an exact search: every one is a tie the
    lowest-index rule must settle, so a search over 30,000 copies of one centroid compares
    30,000 x 30,000 equal distances (92 s on the NumPy backend before this existed). Identical rows
    have identical distances to every source, so only the lowest-indexed copy can ever win: a search
    over ``points[distinct_rows(points)]`` answers ``keep[j]`` where the full search answers the
    lowest index among the copies, the same answer. Duplicates are common in spaCR's data (a
    segmentation that emits an object twice, centroids quantised to the pixel grid, coordinates
    that differ only below float32's resolution).

    COST. One sort of the first coordinate (under 1 ms for 100,000 points): when it repeats in
    fewer than one point in :data:`_FEW_REPEATS`, the few duplicates cost a search nothing worth
    a second pass and ``None`` is returned. Otherwise the rows are hashed, sorted and compared
    exactly (a hash collision can only leave a duplicate in, never merge two different rows).
    ``-0.0`` and ``+0.0`` count as equal: they give every source the same distance.

    Sources de-duplicate the same way: identical sources have the same answer, so a search of
    ``source[keep]`` gives every source its answer as ``answer[owner]``.

    :param points: ``(M, D)`` float32, finite.
    :returns: ``keep``, int64 indices into ``points`` (ascending, so a lowest index among the
        distinct rows is the lowest among all), and ``owner``, int64 of length M with
        ``points[keep][owner]`` equal to ``points``; or ``None`` when there are no duplicates worth
        removing.
    """
    count = points.shape[0]
    if count < 2:
        return None
    first = np.sort(points[:, 0])
    if np.count_nonzero(first[1:] == first[:-1]) * _FEW_REPEATS <= count:
        return None
    rows = np.ascontiguousarray(points, dtype=np.float32) + np.float32(0.0)  # -0.0 becomes +0.0
    bits = rows.view(np.uint32).astype(np.uint64)
    key = bits[:, 0].copy()
    for axis in range(1, rows.shape[1]):  # wraps modulo 2**64 by design: a hash, not a value
        key = (key * _MIX) ^ bits[:, axis]
    order = np.argsort(key, kind="stable")  # stable: copies stay in index order, the lowest first
    ordered = rows[order]
    same = key[order[1:]] == key[order[:-1]]
    same &= (ordered[1:] == ordered[:-1]).all(axis=1)
    if not same.any():
        return None
    leader = np.ones(count, dtype=bool)
    leader[1:] = ~same
    firsts = order[leader]  # one per run of copies, in run order
    rank = np.argsort(firsts, kind="stable")  # run order -> ascending index order
    position = np.empty(rank.size, dtype=np.int64)
    position[rank] = np.arange(rank.size)
    owner = np.empty(count, dtype=np.int64)
    owner[order] = position[np.cumsum(leader) - 1]
    return firsts[rank].astype(np.int64, copy=False), owner


@dataclass(frozen=True)
class ExpansionPlan:
    """The operands of the ``|t|^2 - 2 s.t`` search and the error bound of its result.

    ``approx = left @ right`` is ``(N, M)``; for row ``i`` every column ``j`` with
    ``approx[i, j] <= approx[i].min() + margin[i]`` is a candidate, and the true nearest (by
    :func:`exact_squared`) is always among them. ``approx`` is a distance only up to a per-row
    offset and a positive scale, both irrelevant to which column is smallest.

    :param left: ``(N, D + 1)`` C-contiguous, the work dtype: ``[-2 s, 1]``.
    :param right: ``(D + 1, M)`` C-contiguous, the work dtype: ``[t, |t|^2]`` (transposed).
    :param margin: ``(N,)``, the work dtype, rounded up from the float64 bound: the comparison
        above may be made entirely in the work dtype.
    """

    left: np.ndarray
    right: np.ndarray
    margin: np.ndarray


def _centred_and_scaled(source: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 copies centred on the target mean and scaled by a power of two (exact) so the
    largest coordinate lies in [1, 2); done in place, without the temporaries of ``np.abs`` or
    ``exact_squared`` against zeros: these passes were 35 ms of a D = 64, 20,000 x 20,000 search
    (now ~15)."""
    t_centred = target.astype(np.float64)
    centre = t_centred.mean(axis=0)
    t_centred -= centre
    s_centred = source.astype(np.float64)
    s_centred -= centre
    largest = float(max(_largest_magnitude(s_centred), _largest_magnitude(t_centred)))
    if largest > 0:
        scale = 2.0 ** -np.floor(np.log2(largest))
        s_centred *= scale
        t_centred *= scale
    return s_centred, t_centred


def expansion_plan(source: np.ndarray, target: np.ndarray, work_dtype: Any,
                   unit_roundoff: float) -> ExpansionPlan:
    """Prepare the one-GEMM nearest-neighbour search and its proven error margin.

    WHY THIS FORM. ``|s - t|^2 = |s|^2 + (|t|^2 - 2 s.t)``, and the bracket for every pair is one
    matrix product ``[-2 s, 1] . [t, |t|^2]``, D + 1 deep: the fastest way to rank many wide points
    on any BLAS or card. Its rounding is bounded, so it nominates (see :class:`ExpansionPlan`).

    WHY CENTRE AND SCALE. Centring on the target mean (in float64) shrinks ``|s|`` and ``|t|``, and
    with them the margin and the candidate count. Scaling by a power of two (exact) then brings the
    largest coordinate into [1, 2): float32 neither overflows (coordinates near 1e19 square past
    float32's range) nor underflows (near 1e-22 every square is zero), whatever the magnitude, so
    float32 is a safe work dtype for any finite input. Distances only scale, so the order is kept.

    THE MARGIN. With ``u`` the unit roundoff, each of a row's ``approx`` values is within
    ``(D + 3) u (|s| + |t|)^2`` of its real value (the rounding of the inputs, of ``|t|^2``, and of
    a D + 1 term dot product in any order), and within ``8 (D + 1)`` smallest normal numbers
    (``tiny``) more where values underflow: after scaling no input exceeds 4 in magnitude, so an
    input, a product or a partial sum flushed to zero costs at most a few ``tiny`` per term, even
    on a device that flushes subnormals. A candidate test compares two such values (twice the
    bound), adds one rounding for the threshold, and must also admit the float64 reference's own
    rounding, ``(D + 2)`` float64 units. The margin is
    ``2 (2 D + 16) u (|s| + max|t|)^2 + 16 (D + 2) tiny``, several times all that.

    :param source: ``(N, D)`` finite points (float32 in the contract), N >= 1.
    :param target: ``(M, D)`` finite points, M >= 1.
    :param work_dtype: float32 or float64: the dtype the caller's GEMM runs in.
    :param unit_roundoff: the unit roundoff the caller's GEMM really has in that dtype (2**-24 for
        IEEE float32; larger where a device rounds inputs to TF32 or bfloat16). The larger of it and
        ``work_dtype``'s own is used.
    """
    work = np.dtype(work_dtype)
    if work not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"expansion_plan: work_dtype must be float32 or float64, not {work}")
    n, m, dims = source.shape[0], target.shape[0], source.shape[1]
    s_centred, t_centred = _centred_and_scaled(source, target)
    # Any order of the float64 sum: its error is ~D 2^-53 of |t|^2, and the bound below allows a
    # float32 rounding of it (2^-24).
    t_norm2 = np.einsum("ij,ij->i", t_centred, t_centred)
    left = np.empty((n, dims + 1), dtype=work)
    np.multiply(s_centred, -2.0, out=left[:, :dims], casting="same_kind")
    left[:, dims] = 1.0
    right = np.empty((dims + 1, m), dtype=work)
    right[:dims] = t_centred.T
    right[dims] = t_norm2
    unit = max(float(unit_roundoff), float(np.finfo(work).eps) / 2)
    s_length = np.sqrt(np.einsum("ij,ij->i", s_centred, s_centred))
    t_longest = float(np.sqrt(t_norm2.max(initial=0.0)))
    bound = (2.0 * (2 * dims + 16) * unit * np.square(s_length + t_longest)
             + 16.0 * (dims + 2) * float(np.finfo(work).tiny))
    margin = bound.astype(work)
    # Round up, never down: the cast to float32 may lose the last bit of the bound.
    margin = np.where(margin < bound, np.nextafter(margin, work.type(np.inf)), margin)
    return ExpansionPlan(left, right, np.ascontiguousarray(margin, dtype=work))
