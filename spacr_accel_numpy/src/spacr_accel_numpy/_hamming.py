"""Exact Hamming nearest neighbours of binary descriptors (ORB's 32 bytes), lowest index among equals.

WHY BRUTE FORCE. A bit count between two descriptors is a handful of instructions, and binary
descriptors have no geometry a tree can use; every matcher spaCR's registration compares with
(OpenCV's ``BFMatcher``, faiss's ``IndexBinaryFlat``) compares every pair too. The counts are exact
small integers, so there is nothing to settle afterwards: the order is (count, index).

WHY WORDS. The rows are read as 64-bit words where their width allows (32 bytes: four words), so one
XOR and one population count (``np.bitwise_count``, NumPy 2) cover 64 bits; the counts are summed
word by word into a ``(rows, M)`` block held in a few MiB, whatever the sizes. Without
``np.bitwise_count`` (NumPy 1) the bytes are counted through a 256-entry table.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from spacr_accel_core.toolkit import finish, first_k

_log = logging.getLogger(__name__)

_BLOCK_BYTES = 16 << 20  # one block's counts and XOR scratch: stays in the shared cache's reach
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
    :param chunk: most sources per block (the block is also capped by :data:`_BLOCK_BYTES`).
    :returns: int64 ``(N, k)`` and float32 ``(N, k)`` (exact integer counts), nearest first.
    """
    n, m = source.shape[0], target.shape[0]
    have = min(k, m)
    index = np.full((n, have), -1, dtype=np.int64)
    squared = np.empty((n, have), dtype=np.float64)
    if n and m:
        rows = max(1, min(int(chunk), _BLOCK_BYTES // (16 * m)))
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
