"""The neighbours family's torch code: the search that serves a call, and each search, exact and
equal to the NumPy backend's. Imported by the hook of :mod:`._neighbours` at its first call (the
plugin imports that module, and its import stays as cheap as the hook alone).

WHICH SEARCH SERVES A CALL (:func:`nearest_neighbours`): one neighbour (:func:`nearest`), ``k`` within
a distance (:func:`k_nearest`, on the CPU first by a grid, :func:`grid_search`), or Hamming
(:func:`hamming`); each exact, so none is declined for its arguments.

ONE NEIGHBOUR: Exact nearest neighbours in torch: a fast float search for candidates, an exact float64 verdict.

WHY NOT ``cdist``. The plain ``cdist`` + ``argmin`` on 4096-row chunks computes all N x M
distances: 73 s for 100,000 x 100,000 points in 2-D on this project's 2-core CPU, and on a card
40 GB of distances written and read back. It is not exact either: float32 rounding picks the wrong
neighbour hundreds of times in 100,000, and ``argmin`` over rounded ties is not "lowest index".

LOW DIMENSIONS (D < :data:`WIDE`, spaCR's 2-D and 3-D centroids): both point sets are tiled by
sorting (slabs of equal count along each coordinate in turn, a k-d tiling) into blocks of
:data:`BLOCK` neighbouring points, each with its bounding box. For a block of sources, one pass
against the closest compact target block gives every source an upper bound on its nearest
distance; every target block whose box lies farther than the block's worst bound is pruned, and
distances are computed only to the blocks left (about twelve per block on uniform data, instead
of all 1,563 at 100,000 points). Everything is batched tensor arithmetic, so the same
code runs on a CPU and a GPU. WIDE POINT SETS use the ``|t|^2 - 2 s.t`` matrix product, one GEMM
per chunk, as the NumPy backend does.

EXACTNESS. The fast search runs in float32: the block search in float64 for coordinates so large
(or small) that float32 squares would overflow (or underflow); the matrix product follows
:func:`spacr_accel_core.exact.expansion_plan`, whose power-of-two scaling makes float32 safe at any
magnitude, and runs in float64 whenever the process allowed TF32 or bfloat16 float32 products (see
:func:`_gemm_plan`). Its rounding error is bounded (relative for the direct differences, absolute
for the matrix product), so it only NOMINATES: every target within that bound of a row's best is a
candidate, and the winner is chosen by the contract's arithmetic
(:func:`spacr_accel_core.exact.exact_squared`: the float64 sum of squared coordinate differences
in coordinate order, lowest target index among equals). That verdict runs on the device when it
takes float64, else on the host in NumPy; either way the indices and distances equal the NumPy
backend's exactly, whatever ``chunk`` is.

ON THE CPU (a call forced with ``backend="torch"``, or ``gpu=False`` with it) torch runs its own
search, so the answer is reported as torch's because torch computed it. It is slower there than
the NumPy backend's KD-tree (39-72 times on tight clusters beside far outliers, measured by
``benchmarks/bench_science.py --only ties``), which is why automatic dispatch offers torch only on
a GPU.

``k`` NEAREST: Exact ``k`` nearest neighbours within an optional distance, in torch: the block search of
one neighbour asked for ``k`` places instead of one.

PRUNING. For a pass of source blocks, the targets of the blocks nearest at their farthest give
every source an upper bound on its ``k``-th nearest (the ``k``-th smallest of those distances);
with ``max_distance`` the bound is also capped by the (padded) limit, so on a card a tight limit
prunes every target block beyond it before a distance is computed. A block survives if its box
is within that bound (with the rounding margin of :func:`_bounds`).

NOMINATION AND VERDICT. In a pass every target within the rounding margin of the row's ``k``-th
smallest rounded distance is a candidate (ties at the ``k``-th place included); the candidates are
settled by the contract's arithmetic (:func:`spacr_accel_core.exact.exact_squared`) and ordered by
(distance, index), on the device where it takes float64, else on the host. Neighbours whose
float32 distance exceeds ``max_distance`` are dropped there, before the answer is copied back.

COPIES. Identical targets are searched once; each chosen distinct target then stands for its
first ``k`` copies (a later copy can never make the first ``k``: ``k`` copies before it are as
near and lower), and the copies are ordered by (distance, index) on the host.

``k`` NEAREST ON THE CPU: The ``k`` nearest of low-dimensional points on the CPU by a uniform grid, exactly, in float64.

WHY. On a CPU the batched block search (:func:`k_nearest`) computes hundreds of distances per
source to keep its passes large. A grid of cells holding a few targets each answers most sources
from the block of cells around their own: a few dozen candidates, whose distances are computed
directly by the contract's arithmetic (:func:`spacr_accel_core.exact.exact_squared`), so no
nomination and no margin are needed.

THE CELLS. A square (cube) of side ``s`` would hold ``k / 4 + 1.25`` targets on average; cells are
that side along every coordinate but the last, and ``s / FINE`` along the last. A source's block
of radius ``r`` reaches ``r`` cells along the first coordinates and ``FINE r`` along the last, so it
reaches at least ``r s`` beyond the source's own cell either way.

HOW, WITH LITTLE PADDING. The targets are sorted by cell (cells numbered along the last
coordinate fastest), so the cells of a block that share every coordinate but the last are ONE run
of consecutive sorted targets: ``(2r + 1)^(D - 1)`` runs per source (3 in 2-D). The sources are
ordered by their longest run (then by cell, for the caches), and each pass reads every run of its
sources as long as its longest: a dense ``(rows, runs x span)`` block with little padding.

WHEN IT IS EXACT. Every target outside a source's block is farther from it than the block's
nearest wall. A source is answered here only if its ``k``-th distance (or the padded
``max_distance``, if smaller) lies strictly inside that wall, with a relative allowance for the
rounding of the cell arithmetic; a source not settled by its block of radius 1 is tried again with
the blocks of :data:`RADII`, and every source none settles (near a sparse region, beside a crowded
cell, with more ties than :data:`GRID_SLACK`) is left to the block search. Points crowded into one cell
(more than :data:`MOST_PER_CELL` times ``k / 4 + 1.25``, plus 8) send the whole call to the block
search.

HAMMING: Exact Hamming nearest neighbours of packed binary descriptors (ORB's 32 bytes) in torch.

WHY A MATRIX PRODUCT. torch has no population count, and counting bits elementwise (an XOR, then a
table or shifts and masks) is a dozen passes over every pair. The bits unpacked to signs
(``2 bit - 1``: ``+1`` or ``-1``) make the count a dot product: over ``K`` bits
``a.b = K - 2 hamming(a, b)``, so ranking the targets of a source (larger is nearer) is ONE matrix
product of the source signs by the target signs, the operation every card (and a CPU with bfloat16
units) runs fastest. ``K`` is exactly the piece's bits (256 for 32 bytes), a width the CPU's
bfloat16 tiles (AMX) take whole; a column more (``K = 257``) measured twice as slow there.

WHY IT IS EXACT. Every input (``+1``, ``-1``) is an integer the half-precision type holds, and so
is every partial sum and the product, which lies in ``[-K, K]``: bfloat16 holds every integer up to
256 and float16 up to 2048, so the bytes are cut into pieces of 32 (bfloat16) or 256 (float16)
bytes, each piece one exact product, summed in float32 where there are several (at most ``8 B``,
far below ``2**24``). The products accumulate in float32 (cuBLAS, oneDNN); even a device that
reduces in half precision stays exact, as every partial sum is an integer within those bounds.

WHICH PRODUCT ON THE CPU. A bfloat16 product is fast only where the CPU multiplies bfloat16 itself
(AMX tiles, AVX-512 BF16); elsewhere oneDNN emulates it through float32, about five times slower
than a float32 product (and float16 slower still). So the CPU's product is chosen by what it runs
natively (:func:`_cpu_plan`): bfloat16 on AMX; where it has VNNI (int8 dot products, four times
float32's rate) the bits as uint8 ``0/1`` times the target signs as int8 ``+-1``, accumulated in
int32 by oneDNN's quantized linear, whose per-target scale ``2`` and bias ``8 B - 2 |b|`` make it
the same ``8 B - 2 hamming`` (exact: integers throughout, written out as bfloat16 within 256); then
bfloat16 on AVX-512 BF16; else float32, exact for every integer below ``2**24`` (whole descriptors
in one piece). Each choice gives the same exact scores, so the answers never depend on the CPU.

TIES TO THE LOWEST INDEX. ``topk`` does not say which of equal values it returns, so it is asked
for :data:`HAMMING_SLACK` more than ``k``: where the last of those is strictly below the ``k``-th, every
target equal to the ``k``-th is among them and the exact order (count, then index) is a sort of a
few numbers; the rare row with more ties than that is ranked by the unique key
``count * M + index`` over all its targets.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from spacr_accel_core import BackendDeclined
from spacr_accel_core.toolkit import distances, distinct_rows, exact_squared, expansion_plan, pick_lowest

from ._runtime import IEEE_UNIT, Device, budget, float32_gemm_unit, tensor, tiled

if TYPE_CHECKING:
    import torch

__all__ = [
    "BLOCK",
    "FINE",
    "GRID_SLACK",
    "GROUPS",
    "HAMMING_SLACK",
    "MOST_PER_CELL",
    "RADII",
    "WIDE",
    "WIDEST",
    "grid_search",
    "hamming",
    "k_nearest",
    "nearest",
    "nearest_neighbours",
    "search_bound",
]


# ---- which search serves a call -------------------------------------------------------------------


def nearest_neighbours(source: np.ndarray, target: np.ndarray, chunk: int, k: int, max_distance: float | None,
                       metric: str, device: Device) -> tuple[np.ndarray, np.ndarray]:
    """The ``spacr_accel_nearest_neighbours`` answer on ``device``.

    :param source: ``(N, D)`` float32 points, or uint8 packed bits for ``metric="hamming"``.
    :param target: ``(M, D)``, the same kind.
    :param chunk: at most this many source rows per pass.
    :param k: neighbours per source row.
    :param max_distance: the farthest neighbour kept (pruned on the device), or ``None``.
    :param metric: ``"euclidean"`` or ``"hamming"``.
    :param device: where to search.
    :returns: ``(N,)`` int64 and float32 for ``k=1``, ``(N, k)`` otherwise.
    """
    if metric == "hamming":
        index, found = hamming(source, target, chunk, k, max_distance, device)
    elif k == 1 and max_distance is None:
        return nearest(source, target, chunk, device)
    else:
        index, found = k_nearest(source, target, chunk, k, max_distance, device)
    return (index[:, 0], found[:, 0]) if k == 1 else (index, found)


# ---- one neighbour: the block search and the matrix product -----------------------------------------


WIDE = 8
"""From this many coordinates on, bounding boxes prune little and the matrix product is faster."""
BLOCK = 64
"""Points per block: small enough to prune well, large enough that a block is one batched op."""
_F32 = np.dtype(np.float32)
_I64 = np.dtype(np.int64)


def _float32_fits(source: np.ndarray, target: np.ndarray) -> bool:
    """Whether the block search's float32 squared differences can neither overflow nor all drown
    in underflow here (the matrix product needs no such test: its plan scales the points)."""
    dims = source.shape[1]
    largest = max(float(np.abs(source).max()), float(np.abs(target).max()))
    # |s - t| <= 2 * largest; D squares of that must stay below float32's 2^128.
    return largest <= 2.0 ** 62 / math.sqrt(dims) and (largest == 0.0 or largest >= 2.0 ** -30)


def _bounds(dims: int, dtype: torch.dtype) -> tuple[float, float]:
    """``(relative, absolute)`` error bounds of a sum of ``dims`` squared differences in ``dtype``.

    Each difference, square and addition rounds once (relative ``u``), so the sum is within
    ``(D + 2) u`` of the exact value, plus underflow (at most one smallest-normal per operation,
    even where a device flushes subnormals to zero). The margins used are several times that.
    """
    import torch

    info = torch.finfo(dtype)
    unit = info.eps / 2
    return 4.0 * (dims + 3) * unit, 8.0 * (dims + 2) * info.tiny


# ---- the exact verdict ---------------------------------------------------------------------------


def _pick_device(local: torch.Tensor, cols: torch.Tensor, exact: torch.Tensor,
                 count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per local row, the candidate with the smallest exact distance, then the lowest index."""
    import torch

    best = torch.full((count,), math.inf, dtype=torch.float64, device=exact.device)
    best = best.scatter_reduce(0, local, exact, reduce="amin")
    winner = exact == best[local]
    chosen = torch.full((count,), torch.iinfo(torch.int64).max, dtype=torch.int64, device=exact.device)
    chosen = chosen.scatter_reduce(0, local[winner], cols[winner], reduce="amin")
    return chosen, best


