"""Exact Hamming nearest neighbours of binary descriptors, threaded, with one ``popcnt`` per 64 bits.

WHY A COMPILED BRUTE FORCE. Every pair must be compared (binary descriptors have no geometry a
tree can use), so the speed is instructions per pair: four XORs, four population counts and three
additions for ORB's 32 bytes, the source's words held in registers while a tile of targets sits in
the first-level cache, its words stored position by position so that the loop over the tile is
vectorised, population counts included (:func:`._science_kernels.hamming_rows`). The counts are exact integers, kept
in (count, index) order per source, so there is nothing to settle; the answer's float32 form is the
NumPy floor's (:func:`~spacr_accel_core.toolkit.finish`), the same bit for bit.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from spacr_accel_core.toolkit import cpu_threads, finish, run_parts

from ._knearest import kernels

_log = logging.getLogger(__name__)

_MIN_THREADED_PAIRS = 1 << 20  # pairs below which one thread answers


def _words(rows: np.ndarray) -> np.ndarray:
    """``rows`` (uint8) as read-only uint64 words, zero-padded to a multiple of 8 bytes (zeros never
    differ). Read-only always: numba compiles a read-only array as another type, and the core hands
    plugins read-only views, so the kernel is compiled (and warmed) for that one type."""
    width = rows.shape[1]
    padded_width = -(-width // 8) * 8
    if padded_width == width and rows.flags.c_contiguous:
        words = rows.view(np.uint64)
    else:
        padded = np.zeros((rows.shape[0], max(8, padded_width)), dtype=np.uint8)
        padded[:, :width] = rows
        words = padded.view(np.uint64)
    words = words.view()
    words.flags.writeable = False
    return words


def hamming_nearest(source: np.ndarray, target: np.ndarray, k: int,
                    max_distance: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each descriptor's ``k`` nearest by differing bits, lowest index among equals.

    :param source: uint8 ``(N, B)`` rows of packed bits.
    :param target: uint8 ``(M, B)``; ``M`` may be below ``k`` or 0.
    :param k: neighbours per source, at least 1 (2 for the ratio test).
    :param max_distance: neighbours with more differing bits are ``-1``/``inf``.
    :returns: int64 ``(N, k)`` and float32 ``(N, k)`` exact counts: the NumPy floor's answer.
    """
    n, m = source.shape[0], target.shape[0]
    have = min(k, m)
    if n == 0 or m == 0:
        return finish(np.full((n, 0), -1, np.int64), np.zeros((n, 0)), k, max_distance)
    bits = 8 * source.shape[1]
    limit = bits if max_distance is None or math.isinf(max_distance) else min(bits, math.floor(max_distance))
    s = _words(source)
    columns = np.ascontiguousarray(_words(target).T)  # (W, M): a tile's words contiguous per position
    columns.flags.writeable = False
    found = np.empty((n, have), dtype=np.int64)
    counted = np.empty((n, have), dtype=np.int64)
    threads = 1 if n * m < _MIN_THREADED_PAIRS else min(cpu_threads(), n)
    edges = np.linspace(0, n, threads + 1).astype(np.int64)
    run_parts(kernels().hamming_rows, [(s, columns, limit, m, found, counted, int(edges[i]), int(edges[i + 1]))
                                        for i in range(threads)])
    missing = found >= m
    found[missing] = -1
    squared = np.square(counted.astype(np.float64))
    squared[missing] = np.inf
    return finish(found, squared, k, max_distance)


def warm_job() -> object:
    """Compile (or load) the kernel on inputs of exactly the driver's types: for a warm-up."""
    rows = np.arange(64, dtype=np.uint8).reshape(2, 32)
    return hamming_nearest(rows, rows, 1), hamming_nearest(rows[:, :5], rows[:, :5], 2, 3.0)
