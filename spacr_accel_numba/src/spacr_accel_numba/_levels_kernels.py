# mypy: disallow-untyped-defs=False, disallow-untyped-calls=False
"""The compiled loops of the levels family (imports numba): a float32 field's order statistics by
radix selection on its bits, in two histogram passes, and the level set's divide and clip.

THE KEY. A float32's bits made into an unsigned integer that sorts as the floats do: a positive
float's sign bit set, a negative float's bits all flipped (``-0.0`` then sorts just below ``+0.0``,
which only makes either zero a valid answer for a rank among zeros). NaN is counted, not keyed.

PASS ONE counts each key's top 16 bits (65,536 bins, a quarter of a MiB per thread: in cache); the
counts say which bin holds each rank. PASS TWO counts the low 16 bits of the keys in those bins
alone, which gives each rank's key, and so its float, exactly. Each pass is split between threads
by ranges of pixels, each with its own counts, summed after.
"""

from __future__ import annotations

import numba
import numpy as np

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