class _Verdict:
    """Collects candidate pairs pass by pass and settles each source row exactly.

    On a float64 device the points are kept there in float64 and only the answers come back; on
    Metal the candidate pairs come to the host, where NumPy decides. Either way the distances are
    :func:`~spacr_accel_core.exact.exact_squared`'s (one operation per step, each its own kernel,
    so nothing fuses a multiply into an add), bit-identical to the NumPy backend's.
    """

    def __init__(self, source: np.ndarray, target: np.ndarray, device: Device) -> None:
        import torch

        self.device = device
        n = source.shape[0]
        self.on_device = device.float64
        if self.on_device:
            self.s64 = tensor(source, device.torch).to(torch.float64)
            self.t64 = tensor(target, device.torch).to(torch.float64)
            self.index_dev = torch.empty(n, dtype=torch.int64, device=device.torch)
            self.best_dev = torch.empty(n, dtype=torch.float64, device=device.torch)
        else:
            self.s64_host = source.astype(np.float64)
            self.t64_host = target.astype(np.float64)
            self.index = np.empty(n, dtype=np.int64)
            self.best = np.empty(n, dtype=np.float64)

    def settle(self, row_ids: torch.Tensor, local: torch.Tensor, cols: torch.Tensor) -> None:
        """Decide every row of a pass.

        :param row_ids: the source index of each local row of the pass (repeats allowed: a
            repeated row gets the same answer twice).
        :param local: local row of each candidate pair.
        :param cols: target index of each candidate pair.
        """
        count = row_ids.shape[0]
        if self.on_device:
            exact = exact_squared(self.s64, self.t64, row_ids[local], cols)
            chosen, best = _pick_device(local, cols, exact, count)
            self.index_dev[row_ids] = chosen
            self.best_dev[row_ids] = best
            return
        rows_np = row_ids.cpu().numpy()
        local_np = local.cpu().numpy()
        cols_np = cols.cpu().numpy()
        exact_np = exact_squared(self.s64_host, self.t64_host, rows_np[local_np], cols_np)
        chosen_np, best_np = pick_lowest(local_np, cols_np, exact_np, count)
        self.index[rows_np] = chosen_np
        self.best[rows_np] = best_np

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """``(indices, squared)``: int64 and the exact float64 squared distances, on the host."""
        if self.on_device:
            return self.index_dev.cpu().numpy(), self.best_dev.cpu().numpy()
        return self.index, self.best


# ---- low dimensions: blocks of neighbours ------------------------------------------------------------


