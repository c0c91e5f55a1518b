"""The levels family on numba: a float32 field's order statistics by two threaded histogram passes
over its bits (no copy, no partition), and the level set's divide and clip in threaded bands.

Measured against ``np.percentile`` (which copies the field and partitions the copy): see
``benchmarks/bench_levels.py``. A float64 field is declined (the floor partitions it).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from spacr_accel_core import BackendDeclined
from spacr_accel_core.toolkit import cpu_threads, run_parts

_F32 = np.dtype(np.float32)
_SPLIT = 1 << 18
"""Pixels from which a field's passes are split between threads (below, a hand-off costs more)."""

_RESCALED: frozenset[tuple[np.dtype[Any], np.dtype[Any]]] = frozenset({
    (np.dtype(np.float32), np.dtype(np.float32)), (np.dtype(np.float32), np.dtype(np.float64)),
                       (np.dtype(np.float64), np.dtype(np.float64))})


def kernels() -> ModuleType:
    """The compiled loops (imports numba and loads or compiles them on first use)."""
    from . import _levels_kernels

    return _levels_kernels


def _bands(count: int) -> list[tuple[int, int]]:
    parts = min(cpu_threads(), max(1, count // _SPLIT))
    edges = np.linspace(0, count, parts + 1).astype(np.int64)
    return [(int(edges[i]), int(edges[i + 1])) for i in range(parts)]


def _select(compiled: ModuleType, bits: np.ndarray, ranks: np.ndarray, bands: list[tuple[int, int]]) -> np.ndarray:
    """The float32 bits of one field's ranks, or NaN's where the field holds NaN."""
    bins = compiled.BINS
    counts = np.zeros((len(bands), bins), dtype=np.int32)  # a part holds fewer than 2**31 pixels
    nans = np.zeros(len(bands), dtype=np.int64)
    run_parts(compiled.count_high, [(bits, start, stop, counts[part], nans, part) for part, (start, stop) in
                                    enumerate(bands)])
    if nans.any():
        return np.full(ranks.shape, np.float32(np.nan)).view(np.uint32)
    wanted = np.empty(ranks.size, dtype=np.int64)
    before = np.empty(ranks.size, dtype=np.int64)
    compiled.locate(counts, ranks, wanted, before)
    chosen = np.unique(wanted)
    slot_of = np.full(bins, -1, dtype=np.int32)
    slot_of[chosen] = np.arange(chosen.size, dtype=np.int32)
    low = np.zeros((len(bands), chosen.size, bins), dtype=np.int32)
    run_parts(compiled.count_low, [(bits, start, stop, slot_of, low[part]) for part, (start, stop) in
                                   enumerate(bands)])
    found = np.empty(ranks.size, dtype=np.int64)
    compiled.locate_low(low, slot_of[wanted].astype(np.int64), ranks - before, found)
    keys = (wanted.astype(np.uint32) << np.uint32(16)) | found.astype(np.uint32)
    positive = (keys >> np.uint32(31)).astype(bool)
    return np.where(positive, keys ^ np.uint32(0x80000000), ~keys).astype(np.uint32)


def order_statistics(compiled: ModuleType, stack: np.ndarray, ranks: np.ndarray) -> np.ndarray:
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
        out[field] = _select(compiled, bits[field], ranks, bands)
    return out.view(_F32)


def rescale_fields(compiled: ModuleType, stack: np.ndarray, scale: np.ndarray, low: np.ndarray,
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
    run_parts(compiled.rescale_row, parts)
    return out.reshape(stack.shape)


def warm_job() -> object:
    """Compile (or load) every kernel on inputs of exactly the driver's types: for a warm-up."""
    compiled = kernels()
    stack = np.arange(16, dtype=np.float32).reshape(1, 4, 4)
    stack.flags.writeable = False
    ranks = np.array([0, 5], dtype=np.int64)
    ranks.flags.writeable = False  # the core hands the ranks read-only too: that signature, not another
    order_statistics(compiled, stack, ranks)
    for source, target in sorted(_RESCALED, key=str):
        field = stack.astype(source)
        field.flags.writeable = False
        bounds = [np.ones(1, dtype=target) for _ in range(3)]
        for bound in bounds:
            bound.flags.writeable = False
        rescale_fields(compiled, field, *bounds)
    return compiled
