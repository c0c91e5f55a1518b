"""Registration's fields as a backend receives them: checked finite, each field's variation known,
and each moved into the range where its float64 transforms neither underflow nor overflow."""

from __future__ import annotations

import numpy as np

from ..contract._registration import repeats_read_once
from ..kit._tiling import cpu_pool, cpu_threads, settled

_IN_RANGE = 2.0 ** 256
"""A field whose largest magnitude lies within ``[2**-256, 2**256]`` is transformed as it is: its
transforms' product stays inside float64's normal range for any field up to ``2**40`` pixels."""


def finite_and_in_range(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Both stacks checked finite, each field's variation, and each field moved into the transform's range.

    WHY. The surface is the product of the two transforms divided by its own magnitude, which does
    not depend on either field's scale; but computed in float64 a field of ``1e-200`` makes the
    product underflow to zero (a varying pair reported as "no variation") and one of ``1e200``
    overflow it (NaN). A field whose largest magnitude lies outside :data:`_IN_RANGE` is multiplied
    by the power of two that brings it into ``[0.5, 1)``: exact, so its surface is the one its
    value defines, and a field inside the range is handed over untouched (the same bits as ever).

    :param first: the reference stack ``(..., H, W)``, float32 or float64 (a broadcast stays one).
    :param second: the stack registered against it, the same shape and dtype.
    :returns: ``(first, second, varies)``, ``varies`` flat ``(B,)``: whether both fields of each
        pair hold more than one value.
    :raises ValueError: a field holds NaN or an infinity.
    """
    lead = first.shape[:-2]
    count = int(np.prod(lead, dtype=np.int64))
    varies: np.ndarray = np.ones(lead, dtype=bool)
    fields = []
    for name, data in (("first", first), ("second", second)):
        if count:
            # Two reductions answer both questions: NaN and inf reach the minimum or the maximum. Read
            # once per distinct field: a reference cycle broadcast against every cycle is one field.
            seen = repeats_read_once(data)
            low, high = field_ranges(seen)
            if not (np.isfinite(low).all() and np.isfinite(high).all()):
                raise ValueError(f"{name} holds NaN or infinite pixels; registration needs finite fields")
            varies = varies & (high > low)
            fields.append(_in_range(data, seen, np.maximum(np.abs(low), np.abs(high)).astype(np.float64)))
        else:
            fields.append(data)
    return fields[0], fields[1], np.broadcast_to(varies, lead).reshape(count)


def _in_range(data: np.ndarray, seen: np.ndarray, magnitude: np.ndarray) -> np.ndarray:
    """``data`` with each distinct field (``seen``) whose largest magnitude lies outside
    :data:`_IN_RANGE` multiplied by the power of two that brings it into ``[0.5, 1)``; ``data``
    itself when none does."""
    outside = (magnitude > _IN_RANGE) | ((magnitude < 1 / _IN_RANGE) & (magnitude > 0))
    if not outside.any():
        return data
    powers = np.where(outside, -np.frexp(magnitude)[1], 0)
    return np.broadcast_to(np.ldexp(seen, powers[..., None, None]).astype(data.dtype, copy=False), data.shape)


def field_ranges(seen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each field's minimum and maximum (over the last two axes), the rows read in bands shared
    between the threads: on 44 fields of 1480 x 1480 float32 the two reductions took 49 ms on one
    thread and 24 ms on two, of a registration whose transforms take about 1.8 s. A NaN anywhere
    reaches both (NumPy's ``minimum`` and ``maximum`` propagate it).

    The bands are handed to the kit's pool from here (the first read in the calling thread), so the
    fields never go into the kit and back.

    :param seen: ``(..., H, W)`` with non-empty fields.
    :returns: two arrays of the leading shape.
    """
    height = seen.shape[-2]
    parts = min(height, cpu_threads()) if seen.size >= _SPLIT_PIXELS else 1
    edges = np.linspace(0, height, parts + 1).astype(int)
    bands = [slice(int(edges[i]), int(edges[i + 1])) for i in range(parts)]
    pool = cpu_pool() if parts > 1 else None
    if pool is None:
        ranges = [_band_range(seen, rows) for rows in bands]
    else:
        futures = [pool.submit(_band_range, seen, rows) for rows in bands[1:]]
        with settled(futures):
            first = _band_range(seen, bands[0])
        ranges = [first, *(future.result() for future in futures)]
    return np.minimum.reduce([band[0] for band in ranges]), np.maximum.reduce([band[1] for band in ranges])


_SPLIT_PIXELS = 1 << 18
"""Below this many pixels the two reductions take under ~0.1 ms: a thread hand-off would not pay."""


def _band_range(seen: np.ndarray, rows: slice) -> tuple[np.ndarray, np.ndarray]:
    band = seen[..., rows, :]
    return band.min(axis=(-2, -1)), band.max(axis=(-2, -1))