def _tile_order(points: torch.Tensor, block: int) -> torch.Tensor:
    """An order in which every run of ``block`` points is a compact box (a k-d tiling by sorting).

    The points are cut into slabs of equal count along the first coordinate, each slab into
    slabs along the second, and so on; the last coordinate cuts runs of exactly ``block`` points.
    Unlike a Z-order curve, whose runs jump across the plane and give a few blocks boxes as large
    as the data, every box here is as small as the local density allows, which is what pruning
    by box distance needs.
    """
    import torch

    count, dims = points.shape
    blocks = -(-count // block)
    per_axis = max(1, math.ceil(blocks ** (1.0 / dims) - 1e-9))
    order = torch.arange(count, device=points.device)
    group_size = count  # before the first cut, all points are one group
    for axis in range(dims):
        # Sort by this coordinate, then (stably) by the group each point is already in.
        by_value = torch.argsort(points[order, axis], stable=True)
        order = order[by_value]
        groups = by_value // group_size  # by_value holds each point's previous position
        order = order[torch.argsort(groups, stable=True)]
        # Python integers, capped at the count: at many coordinates the product outgrows int64 (64
        # points times 2**58 slabs at D=59), and a group of at least ``count`` is one group anyway.
        group_size = min(count, block * per_axis ** (dims - axis - 1))
    return order


def _blocked(points: torch.Tensor, order: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(blocks, ids)``: the points in ``order`` cut into ``(count, size, D)`` blocks; the last one
    is padded by repeating its final point (a duplicate, with the same index, never a new one)."""
    import torch

    count = -(-order.shape[0] // size)
    pad = count * size - order.shape[0]
    if pad:
        order = torch.cat([order, order[-1:].expand(pad)])
    ids = order.view(count, size)
    return points[order].view(count, size, points.shape[1]), ids


def _lower_bounds(s_low: torch.Tensor, s_high: torch.Tensor, t_low: torch.Tensor,
                  t_high: torch.Tensor) -> torch.Tensor:
    """Squared distance between boxes: a lower bound on every pair of points they hold."""
    total: torch.Tensor | None = None
    for axis in range(s_low.shape[1]):
        gap = (s_low[:, None, axis] - t_high[None, :, axis]).clamp(min=0) + (
            t_low[None, :, axis] - s_high[:, None, axis]).clamp(min=0)
        square = gap * gap
        total = square if total is None else total + square
    assert total is not None  # D >= 1 is guaranteed by the core
    return total


def _upper_bounds(s_low: torch.Tensor, s_high: torch.Tensor, t_low: torch.Tensor,
                  t_high: torch.Tensor) -> torch.Tensor:
    """Squared largest distance between boxes: no pair of points they hold is farther apart."""
    import torch

    total: torch.Tensor | None = None
    for axis in range(s_low.shape[1]):
        reach = torch.maximum(s_high[:, None, axis] - t_low[None, :, axis],
                              t_high[None, :, axis] - s_low[:, None, axis])
        square = reach * reach
        total = square if total is None else total + square
    assert total is not None  # D >= 1 is guaranteed by the core
    return total


def _squared(sources: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``(G, S, K, T)`` squared distances between ``(G, S, D)`` sources and ``(G, K, T, D)`` targets."""
    total: torch.Tensor | None = None
    for axis in range(sources.shape[-1]):
        diff = sources[:, :, None, None, axis] - targets[:, None, :, :, axis]
        diff.mul_(diff)
        if total is None:
            total = diff
        else:
            total.add_(diff)
    assert total is not None  # D >= 1 is guaranteed by the core
    return total


def _blocks(source: np.ndarray, target: np.ndarray, chunk: int, device: Device,
            dtype: torch.dtype, verdict: _Verdict) -> None:
    import torch

    where = device.torch
    dims = source.shape[1]
    relative, absolute = _bounds(dims, dtype)
    src = tensor(source, where).to(dtype)
    tgt = tensor(target, where).to(dtype)
    per_source_block = min(BLOCK, chunk)
    s_blocks, s_ids = _blocked(src, _tile_order(src, per_source_block), per_source_block)
    t_blocks, t_ids = _blocked(tgt, _tile_order(tgt, BLOCK), BLOCK)
    del src, tgt
    s_low, s_high = s_blocks.amin(1), s_blocks.amax(1)
    t_low, t_high = t_blocks.amin(1), t_blocks.amax(1)
    # The last target block's padding (copies of its final point, for a tight box) moves to
    # infinity once the boxes are taken: as copies they tie with that point for every source near
    # it, 64 candidates a row to settle where there is one (a single distinct target took 1 s).
    padding = t_blocks.shape[0] * BLOCK - target.shape[0]
    if padding:
        t_blocks[-1, BLOCK - padding:] = math.inf
    target_blocks = t_blocks.shape[0]
    room = budget(device)
    itemsize = torch.finfo(dtype).bits // 8
    # Start with as many source blocks per pass as the caller's chunk allows and the box table
    # fits; the distance pass below splits further once it knows how many blocks survive.
    first_tile = max(1, min(chunk // per_source_block, room // max(1, target_blocks * (3 * itemsize + 2))))

    def step(start: int, stop: int) -> None:
        bounds = _lower_bounds(s_low[start:stop], s_high[start:stop], t_low, t_high)
        # The block whose box is nearest at its FARTHEST is compact and close: probing it gives
        # a tight bound (the nearest box at its nearest may be a large one merely overlapping).
        nearest_block = _upper_bounds(s_low[start:stop], s_high[start:stop], t_low, t_high).argmin(1)
        # One pass against the nearest block bounds every source's nearest distance from above.
        probe = _squared(s_blocks[start:stop], t_blocks[nearest_block][:, None])
        ceiling = probe.amin(dim=(2, 3)).amax(1)
        keep = bounds <= ceiling[:, None] * (1.0 + 2.0 * relative) + 2.0 * absolute
        keep[torch.arange(stop - start, device=where), nearest_block] = True
        for picked, chosen, valid in sub_passes(keep, room, per_source_block * BLOCK * (2 * itemsize + 2)):
            _block_pass(s_blocks[start + picked], s_ids[start + picked], t_blocks, t_ids, chosen, valid,
                        relative, absolute, verdict)

    tiled(s_blocks.shape[0], first_tile, 1, step, device, "nearest_neighbours")


def sub_passes(keep: torch.Tensor, room: int,
               per_column: int) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The distance passes of one tile of source blocks, given which target blocks survive for each.

    Source blocks go in order of how many target blocks survive for them, each sub-pass as wide as
    its own widest: a few blocks that straddle a gap between clusters (a huge box, so little is
    pruned) must not make every block of the pass that wide.

    :param keep: bool ``(source blocks, target blocks)``: the target blocks each source block reads.
    :param room: bytes one pass may hold.
    :param per_column: bytes a source block costs per target block it reads.
    :returns: per sub-pass ``(picked, chosen, valid)``: the source blocks (rows of ``keep``), their
        surviving target blocks first in block order, ``(len(picked), width)``, and which of those
        are real (the rest pad the row to the sub-pass's width).
    """
    import torch

    counts, rank = torch.sort(keep.sum(1))
    lo, total = 0, keep.shape[0]
    while lo < total:
        hi = total
        while True:
            width = int(counts[hi - 1])
            fit = max(1, room // (per_column * width + 64))
            if hi - lo <= fit:
                break
            hi = lo + fit
        picked = rank[lo:hi]
        chosen = torch.argsort((~keep[picked]).to(torch.int8), dim=1, stable=True)[:, :width]
        valid = torch.arange(width, device=keep.device)[None, :] < counts[lo:hi, None]
        yield picked, chosen, valid
        lo = hi


def _block_pass(sources: torch.Tensor, source_ids: torch.Tensor, t_blocks: torch.Tensor,
                t_ids: torch.Tensor, chosen: torch.Tensor, valid: torch.Tensor, relative: float,
                absolute: float, verdict: _Verdict) -> None:
    """Nominate and settle the sources of a few blocks against their surviving target blocks."""
    import torch

    groups, per_source_block, _dims = sources.shape
    width = chosen.shape[1]
    squared = _squared(sources, t_blocks[chosen])  # (G, S, K, T)
    squared.masked_fill_(~valid[:, None, :, None], math.inf)
    flat = squared.view(groups * per_source_block, width * BLOCK)
    floor = flat.amin(1)
    local, position = torch.nonzero(flat <= (floor * (1.0 + relative) + absolute)[:, None], as_tuple=True)
    block = chosen.reshape(-1)[(local // per_source_block) * width + position // BLOCK]
    cols = t_ids[block, position % BLOCK]
    verdict.settle(source_ids.reshape(-1), local, cols)


# ---- wide point sets: the matrix product ---------------------------------------------------------


def _gemm_plan(dtype: torch.dtype, device: Device) -> tuple[torch.dtype, float]:
    """``(dtype, unit roundoff)`` of the search's matrix product, honest about TF32 and bfloat16.

    The margin below assumes the product rounds like IEEE arithmetic in ``dtype``. A process that
    allowed reduced float32 products (``allow_tf32``, ``set_float32_matmul_precision("high")`` or
    ``"medium"``) breaks that: cuBLAS (or oneDNN) rounds the inputs to 10 or 7 bits, the error is
    ~2^-10 instead of 2^-24, and a margin sized for 2^-24 silently drops the true neighbour. So:
    on a device that takes doubles (every CUDA and ROCm card, the CPU) the product runs in
    float64, which no such setting touches (the product is thin, D + 1 deep, so it is bound by
    memory traffic, not arithmetic: about twice the time, and few candidates); elsewhere the margin
    is widened to the reduced unit roundoff (more candidates, still exact).
    """
    import torch

    if dtype != torch.float32:
        return dtype, float(torch.finfo(dtype).eps) / 2
    unit = float32_gemm_unit()
    if unit <= IEEE_UNIT:
        return dtype, IEEE_UNIT
    if device.float64:
        return torch.float64, float(torch.finfo(torch.float64).eps) / 2
    return dtype, unit


def _gemm(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """The search's one matrix product per pass (a function, so tests can round like TF32)."""
    return left @ right


_CANDIDATES_PER_ROW = 32
"""A matrix pass nominating more than this many targets a row on average (plus a small allowance)
is handed to the block search: points the expansion's rounding cannot tell apart (a tight cluster
beside far outliers: every cluster point a candidate of every cluster source, 30,000 x 30,000 pairs
for the exact verdict, 190 s on the CPU) are told apart there by their direct differences."""


def _matrix(source: np.ndarray, target: np.ndarray, chunk: int, device: Device,
            verdict: _Verdict) -> list[range]:
    """The ``|t|^2 - 2 s.t`` search (:func:`~spacr_accel_core.exact.expansion_plan`): scaled by a
    power of two, so float32 is safe at any magnitude, on any device.

    :returns: the source rows left unsettled, passes that nominated too many candidates
        (:data:`_CANDIDATES_PER_ROW`), for the block search.
    """
    import torch

    where = device.torch
    n, m = source.shape[0], target.shape[0]
    dtype, unit = _gemm_plan(torch.float32, device)
    plan = expansion_plan(source, target, np.float32 if dtype == torch.float32 else np.float64, unit)
    left_dev = torch.from_numpy(plan.left).to(where)
    right_dev = torch.from_numpy(plan.right).to(where)
    margin_dev = torch.from_numpy(plan.margin).to(where)
    rows = max(1, min(chunk, budget(device) // max(1, m * (plan.left.dtype.itemsize + 2))))

    deferred: list[range] = []

    def step(start: int, stop: int) -> None:
        approx = _gemm(left_dev[start:stop], right_dev)
        threshold = approx.amin(1) + margin_dev[start:stop]
        nominated = approx <= threshold[:, None]
        if int(nominated.sum()) > _CANDIDATES_PER_ROW * (stop - start) + 4096:
            deferred.append(range(start, stop))
            return
        local, cols = torch.nonzero(nominated, as_tuple=True)
        ids = torch.arange(start, stop, device=where)
        verdict.settle(ids, local, cols)

    tiled(n, rows, 1, step, device, "nearest_neighbours")
    return deferred


# ---- entry -------------------------------------------------------------------------------------


def nearest(source: np.ndarray, target: np.ndarray, chunk: int,
            device: Device) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest neighbours: int64 indices and float32 distances, equal to the NumPy backend's.

    Identical targets are searched once, as their lowest-indexed copy
    (:func:`~spacr_accel_core.exact.distinct_rows`, one host sort): every copy is otherwise a tie
    the exact verdict must settle, and 20,000 targets equal in float32 took 33 s on the CPU.
    Identical sources are searched once too (they have one answer).

    :param source: ``(N, D)`` float32, C-contiguous, finite, N >= 1.
    :param target: ``(M, D)`` float32, C-contiguous, finite, M >= 1.
    :param chunk: at most this many source rows per pass.
    :param device: where to search.
    """
    targets = distinct_rows(target)
    sources = distinct_rows(source)
    if sources is not None:
        source = source[sources[0]]
    if targets is None:
        index, squared = _search(source, target, chunk, device)
    else:
        found, squared = _search(source, target[targets[0]], chunk, device)
        index = targets[0][found]
    if sources is not None:
        index, squared = index[sources[1]], squared[sources[1]]
    return index, distances(squared)


def _search(source: np.ndarray, target: np.ndarray, chunk: int,
            device: Device) -> tuple[np.ndarray, np.ndarray]:
    """``(indices, exact float64 squared distances)`` by the method that fits the width."""
    if source.shape[1] < WIDE:
        return _block_search(source, target, chunk, device)
    verdict = _Verdict(source, target, device)
    deferred = _matrix(source, target, chunk, device, verdict)
    index, squared = verdict.result()
    if deferred:
        rows = np.concatenate([np.arange(part.start, part.stop) for part in deferred])
        index[rows], squared[rows] = _block_search(np.ascontiguousarray(source[rows]), target, chunk, device)
    return index, squared


def _block_search(source: np.ndarray, target: np.ndarray, chunk: int,
                  device: Device) -> tuple[np.ndarray, np.ndarray]:
    """The block search, in float32 where its squares fit, else in float64 (on the CPU if need be)."""
    import torch

    dtype = torch.float32
    if not _float32_fits(source, target):
        dtype = torch.float64
        if not device.float64:
            # Coordinates beyond float32's squares on a device without doubles: the CPU decides.
            device = Device(torch.device("cpu"), True)
    verdict = _Verdict(source, target, device)
    _blocks(source, target, chunk, device, dtype, verdict)
    return verdict.result()


# ---- k nearest within a distance: the block search asked for k places ---------------------------------


_BOUND_SLACK = 2.0 ** -20
"""Relative padding of ``max_distance`` for pruning: far above float32's rounding of a distance."""


def search_bound(max_distance: float | None) -> float:
    """A squared float64 radius holding every target whose float32 distance can be ``<= max_distance``.

    Squared by a product, not ``** 2``: Python's power raises ``OverflowError`` where the square of
    a valid bound (``1e300``) is beyond float64, while the product rounds it to ``inf``, which is
    the right answer (such a bound is above every distance, so it prunes nothing).
    """
    if max_distance is None or math.isinf(max_distance):
        return math.inf
    padded = float(max_distance) * (1.0 + _BOUND_SLACK) + 2.0 ** -140
    return padded * padded


class _KVerdict:
    """Candidate pairs settled per source row: the first ``k`` by (exact distance, index)."""

    def __init__(self, source: np.ndarray, target: np.ndarray, k: int, device: Device) -> None:
        import torch

        n = source.shape[0]
        self.k = k
        self.on_device = device.float64
        where = device.torch if self.on_device else torch.device("cpu")
        self.s64 = tensor(source, where).to(torch.float64)
        self.t64 = tensor(target, where).to(torch.float64)
        self.index = torch.full((n, k), -1, dtype=torch.int64, device=where)
        self.best = torch.full((n, k), math.inf, dtype=torch.float64, device=where)

    def settle(self, row_ids: torch.Tensor, local: torch.Tensor, cols: torch.Tensor) -> None:
        """Decide every row of a pass from its candidate pairs (``local`` row, ``cols`` target)."""
        import torch

        where = self.s64.device
        row_ids, local, cols = row_ids.to(where), local.to(where), cols.to(where)
        count = row_ids.shape[0]
        exact = exact_squared(self.s64, self.t64, row_ids[local], cols)
        # (row, distance, index) order by three stable sorts, least significant key first.
        order = torch.argsort(cols, stable=True)
        order = order[torch.argsort(exact[order], stable=True)]
        order = order[torch.argsort(local[order], stable=True)]
        local, cols, exact = local[order], cols[order], exact[order]
        starts = torch.searchsorted(local, torch.arange(count, device=where))
        rank = torch.arange(local.shape[0], device=where) - starts[local]
        kept = rank < self.k
        index = torch.full((count, self.k), -1, dtype=torch.int64, device=where)
        best = torch.full((count, self.k), math.inf, dtype=torch.float64, device=where)
        index[local[kept], rank[kept]] = cols[kept]
        best[local[kept], rank[kept]] = exact[kept]
        self.index[row_ids] = index
        self.best[row_ids] = best

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """``(indices, squared)`` on the host: ``(N, k)`` int64 and float64, ``-1``/``inf`` missing."""
        return self.index.cpu().numpy(), self.best.cpu().numpy()


def _ceilings(s_blocks: torch.Tensor, t_blocks: torch.Tensor, upper: torch.Tensor, k: int) -> tuple[
        torch.Tensor, torch.Tensor]:
    """``(ceiling, probed)``: per source block an upper bound on every source's ``k``-th nearest
    squared distance (rounded), from the target blocks nearest at their farthest (``probed``)."""
    import torch

    probes = min(upper.shape[1], -(-k // BLOCK))
    probed = torch.topk(upper, probes, dim=1, largest=False).indices
    distance = _squared(s_blocks, t_blocks[probed])  # (G, S, probes, BLOCK)
    flat = distance.flatten(2)
    if flat.shape[2] < k:
        return torch.full((s_blocks.shape[0],), math.inf, dtype=flat.dtype, device=flat.device), probed
    kth = torch.topk(flat, k, dim=2, largest=False).values[:, :, -1]
    return kth.amax(1), probed


def _k_pass(sources: torch.Tensor, source_ids: torch.Tensor, t_blocks: torch.Tensor, t_ids: torch.Tensor,
          chosen: torch.Tensor, valid: torch.Tensor, margin: tuple[float, float, float], k: int,
          verdict: _KVerdict) -> None:
    """Nominate and settle the sources of a few blocks against their surviving target blocks."""
    import torch

    relative, absolute, limit = margin
    groups, per_block, _dims = sources.shape
    width = chosen.shape[1]
    squared = _squared(sources, t_blocks[chosen])  # (G, S, K, T)
    squared.masked_fill_(~valid[:, None, :, None], math.inf)
    flat = squared.view(groups * per_block, width * BLOCK)
    if flat.shape[1] >= k:
        kth = torch.topk(flat, k, dim=1, largest=False).values[:, -1]
    else:
        kth = torch.full((flat.shape[0],), math.inf, dtype=flat.dtype, device=flat.device)
    # Capped below infinity: the masked entries (inf) are never nominated, with no isfinite pass.
    cap = min(limit * (1.0 + relative) + absolute, float(torch.finfo(flat.dtype).max))
    threshold = torch.clamp(kth * (1.0 + relative) + absolute, max=cap)
    nominated = flat <= threshold[:, None]
    local, position = torch.nonzero(nominated, as_tuple=True)
    block = chosen.reshape(-1)[(local // per_block) * width + position // BLOCK]
    cols = t_ids[block, position % BLOCK]
    verdict.settle(source_ids.reshape(-1), local, cols)


def _k_blocks(source: np.ndarray, target: np.ndarray, chunk: int, k: int, limit: float, device: Device,
            dtype: torch.dtype, verdict: _KVerdict) -> None:
    """The block search of every source for its ``k`` nearest within the squared ``limit``."""
    import torch

    where = device.torch
    relative, absolute = _bounds(source.shape[1], dtype)
    src, tgt = tensor(source, where).to(dtype), tensor(target, where).to(dtype)
    per_source_block = min(BLOCK, chunk)
    s_blocks, s_ids = _blocked(src, _tile_order(src, per_source_block), per_source_block)
    t_blocks, t_ids = _blocked(tgt, _tile_order(tgt, BLOCK), BLOCK)
    del src, tgt
    s_low, s_high = s_blocks.amin(1), s_blocks.amax(1)
    t_low, t_high = t_blocks.amin(1), t_blocks.amax(1)
    padding = t_blocks.shape[0] * BLOCK - target.shape[0]
    if padding:  # copies of the last point, moved to infinity once the boxes are taken
        t_blocks[-1, BLOCK - padding:] = math.inf
    room = budget(device)
    itemsize = torch.finfo(dtype).bits // 8
    first_tile = max(1, min(chunk // per_source_block, room // max(1, t_blocks.shape[0] * (3 * itemsize + 2))))
    if limit * (1.0 + 2.0 * relative) + 2.0 * absolute > torch.finfo(dtype).max:
        limit = math.inf  # a bound beyond the search's own range prunes nothing
    margin = (relative, absolute, limit)

    def step(start: int, stop: int) -> None:
        bounds = _lower_bounds(s_low[start:stop], s_high[start:stop], t_low, t_high)
        upper = _upper_bounds(s_low[start:stop], s_high[start:stop], t_low, t_high)
        ceiling, probed = _ceilings(s_blocks[start:stop], t_blocks, upper, k)
        ceiling = torch.clamp(ceiling, max=limit)
        keep = bounds <= ceiling[:, None] * (1.0 + 2.0 * relative) + 2.0 * absolute
        keep.scatter_(1, probed, True)
        for picked, chosen, valid in sub_passes(keep, room, per_source_block * BLOCK * (2 * itemsize + 2)):
            _k_pass(s_blocks[start + picked], s_ids[start + picked], t_blocks, t_ids, chosen, valid, margin, k,
                  verdict)

    tiled(s_blocks.shape[0], first_tile, 1, step, device, "nearest_neighbours")


def _copies(owner: np.ndarray, distinct: int, k: int) -> np.ndarray:
    """``(distinct, k)``: each distinct target's first ``k`` copies (ascending indices), ``-1`` beyond."""
    grouped = np.argsort(owner, kind="stable")
    starts = np.searchsorted(owner[grouped], np.arange(distinct))
    sizes = np.bincount(owner, minlength=distinct)
    slot = np.arange(k)
    where = np.minimum(starts[:, None] + slot[None, :], owner.shape[0] - 1)
    return np.where(slot[None, :] < sizes[:, None], grouped[where], -1)


def _expand(found: np.ndarray, squared: np.ndarray, copies: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct answers turned into the first ``k`` copies by (distance, index)."""
    n = found.shape[0]
    candidates = np.where((found >= 0)[:, :, None], copies[np.maximum(found, 0)], -1).reshape(n, -1)
    near = np.where(candidates >= 0, np.repeat(squared, k, axis=1), np.inf)
    key = np.where(candidates >= 0, candidates, np.iinfo(np.int64).max)
    order = np.argsort(key, axis=1, kind="stable")
    order = np.take_along_axis(order, np.argsort(np.take_along_axis(near, order, axis=1), axis=1,
                                                 kind="stable"), axis=1)[:, :k]
    return np.take_along_axis(candidates, order, axis=1), np.take_along_axis(near, order, axis=1)


def k_nearest(source: np.ndarray, target: np.ndarray, chunk: int, k: int, max_distance: float | None,
              device: Device) -> tuple[np.ndarray, np.ndarray]:
    """Each source's ``k`` nearest targets within ``max_distance``, equal to the NumPy backend's.

    :param source: ``(N, D)`` float32, C-contiguous, finite, N >= 1.
    :param target: ``(M, D)`` float32, C-contiguous, finite, M >= 1.
    :param chunk: at most this many source rows per pass.
    :param k: neighbours per source (1 serves ``max_distance`` with one neighbour).
    :param max_distance: neighbours whose float32 distance exceeds it are ``-1``/``inf``.
    :param device: where to search.
    :returns: int64 and float32 ``(N, k)``, nearest first, equal distances in index order.
    """
    import torch

    targets, sources = distinct_rows(target), distinct_rows(source)
    searched_source = source if sources is None else np.ascontiguousarray(source[sources[0]])
    searched_target = target if targets is None else np.ascontiguousarray(target[targets[0]])
    have = min(k, searched_target.shape[0])
    dtype = torch.float32
    if not _float32_fits(searched_source, searched_target):
        dtype = torch.float64
        if not device.float64:
            device = Device(torch.device("cpu"), True)  # squares beyond float32 on a device without doubles
    limit = search_bound(max_distance)
    gridded = grid_search(searched_source, searched_target, chunk, have, limit) if device.is_cpu else None
    if gridded is None:
        verdict = _KVerdict(searched_source, searched_target, have, device)
        _k_blocks(searched_source, searched_target, chunk, have, limit, device, dtype, verdict)
        found, squared = verdict.result()
    else:
        found, squared, settled = gridded
        rest = np.flatnonzero(~settled)
        if rest.size:  # the sources the grid could not settle: the block search
            verdict = _KVerdict(np.ascontiguousarray(searched_source[rest]), searched_target, have, device)
            _k_blocks(np.ascontiguousarray(searched_source[rest]), searched_target, chunk, have, limit, device,
                    dtype, verdict)
            found[rest], squared[rest] = verdict.result()
    if targets is not None:
        keep, owner = targets
        found, squared = _expand(found, squared, _copies(owner, keep.shape[0], k), k)
    if sources is not None:
        found, squared = found[sources[1]], squared[sources[1]]
    return _finish(found, squared, k, max_distance)


def _finish(found: np.ndarray, squared: np.ndarray, k: int,
            max_distance: float | None) -> tuple[np.ndarray, np.ndarray]:
    """``(N, k)`` int64 and float32: padded with ``-1``/``inf``, neighbours beyond ``max_distance``
    (compared on the float32 distance, in float64) made ``-1``/``inf``."""
    n, have = found.shape
    index = np.full((n, k), -1, dtype=np.int64)
    index[:, :have] = found
    near = np.full((n, k), np.inf, dtype=np.float32)
    near[:, :have] = distances(squared)
    missing = index < 0
    if max_distance is not None:
        missing |= near.astype(np.float64) > max_distance
    index[missing] = -1
    near[missing] = np.inf
    return index, near


# ---- k nearest on the CPU: a uniform grid -------------------------------------------------------------


WIDEST = 3
"""Coordinates a grid serves (a block of 3 x 3 x 5 cells per source at D = 3)."""
MOST_PER_CELL = 4
"""A cell holding more than this many times the mean (plus 8) means clustered points, where the
block search's boxes do better."""
RADII = (1, 2, 3)
"""Blocks of radius ``r`` tried in turn, each for the sources the smaller left unsettled."""
FINE = 2
"""Cells are this many times narrower along the last coordinate, and a block reaches this many
times as many of them along it (``2 FINE r + 1``): the same reach with a run of ``2.5 s`` where
square cells read ``3 s``, so fewer candidates per settled row (measured about a third faster)."""
_ELEMENTS = 1 << 18
"""Candidate pairs per pass (about 15 MB of gathered points and distances; measured a little
faster than twice as many, whose passes spill further out of the caches)."""
_SLACK = 1e-9
GRID_SLACK = 8
"""Candidates asked of ``topk`` beyond ``k``: ties at the ``k``-th place up to this many are settled
here, a row with more is left to the block search."""


class _Grid:
    """Targets sorted by cell (one contiguous ``planes`` tensor per coordinate, their positions
    ``order``), each cell's first position."""

    def __init__(self, target: torch.Tensor, per_cell: float) -> None:
        import torch

        count, dims = target.shape
        self.low = target.amin(0)
        span = target.amax(0) - self.low
        spread = span[span > 0]
        volume = float(torch.prod(spread)) if spread.numel() else 0.0
        side = (volume * per_cell / count) ** (1.0 / max(1, spread.numel())) if volume > 0 else 1.0
        self.size = torch.full((dims,), side, dtype=torch.float64)
        self.size[-1] = side / FINE
        self.cells = torch.floor(span / self.size).to(torch.int64) + 1
        self.strides = torch.ones(dims, dtype=torch.int64)
        for axis in range(dims - 2, -1, -1):
            self.strides[axis] = self.strides[axis + 1] * self.cells[axis + 1]
        self.total = int(torch.prod(self.cells.to(torch.float64)))
        self.usable = 0 < self.total <= 4 * count + 1024  # an elongated or degenerate set: no grid
        if not self.usable:
            return
        ids = self.ids(self.cell_of(target))
        order = torch.argsort(ids, stable=True)  # within a cell, ascending target index
        # One sentinel past the last target, at infinity along every coordinate: a padded slot reads
        # it, so its distance is ``inf`` by the arithmetic itself (no mask pass over the distances).
        self.order = torch.cat([order, order.new_zeros(1)])
        self.planes = [torch.cat([target[:, axis].index_select(0, order), target.new_full((1,), math.inf)])
                       for axis in range(dims)]
        self.starts = torch.zeros(self.total + 1, dtype=torch.int64)  # targets in the cells before each
        torch.cumsum(torch.bincount(ids, minlength=self.total), 0, out=self.starts[1:])
        self.most = int((self.starts[1:] - self.starts[:-1]).max())

    def cell_of(self, points: torch.Tensor) -> torch.Tensor:
        import torch

        position = torch.floor((points - self.low) / self.size).to(torch.int64)
        return torch.minimum(position.clamp(min=0), self.cells - 1)

    def ids(self, cells: torch.Tensor) -> torch.Tensor:
        return (cells * self.strides).sum(1)

    def runs(self, cells: torch.Tensor, radius: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(first, length)``, each ``(n, (2 radius + 1)^(D - 1))``: the runs of sorted targets
        whose cells lie within ``radius`` cells of each source's cell (empty beyond the grid)."""
        import torch

        head, last = cells[:, :-1], cells[:, -1]
        lowest = (last - FINE * radius).clamp(min=0)
        highest = torch.clamp(last + FINE * radius, max=int(self.cells[-1]) - 1)
        firsts, lengths = [], []
        for offset in itertools.product(range(-radius, radius + 1), repeat=cells.shape[1] - 1):
            row = head + torch.tensor(offset, dtype=torch.int64)
            inside = ((row >= 0) & (row < self.cells[:-1])).all(1)
            base = (torch.minimum(row.clamp(min=0), self.cells[:-1] - 1) * self.strides[:-1]).sum(1)
            first = self.starts.index_select(0, base + lowest)
            firsts.append(torch.where(inside, first, 0))
            lengths.append(torch.where(inside, self.starts.index_select(0, base + highest + 1) - first, 0))
        return torch.stack(firsts, 1), torch.stack(lengths, 1)

    def reach(self, points: torch.Tensor, cells: torch.Tensor, radius: int) -> torch.Tensor:
        """Per point the distance to the nearest wall of its block of cells beyond which targets lie
        (``inf`` along a side with no cell beyond), less a rounding allowance."""
        import torch

        across = torch.full((cells.shape[1],), radius, dtype=torch.int64)
        across[-1] = FINE * radius
        below, above = cells - across, cells + across
        lower = points - (self.low + below.to(points.dtype) * self.size)
        upper = (self.low + (above + 1).to(points.dtype) * self.size) - points
        lower.masked_fill_(below <= 0, math.inf)
        upper.masked_fill_(above >= self.cells - 1, math.inf)
        # Minima and maxima across the few coordinates pairwise: exact, and cheaper than a
        # reduction along a dimension of two or three.
        nearest = functools.reduce(torch.minimum, torch.minimum(lower, upper).unbind(1))
        scale = functools.reduce(torch.maximum, points.abs().unbind(1)) + float(self.low.abs().max()) \
            + float((self.size * self.cells).max())
        return nearest - _SLACK * scale


def _exact(rows: torch.Tensor, axes: list[torch.Tensor]) -> torch.Tensor:
    """The contract's squared distances (:func:`spacr_accel_core.exact.exact_squared`'s arithmetic:
    ``d0*d0``, then ``+= dk*dk`` in coordinate order, float64) of each row to its gathered points,
    given one ``(n, w)`` tensor per coordinate (contiguous: every step one vectorised pass), which
    it overwrites: ``(target - source)^2`` is ``(source - target)^2`` bit for bit (a negation is
    exact), so no pass allocates."""
    total = axes[0].sub_(rows[:, :1])
    total.mul_(total)
    for axis in range(1, rows.shape[1]):
        step = axes[axis].sub_(rows[:, axis:axis + 1])
        step.mul_(step)
        total.add_(step)
    return total


def _first(exact: torch.Tensor, columns: Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor],
           k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(chosen, distance, crowded)``: per row the first ``k`` by (distance, column) among
    ``topk``'s nearest (``columns(where, rows)`` gives the target index of entries ``where`` of the
    ``rows``, all rows for ``None``), and the rows whose ties at the ``k``-th place may go beyond
    those (left unsettled). ``topk`` is asked for ``k + 1``, and again for ``k + GRID_SLACK`` by the rows
    whose ``k + 1``-th ties with their ``k``-th. Only the rows with two equal finite distances are
    ordered by index (two stable sorts); ``topk`` ordered the rest."""
    import torch

    values, where = _nearest_of(exact, k + 1)
    crowded = torch.zeros(exact.shape[0], dtype=torch.bool)
    again = torch.nonzero(values[:, k] == values[:, k - 1], as_tuple=True)[0] if values.shape[1] > k else None
    values, where = values[:, :k], where[:, :k]
    near = columns(where, None)
    values, near = _by_index(values, near)
    if again is not None and again.numel():
        more, at = _nearest_of(exact.index_select(0, again), k + GRID_SLACK)
        if more.shape[1] < exact.shape[1]:
            crowded[again] = (more[:, -1] == more[:, k - 1]) & torch.isfinite(more[:, k - 1])
        more, them = _by_index(more, columns(at, again))
        values[again], near[again] = more[:, :k], them[:, :k]
    return near, values, crowded


def _by_index(values: torch.Tensor, near: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows sorted by distance ordered by (distance, index): only the rows with two equal finite
    distances are sorted again."""
    import torch

    tied = torch.nonzero(((values[:, 1:] == values[:, :-1]) & torch.isfinite(values[:, 1:])).any(1),
                         as_tuple=True)[0]
    if tied.numel():
        some, them = values[tied], near[tied]
        order = torch.argsort(them, dim=1, stable=True)
        order = order.gather(1, torch.argsort(some.gather(1, order), dim=1, stable=True))
        values[tied], near[tied] = some.gather(1, order), them.gather(1, order)
    return values, near


def _nearest_of(exact: torch.Tensor, ask: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``topk``'s ``ask`` smallest per row (the whole row where it is narrower), nearest first."""
    import torch

    return torch.topk(exact, min(exact.shape[1], ask), dim=1, largest=False, sorted=True)


def _grid_pass(grid: _Grid, rows: torch.Tensor, runs: tuple[torch.Tensor, torch.Tensor],
          k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(found, squared, crowded)`` of a few sources from the ``runs`` (first position, length)
    of their block of cells, each run read as its pass's longest run of targets (``crowded``: the
    rows whose ties at the ``k``-th place may reach beyond the candidates)."""
    import torch

    first, length = runs
    n, count = first.shape
    span = max(-(-k // count), int(length.max()))
    slot = torch.arange(span, dtype=torch.int64)
    sentinel = grid.order.shape[0] - 1  # a slot beyond its run reads the target at infinity
    position = torch.where(slot < length[:, :, None], first[:, :, None] + slot, sentinel).view(n, -1)
    flat = position.view(-1)
    exact = _exact(rows, [plane.index_select(0, flat).view(position.shape) for plane in grid.planes])

    def columns(where: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        at = (position if rows is None else position.index_select(0, rows)).gather(1, where)
        return grid.order.index_select(0, at.view(-1)).view(at.shape)

    chosen, distance, crowded = _first(exact, columns, k)
    return torch.where(torch.isinf(distance), -1, chosen), distance, crowded


def _in_blocks(grid: _Grid, points: torch.Tensor, cells: torch.Tensor, pending: torch.Tensor, radius: int,
               k: int, limit: float, chunk: int, out: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Search the ``pending`` sources in their blocks of ``radius``, shortest longest run first
    (then by cell: each pass is dense and gathers nearby targets), into ``out``; returns the
    sources left unsettled."""
    import torch

    mine = cells.index_select(0, pending)
    first, length = grid.runs(mine, radius)
    longest = length.amax(1)
    order = torch.argsort(longest * (grid.total + 1) + grid.ids(mine))
    pending, first, length, longest, mine = (part.index_select(0, order)
                                             for part in (pending, first, length, longest, mine))
    rows = points.index_select(0, pending)
    total, start, answers = pending.shape[0], 0, []
    while start < total:
        widest = int(longest[min(total, start + chunk) - 1]) * first.shape[1]
        stop = min(total, start + max(1, min(chunk, _ELEMENTS // max(k, widest))))
        answers.append(_grid_pass(grid, rows[start:stop], (first[start:stop], length[start:stop]), k))
        start = stop
    found, squared, crowded = (torch.cat(part) for part in zip(*answers, strict=True))
    reach = grid.reach(rows, mine, radius)  # once for the whole radius: a few vectorised passes
    settled = (reach > 0) & (torch.clamp(squared[:, -1], max=limit) < reach * reach) & ~crowded
    for whole, part in zip(out, (found, squared, settled), strict=True):
        whole.index_copy_(0, pending, part)
    return pending[~settled]


def grid_search(source: np.ndarray, target: np.ndarray, chunk: int, k: int,
                limit: float) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(found, squared, settled)``: each source's ``k`` nearest by the grid where that is provably
    exact (``settled``), or ``None`` where the points do not suit a grid.

    :param source: ``(N, D)`` float32, finite, ``D <= WIDEST``.
    :param target: ``(M, D)`` float32, finite, distinct rows.
    :param chunk: at most this many source rows per pass.
    :param k: places, at most ``M``.
    :param limit: the squared padded ``max_distance`` (``inf`` for none).
    :returns: ``(N, k)`` int64 positions in ``target`` and float64 exact squared distances
        (``-1``/``inf`` missing), and a boolean ``(N,)`` mask of the rows settled here.
    """
    import torch

    if source.shape[1] > WIDEST or target.shape[0] < 64:
        return None
    per_cell = 1.25 + k / 4  # the k-th nearest within about s: most sources settle in their first block
    grid = _Grid(torch.from_numpy(target.astype(np.float64)), per_cell)  # a fresh, writable copy
    if not grid.usable or grid.most > MOST_PER_CELL * per_cell + 8:
        return None
    points = torch.from_numpy(source.astype(np.float64))
    n = source.shape[0]
    out = (torch.full((n, k), -1, dtype=torch.int64), torch.full((n, k), math.inf, dtype=torch.float64),
           torch.zeros(n, dtype=torch.bool))
    cells = grid.cell_of(points)
    pending = torch.arange(n)
    for radius in RADII:
        pending = _in_blocks(grid, points, cells, pending, radius, k, limit, chunk, out)
        if not pending.numel():
            break
    return out[0].numpy(), out[1].numpy(), out[2].numpy()


# ---- Hamming: an exact half-precision matrix product -------------------------------------------------


HAMMING_SLACK = 8
"""Targets asked of ``topk`` beyond ``k``: ties at the ``k``-th place up to this many are settled
from ``topk``'s own answer."""
GROUPS = 16
"""Column groups of the CPU's ranking (:func:`_ranked_by_groups`): ``topk`` over a sixteenth."""
_FLOOR_ROWS = 16


_WHOLE = 1 << 17
"""Bytes per piece of a float32 product: more than any descriptor served (the counts stay far below
``2**24``, float32's exact integers), so a descriptor is one product."""


def _plan(device: Device) -> tuple[torch.dtype, int]:
    """``(dtype, bytes per piece)``: the type this device multiplies fastest (``uint8``: the
    quantized product of :class:`_Signs`), and how many bytes of a descriptor one exact product of
    it may cover (its scores written as bfloat16, float16 or float32 hold ``+-8 x bytes``)."""
    import torch

    if device.torch.type == "cpu":
        return _cpu_plan()
    if device.torch.type == "cuda":
        return torch.bfloat16, 32
    return torch.float16, 256


def _cpu_feature(name: str) -> bool:
    """One of torch's own CPU feature tests (``torch.cpu._is_vnni_supported`` ...); ``False``
    where this torch has none (older releases, other architectures)."""
    import torch

    test = getattr(torch.cpu, name, None)
    try:
        return bool(test()) if callable(test) else False
    except (RuntimeError, AttributeError):
        return False


@functools.cache
def _cpu_plan() -> tuple[torch.dtype, int]:
    """The CPU's product, chosen once by what it runs natively (see the module's notes)."""
    import torch

    if _cpu_feature("_is_amx_tile_supported"):
        return torch.bfloat16, 32
    if _cpu_feature("_is_vnni_supported") and _quantized_product_works():
        return torch.uint8, 32
    if _cpu_feature("_is_avx512_bf16_supported"):
        return torch.bfloat16, 32
    return torch.float32, _WHOLE


class _Signs:
    """A piece of the targets for the quantized product: their signs ``2 b - 1`` as int8, packed
    by oneDNN once for every pass, with the per-target scale and bias that turn the product of the
    sources' ``0/1`` bits into ``8 B - 2 hamming``: with ``a`` a source's bits and ``t`` a target's
    signs, ``a.t = 2 a.b - |a|`` and ``8 B - 2 hamming = 2 a.t + 8 B - 2 |b|``."""

    def __init__(self, signs: torch.Tensor) -> None:
        import torch

        rows, width = signs.shape
        self.packed = torch.ops.onednn.qlinear_prepack(signs.to(torch.int8).contiguous(), None)
        self.scale = torch.full((rows,), 2.0, dtype=torch.float32)
        self.zero = torch.zeros(rows, dtype=torch.int64)
        ones = (signs > 0).sum(1, dtype=torch.int32)
        self.bias = (width - 2 * ones).to(torch.float32)

    def times(self, bits: torch.Tensor) -> torch.Tensor:
        """``(rows, targets)`` bfloat16 scores of ``bits`` (uint8 ``0/1``, one row per source)."""
        import torch

        scores: torch.Tensor = torch.ops.onednn.qlinear_pointwise(
            bits.contiguous(), 1.0, 0, self.packed, self.scale, self.zero, self.bias, 1.0, 0, torch.bfloat16,
            "none", [], "")
        return scores


def _quantized_product_works() -> bool:
    """Whether this torch has oneDNN's quantized linear and it gives the exact scores (a private
    operator: a build without it, or one that computes it otherwise, gets the float32 plan)."""
    import torch

    try:
        generator = torch.Generator().manual_seed(7)
        source = torch.randint(0, 256, (40, 32), dtype=torch.uint8, generator=generator)
        target = torch.randint(0, 256, (24, 32), dtype=torch.uint8, generator=generator)
        target[0] = 255  # the extremes: all ones (every bias at its least) and all zeros
        target[1] = 0
        source[0] = 255
        got = _scores(_operands(source, 32, torch.uint8), _operands(target, 32, torch.uint8, right=True), 0, 40)
        signs = [_operands(part, 32, torch.float32)[0] for part in (source, target)]
        return got.dtype == torch.bfloat16 and bool(torch.equal(got.to(torch.float32), signs[0] @ signs[1].t()))
    except Exception:  # any failure of a private operator means: not on this build
        return False


def _operands(bits: torch.Tensor, piece: int, dtype: torch.dtype, *, right: bool = False) -> list[Any]:
    """Per piece of ``piece`` bytes: the ``(rows, 8 x bytes)`` signs ``2 bit - 1`` in ``dtype``,
    each byte's eight signs read from a 256-row table (one gather, not eight shifts). For the
    quantized product (``uint8``) the sources are the bits ``0/1`` and the targets (``right``)
    :class:`_Signs`."""
    import torch

    shifts = torch.arange(8, dtype=torch.int64, device=bits.device)
    ones = (torch.arange(256, device=bits.device)[:, None] >> shifts) & 1
    quantized = dtype == torch.uint8
    table = (ones if quantized and not right else ones * 2 - 1).to(torch.int8 if quantized and right else dtype)
    out: list[Any] = []
    for start in range(0, bits.shape[1], piece):
        part = bits[:, start:start + piece]
        unpacked = table.index_select(0, part.reshape(-1).to(torch.int64)).view(part.shape[0], -1)
        out.append(_Signs(unpacked) if quantized and right else unpacked)
    return out


def _product(lhs: torch.Tensor, rhs: Any) -> torch.Tensor:
    """One piece's exact scores; the targets' signs are row-major, multiplied as their transpose
    (a view, no copy)."""
    if isinstance(rhs, _Signs):
        return rhs.times(lhs)
    product: torch.Tensor = lhs @ rhs.t()
    return product


def _scores(left: list[torch.Tensor], right: list[Any], start: int, stop: int) -> torch.Tensor:
    """``8 B - 2 hamming`` for sources ``start:stop`` against every target (exact integers)."""
    import torch

    total = _product(left[0][start:stop], right[0])
    if len(left) == 1:
        return total
    total = total.to(torch.float32)
    for lhs, rhs in zip(left[1:], right[1:], strict=True):
        total += _product(lhs[start:stop], rhs).to(torch.float32)
    return total


def _keys(values: torch.Tensor, columns: torch.Tensor, m: int) -> torch.Tensor:
    """Descending score, then ascending index: one unique int64 key per entry, smaller first."""
    import torch

    return (values.to(torch.int64).neg() + (1 << 20)) * m + columns


def _settle_crowded(scores: torch.Tensor, key: torch.Tensor, crowded: torch.Tensor, have: int) -> None:
    """Rows whose ties may reach beyond their candidates: their first ``have`` keys over every
    target, written into ``key`` (padded with the largest key)."""
    import torch

    if not bool(crowded.any()):
        return
    m = scores.shape[1]
    rows_left = torch.nonzero(crowded, as_tuple=True)[0]
    full = _keys(scores[rows_left], torch.arange(m, device=scores.device), m)
    best = torch.topk(full, have, dim=1, largest=False, sorted=True).values
    padded = torch.full((rows_left.shape[0], key.shape[1]), torch.iinfo(torch.int64).max,
                        dtype=torch.int64, device=scores.device)
    padded[:, :have] = best
    key[rows_left] = padded


def _ranked(scores: torch.Tensor, have: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row the ``have`` best targets, by score (larger first), then the lower index."""
    import torch

    m = scores.shape[1]
    ask = min(m, have + HAMMING_SLACK)
    values, columns = torch.topk(scores, ask, dim=1, largest=True, sorted=True)
    key = _keys(values, columns, m)
    if ask < m:
        _settle_crowded(scores, key, values[:, -1] == values[:, have - 1], have)
    key = torch.sort(key, dim=1).values[:, :have]
    return key % m, (1 << 20) - key // m


def _ranked_by_groups(scores: torch.Tensor, have: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_ranked` for the CPU, where ``topk`` over whole rows costs more than the product.

    The columns are cut into :data:`GROUPS` interleaved groups (column ``g w + j`` in group ``j``);
    the maximum of each group is an elementwise maximum of contiguous slices, and ``topk`` runs
    over those ``w`` maxima only. The entries of the ``have + HAMMING_SLACK`` best groups (and the columns
    beyond ``GROUPS w``) are ranked exactly; every unchosen group's maximum is at most the last
    chosen one's, ``bound``, so a row whose ``have``-th best is above ``bound`` is settled, and a
    row with it equal (ties may hide in an unchosen group) is ranked over all its targets.

    The maxima are taken over the scores' bits read as signed integers (no conversion pass; the
    CPU reduces int16 several times faster than bfloat16): that keeps the order of every score
    ``>= 0`` and puts every negative score below them, so the groups are exact wherever ``bound``
    is ``>= 0``; a row whose ``bound`` is negative (its ``have + HAMMING_SLACK`` best groups are more than
    half the bits away) is ranked over all its targets.
    """
    import torch

    rows, m = scores.shape
    w = m // GROUPS
    ask = have + HAMMING_SLACK
    if w < 2 * ask:
        return _ranked(scores, have)
    bits = scores.view(torch.int16 if scores.element_size() == 2 else torch.int32)
    maxima = bits[:, :GROUPS * w].view(rows, GROUPS, w).amax(1)
    top, groups = torch.topk(maxima, ask, dim=1, largest=True, sorted=True)
    bound = top[:, -1].view(scores.dtype).to(torch.int64)
    spread = torch.arange(GROUPS, device=scores.device) * w
    columns = (groups[:, :, None] + spread).reshape(rows, -1)
    if GROUPS * w < m:
        beyond = torch.arange(GROUPS * w, m, device=scores.device)
        columns = torch.cat([columns, beyond.expand(rows, -1)], dim=1)
    key = torch.topk(_keys(scores.gather(1, columns), columns, m), have, dim=1, largest=False).values
    kth = (1 << 20) - key[:, -1] // m
    _settle_crowded(scores, key, (kth <= bound) | (bound < 0), have)
    return key % m, (1 << 20) - key // m


def hamming(source: np.ndarray, target: np.ndarray, chunk: int, k: int, max_distance: float | None,
            device: Device) -> tuple[np.ndarray, np.ndarray]:
    """Each descriptor's ``k`` nearest by differing bits, exactly, lowest index among equals.

    :param source: uint8 ``(N, B)`` rows of packed bits, N >= 1.
    :param target: uint8 ``(M, B)``, M >= 1.
    :param chunk: at most this many source rows per pass.
    :param k: neighbours per source row.
    :param max_distance: neighbours with more differing bits are ``-1``/``inf`` (decided on the
        device, before anything is copied back); ``None``: no limit.
    :param device: where to compute.
    :returns: int64 and float32 ``(N, k)`` (exact integer counts), nearest first.
    :raises BackendDeclined: descriptors so wide that a count outgrows the device's exact range.
    """
    n, width = source.shape
    m = target.shape[0]
    if 8 * width >= 1 << 20:
        raise BackendDeclined(f"descriptors of {width} bytes: counts beyond the exact range of this search")
    dtype, piece = _plan(device)
    where = device.torch
    s_bits, t_bits = tensor(source, where), tensor(target, where)
    left, right = _operands(s_bits, piece, dtype), _operands(t_bits, piece, dtype, right=True)
    have = min(k, m)
    index = np.full((n, k), -1, dtype=np.int64)
    found = np.full((n, k), np.inf, dtype=np.float32)
    limit = None if max_distance is None or max_distance >= 8 * width else math.floor(max_distance)
    per_row = m * (4 + 8 + 2) + 64 * (have + HAMMING_SLACK)
    rows = max(1, min(chunk, budget(device) // per_row))

    rank = _ranked_by_groups if device.is_cpu else _ranked

    def step(start: int, stop: int) -> None:
        columns, score = rank(_scores(left, right, start, stop), have)
        count = (8 * width - score) // 2  # the product is 8 B - 2 hamming: always even
        if limit is not None:
            far = count > limit  # integer counts: ``count > max_distance`` is ``count > floor(max_distance)``
            columns = columns.masked_fill(far, -1)
            count = count.masked_fill(far, -1)
        host_columns, host_count = columns.cpu().numpy(), count.cpu().numpy()
        index[start:stop, :have] = host_columns
        found[start:stop, :have] = np.where(host_columns < 0, np.inf, host_count).astype(np.float32)

    tiled(n, rows, min(rows, _FLOOR_ROWS), step, device, "nearest_neighbours")
    return index, found

