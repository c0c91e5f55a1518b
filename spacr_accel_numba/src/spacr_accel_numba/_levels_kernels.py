# mypy: disallow-untyped-defs=False, disallow-untyped-calls=False
"""The levels family's compiled loops and their drivers: a float32 field's order statistics by radix
selection on its bits, in two threaded histogram passes (no copy, no partition), and the level set's
divide and clip in threaded bands. Imported by the hooks of :mod:`._levels` once the kernel is ready
(it imports numba, ~0.4 s), and by the warm-up.

Measured against ``np.percentile`` (which copies the field and partitions the copy): see
``benchmarks/bench_levels.py``. A float64 field is declined (the floor partitions it).

THE KEY. A float32's bits made into an unsigned integer that sorts as the floats do: a positive
float's sign bit set, a negative float's bits all flipped (``-0.0`` then sorts just below ``+0.0``,
which only makes either zero a valid answer for a rank among zeros). NaN is counted, not keyed.

PASS ONE counts each key's top 16 bits (65,536 bins, a quarter of a MiB per thread: in cache); the
counts say which bin holds each rank. PASS TWO counts the low 16 bits of the keys in those bins
alone, which gives each rank's key, and so its float, exactly. Each pass is split between threads
by ranges of pixels, each with its own counts, summed after.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from spacr_accel_core import BackendDeclined
from spacr_accel_core.toolkit import cpu_threads, run_parts

from . import _locator  # noqa: F401  (before any njit: these kernels' cache stamped with every file they come from)

BINS = 65536
"""16 bits of the key per pass."""


@numba.njit(nogil=True, cache=True, inline="always")
def _key(bits):
    word = np.uint32(bits)
    if word >> np.uint32(31):
        return ~word
    return word | np.uint32(0x80000000)


@numba.njit(nogil=True, cache=True, inline="always")
def _not_nan(word):
    return (word & np.uint32(0x7FFFFFFF)) <= np.uint32(0x7F800000)


@numba.njit(nogil=True, cache=True)
def count_high(bits, start, stop, counts, nans, part):
    """Pass one over ``bits[start:stop]`` (a field's float32 bits as uint32): ``counts`` (this part's) the top
    16 bits of each key, ``nans[part]`` the NaN seen (skipped).

    Neighbouring pixels of a camera field mostly share a bin, and each count then waits for the one
    before it to be stored: the even and the odd pixels go to two histograms, summed at the end
    (2.1 ms a 1480 x 1480 field on one thread, against 3.0-4.8 for one histogram)."""
    seen = 0
    part_bits = bits[start:stop]  # indices from zero: no negative-index wrap to check in the loop
    odd = np.zeros(counts.size, dtype=counts.dtype)
    pairs = part_bits.size // 2
    for j in range(pairs):
        even_word, odd_word = part_bits[2 * j], part_bits[2 * j + 1]
        if _not_nan(even_word):
            counts[_key(even_word) >> np.uint32(16)] += 1
        else:
            seen += 1
        if _not_nan(odd_word):
            odd[_key(odd_word) >> np.uint32(16)] += 1
        else:
            seen += 1
    for i in range(2 * pairs, part_bits.size):
        if _not_nan(part_bits[i]):
            counts[_key(part_bits[i]) >> np.uint32(16)] += 1
        else:
            seen += 1
    for bin_ in range(counts.size):
        counts[bin_] += odd[bin_]
    nans[part] = seen


@numba.njit(nogil=True, cache=True)
def count_low(bits, start, stop, slot_of, counts):
    """Pass two: ``counts[slot]`` (this part's) the low 16 bits of each key whose top 16 bits are a wanted
    bin (``slot_of[bin] >= 0``); NaN skipped."""
    for word in bits[start:stop]:
        if not _not_nan(word):
            continue
        key = _key(word)
        slot = slot_of[key >> np.uint32(16)]
        if slot >= 0:
            counts[slot, key & np.uint32(0xFFFF)] += 1


@numba.njit(nogil=True, cache=True, error_model="numpy")  # x / 0 is IEEE (inf or NaN), not an exception
def rescale_row(row, into, by, lo, hi, start, stop):
    """``into[i] = clip(row[i] / by, lo, hi)`` for ``i`` in ``[start, stop)`` of one field, NumPy's
    clip: ``lo if y < lo else y`` is its ``y >= lo or isnan(y)`` test read the other way round (NaN
    and a pixel equal to a bound are kept), then the same against ``hi``; as selects the compiler
    vectorises. The driver fills a field with a NaN bound itself."""
    # Slices indexed from zero: with ``row[i]`` for ``i`` from ``start`` numba checks each index for
    # a negative wrap, and the loop is not vectorised (8.1 ms a 1480 x 1480 field, against 2.0).
    source, target = row[start:stop], into[start:stop]
    if by == 1:  # x / 1 is x: the division skipped, exactly (``* one`` widens a float32 pixel exactly)
        one = lo - lo + 1
        for i in range(source.size):
            y = source[i] * one
            y = lo if y < lo else y
            target[i] = hi if y > hi else y
    else:
        for i in range(source.size):
            y = source[i] / by
            y = lo if y < lo else y
            target[i] = hi if y > hi else y


@numba.njit(nogil=True, cache=True)
def locate(counts, ranks, wanted, before):
    """For each rank (increasing), the bin holding it in the parts' summed ``counts`` and how many
    keys lie in the bins below it: one walk of the bins."""
    below = 0
    j = 0
    for bin_ in range(counts.shape[1]):
        here = 0
        for part in range(counts.shape[0]):
            here += counts[part, bin_]
        while j < ranks.size and ranks[j] < below + here:
            wanted[j] = bin_
            before[j] = below
            j += 1
        below += here
        if j == ranks.size:
            return


@numba.njit(nogil=True, cache=True)
def locate_low(counts, slots, residual, low):
    """For each rank, the low 16 bits of its key: the bin of its slot in the parts' summed
    ``counts`` where the running count first passes its residual rank."""
    for j in range(slots.size):
        running = 0
        for bin_ in range(counts.shape[2]):
            for part in range(counts.shape[0]):
                running += counts[part, slots[j], bin_]
            if residual[j] < running:
                low[j] = bin_
                break


# ---- the drivers ----------------------------------------------------------------------------------


_F32 = np.dtype(np.float32)
_SPLIT = 1 << 18
"""Pixels from which a field's passes are split between threads (below, a hand-off costs more)."""

_RESCALED: frozenset[tuple[np.dtype[Any], np.dtype[Any]]] = frozenset({
    (np.dtype(np.float32), np.dtype(np.float32)), (np.dtype(np.float32), np.dtype(np.float64)),
                       (np.dtype(np.float64), np.dtype(np.float64))})


def _bands(count: int) -> list[tuple[int, int]]:
    parts = min(cpu_threads(), max(1, count // _SPLIT))
    edges = np.linspace(0, count, parts + 1).astype(np.int64)
    return [(int(edges[i]), int(edges[i + 1])) for i in range(parts)]


def _select(bits: np.ndarray, ranks: np.ndarray, bands: list[tuple[int, int]]) -> np.ndarray:
    """The float32 bits of one field's ranks, or NaN's where the field holds NaN."""
    bins = BINS
    counts = np.zeros((len(bands), bins), dtype=np.int32)  # a part holds fewer than 2**31 pixels
    nans = np.zeros(len(bands), dtype=np.int64)
    run_parts(count_high, [(bits, start, stop, counts[part], nans, part) for part, (start, stop) in
                           enumerate(bands)])
    if nans.any():
        return np.full(ranks.shape, np.float32(np.nan)).view(np.uint32)
    wanted = np.empty(ranks.size, dtype=np.int64)
    before = np.empty(ranks.size, dtype=np.int64)
    locate(counts, ranks, wanted, before)
    chosen = np.unique(wanted)
    slot_of = np.full(bins, -1, dtype=np.int32)
    slot_of[chosen] = np.arange(chosen.size, dtype=np.int32)
    low = np.zeros((len(bands), chosen.size, bins), dtype=np.int32)
    run_parts(count_low, [(bits, start, stop, slot_of, low[part]) for part, (start, stop) in
                          enumerate(bands)])
    found = np.empty(ranks.size, dtype=np.int64)
    locate_low(low, slot_of[wanted].astype(np.int64), ranks - before, found)
    keys = (wanted.astype(np.uint32) << np.uint32(16)) | found.astype(np.uint32)
    positive = (keys >> np.uint32(31)).astype(bool)
    return np.where(positive, keys ^ np.uint32(0x80000000), ~keys).astype(np.uint32)


def order_statistics(stack: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """``(F, R)`` float32: the ranks of each field of a float32 ``(F, H, W)`` stack."""
    if stack.dtype != _F32:
        raise BackendDeclined(f"numba selects in float32 fields, not {stack.dtype} (the floor partitions them)")
    count = stack.shape[1] * stack.shape[2]
    if count >= 2**31:
        raise BackendDeclined("a field of 2**31 pixels or more (its counts would overflow)")
    bits = np.ascontiguousarray(stack).reshape(stack.shape[0], count).view(np.uint32)
    bands = _bands(count)
    out = np.empty((stack.shape[0], ranks.size), dtype=np.uint32)
    for field in range(stack.shape[0]):
        out[field] = _select(bits[field], ranks, bands)
    return out.view(_F32)


def rescale_fields(stack: np.ndarray, scale: np.ndarray, low: np.ndarray,
                   high: np.ndarray) -> np.ndarray:
    """Each field divided and clipped, in threaded bands of the flat stack."""
    if (stack.dtype, low.dtype) not in _RESCALED:
        raise BackendDeclined(f"numba rescales float32 or float64 fields into float32 or float64, not "
                              f"{stack.dtype} into {low.dtype}")
    if np.isinf(low).any() or np.isinf(high).any() or not np.isfinite(scale).all():
        # an infinite bound or scale meets an infinite pixel in inf - inf, which the compiled
        # clip does not order as NumPy's does: the floor's np.clip answers
        raise BackendDeclined("numba rescales with finite bounds and scales only")
    fields, count = stack.shape[0], stack.shape[1] * stack.shape[2]
    source = np.ascontiguousarray(stack).reshape(fields, count)
    out = np.empty((fields, count), dtype=low.dtype)
    parts: list[tuple[Any, ...]] = []
    for field in range(fields):
        lo, hi = low[field], high[field]
        if np.isnan(lo) or np.isnan(hi):
            out[field] = lo if np.isnan(lo) else hi  # NumPy's clip: a NaN bound fills the field
            continue
        parts.extend((source[field], out[field], scale[field], lo, hi, start, stop) for start, stop in _bands(count))
    run_parts(rescale_row, parts)
    return out.reshape(stack.shape)


def warm_levels() -> object:
    """Compile (or load) every kernel on inputs of exactly the driver's types: for a warm-up."""
    stack = np.arange(16, dtype=np.float32).reshape(1, 4, 4)
    stack.flags.writeable = False
    ranks = np.array([0, 5], dtype=np.int64)
    ranks.flags.writeable = False  # the core hands the ranks read-only too: that signature, not another
    order_statistics(stack, ranks)
    for source, target in sorted(_RESCALED, key=str):
        field = stack.astype(source)
        field.flags.writeable = False
        bounds = [np.ones(1, dtype=target) for _ in range(3)]
        for bound in bounds:
            bound.flags.writeable = False
        rescale_fields(field, *bounds)
    return stack
