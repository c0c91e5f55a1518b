"""The neighbours family's references: the k nearest by the Euclidean and the Hamming arithmetic,
the one-way search as ``nearest_neighbours`` answers it, and the mutual pairs.

Every pair is compared, one bounded block of rows at a time, and a stable sort orders each row: the
definitions of "nearer", of the ``k`` nearest and of a mutual pair are the package's
(:mod:`spacr_accel_core.reference`).
"""

from __future__ import annotations

import math
import operator

import numpy as np

_BLOCK_PAIRS = 1 << 20
"""Pairs compared in one block of rows: a few tens of MiB of float64 and bits at most, whatever the
input's size, so the reference runs on sets far too large for an all-pairs matrix."""

METRICS = ("euclidean", "hamming")
"""The metrics :func:`nearest_neighbours` and :func:`mutual_nearest` take."""


def _count(k: object) -> int:
    """``k`` as a positive Python int; a bool, a float or anything below 1 is refused."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an integer, not {type(k).__name__}")
    if int(k) < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    return operator.index(k)


def _limit(max_distance: object) -> float:
    """``max_distance`` as a float (``inf`` for ``None``); NaN and negative values are refused."""
    if max_distance is None:
        return math.inf
    if isinstance(max_distance, bool) or not isinstance(max_distance, (int, float, np.integer, np.floating)):
        raise TypeError(f"max_distance must be a number or None, not {type(max_distance).__name__}")
    value = float(max_distance)
    if math.isnan(value) or value < 0:
        raise ValueError(f"max_distance must be a non-negative number, not {max_distance}")
    return value


def _points(array: object, name: str) -> np.ndarray:
    """A 2-D finite float32 copy of ``array``: the coordinates the contract compares."""
    data = np.asarray(array)
    if data.ndim != 2:
        raise ValueError(f"{name} must be 2-D (points, coordinates), not {data.ndim}-D")
    if data.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers, not {data.dtype}")
    points = data.astype(np.float32)
    if not np.isfinite(points).all():
        raise ValueError(f"{name} holds a NaN or an infinity (as float32): no distance to it is defined")
    return points


def _bits(array: object, name: str) -> np.ndarray:
    """A 2-D uint8 array of packed bits; any other dtype is a TypeError (a silent cast would change
    which bits differ)."""
    data = np.asarray(array)
    if data.dtype != np.uint8:
        raise TypeError(f"{name} must be uint8 rows of packed bits for the Hamming metric, not {data.dtype}")
    if data.ndim != 2:
        raise ValueError(f"{name} must be 2-D (descriptors, bytes), not {data.ndim}-D")
    return data


def _first_k(distance: np.ndarray, k: int) -> np.ndarray:
    """Per row, the columns of the ``k`` smallest distances in (distance, column) order.

    A STABLE sort keeps equal distances in column order, which is the tie rule; nothing else is
    needed. Rows shorter than ``k`` give all their columns.
    """
    order = np.argsort(distance, axis=1, kind="stable")
    return order[:, :k]


def _finish(index: np.ndarray, found: np.ndarray, limit: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Pad rows to ``k`` columns with ``-1``/``inf`` and drop the neighbours beyond ``limit``.

    ``found`` is float32 and ``limit`` a float: the comparison is made exactly, in float64.
    """
    rows, have = index.shape
    out_index = np.full((rows, k), -1, dtype=np.int64)
    out_found = np.full((rows, k), np.inf, dtype=np.float32)
    out_index[:, :have] = index
    out_found[:, :have] = found
    beyond = out_found.astype(np.float64) > limit
    out_index[beyond] = -1
    out_found[beyond] = np.inf
    return out_index, out_found


def _block_rows(width: int) -> int:
    """Rows of sources compared in one block against ``width`` targets (at least one)."""
    return max(1, _BLOCK_PAIRS // max(1, width))


def k_nearest(source: object, target: object, k: int,
              max_distance: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each source's ``k`` nearest targets by the contract's Euclidean arithmetic, plainly.

    Every pair is compared, one block of source rows at a time (:data:`_BLOCK_PAIRS`), by the float64
    sum of squared coordinate differences in coordinate order, and a stable sort orders each row.

    :param source: ``(N, D)`` points, taken as float32 (what the ops compare), finite.
    :param target: ``(M, D)`` points, likewise; ``M`` may be 0 or below ``k`` (the missing
        neighbours are ``-1``/``inf``).
    :param k: how many neighbours per source, at least 1. ``k = 2`` serves the ratio test that
        rejects ambiguous matches.
    :param max_distance: neighbours whose returned float32 distance exceeds it are ``-1``/``inf``:
        a cell that left the field must not be matched to a stranger. ``None``: no limit.
    :returns: int64 ``(N, k)`` indices and float32 ``(N, k)`` distances, nearest first.
    :raises ValueError: shapes that disagree, non-finite coordinates, a negative or NaN limit.
    :raises TypeError: ``k`` not an integer, coordinates that are not numbers.
    """
    count = _count(k)
    limit = _limit(max_distance)
    s = _points(source, "source")
    t = _points(target, "target")
    if s.shape[1] != t.shape[1]:
        raise ValueError(f"source and target must have the same number of coordinates, not {s.shape[1]} and "
                         f"{t.shape[1]}")
    s64 = s.astype(np.float64)
    t64 = t.astype(np.float64)
    n, m = s.shape[0], t.shape[0]
    have = min(count, m)
    index = np.empty((n, have), dtype=np.int64)
    found = np.empty((n, have), dtype=np.float32)
    step = _block_rows(m)
    for start in range(0, n, step):
        block = s64[start:start + step]
        squared = np.zeros((block.shape[0], m), dtype=np.float64)
        for axis in range(s.shape[1]):  # in coordinate order: the contract's sum
            difference = block[:, None, axis] - t64[None, :, axis]
            squared += difference * difference
        chosen = _first_k(squared, have)
        index[start:start + step] = chosen
        with np.errstate(over="ignore"):  # beyond float32's range the distance IS inf
            found[start:start + step] = np.sqrt(np.take_along_axis(squared, chosen, axis=1)).astype(np.float32)
    return _finish(index, found, limit, count)


def hamming_nearest(source: object, target: object, k: int,
                    max_distance: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each descriptor's ``k`` nearest by the number of differing bits, plainly.

    The bits are unpacked and counted (``np.unpackbits``), one block of rows at a time; a stable
    sort orders each row, so equal counts stay in index order.

    :param source: uint8 ``(N, B)``: ``B`` bytes of packed bits per descriptor (ORB's 32).
    :param target: uint8 ``(M, B)``.
    :param k: how many neighbours per source, at least 1.
    :param max_distance: neighbours with more differing bits are ``-1``/``inf``; ``None``: no limit.
    :returns: int64 ``(N, k)`` indices and float32 ``(N, k)`` bit counts (exact integers), nearest first.
    :raises TypeError: an input that is not uint8 (bits of another dtype are a different descriptor).
    :raises ValueError: different row widths, a negative or NaN limit.
    """
    count = _count(k)
    limit = _limit(max_distance)
    s = _bits(source, "source")
    t = _bits(target, "target")
    if s.shape[1] != t.shape[1]:
        raise ValueError(f"source and target must have the same number of bytes per row, not {s.shape[1]} and "
                         f"{t.shape[1]}")
    n, m = s.shape[0], t.shape[0]
    have = min(count, m)
    index = np.empty((n, have), dtype=np.int64)
    found = np.empty((n, have), dtype=np.float32)
    step = _block_rows(m * max(1, s.shape[1]))
    for start in range(0, n, step):
        differ = s[start:start + step, None, :] ^ t[None, :, :]
        counts = np.unpackbits(differ, axis=2).sum(axis=2, dtype=np.int64)
        chosen = _first_k(counts, have)
        index[start:start + step] = chosen
        found[start:start + step] = np.take_along_axis(counts, chosen, axis=1).astype(np.float32)
    return _finish(index, found, limit, count)


def mutual_nearest(first: object, second: object, max_distance: float | None = None,
                   metric: str = "euclidean") -> np.ndarray:
    """The pairs that are each other's nearest, within ``max_distance``: two one-way searches, intersected.

    This is how cells are matched between two imaging cycles: a one-way nearest matches every cell,
    even one with no partner, to someone; requiring the match both ways (and within a displacement)
    keeps only the unambiguous ones.

    :param first: ``(N, D)`` points (Euclidean) or uint8 ``(N, B)`` descriptors (Hamming).
    :param second: ``(M, D)`` or ``(M, B)``, likewise.
    :param max_distance: the largest distance a pair may have; ``None``: no limit.
    :param metric: ``"euclidean"`` or ``"hamming"``.
    :returns: int64 ``(P, 2)`` pairs ``(i, j)``, sorted by ``i``.
    :raises ValueError: an unknown metric (and whatever the one-way searches refuse).
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, not {metric!r}")
    search = k_nearest if metric == "euclidean" else hamming_nearest
    forward, _ = search(first, second, 1, max_distance)
    backward, _ = search(second, first, 1, max_distance)
    forward, backward = forward[:, 0], backward[:, 0]
    rows = np.flatnonzero(forward >= 0)
    mutual = rows[backward[forward[rows]] == rows]
    return np.stack([mutual, forward[mutual]], axis=1).astype(np.int64, copy=False)


def nearest_neighbours(source: object, target: object, k: int = 1, max_distance: float | None = None,
                       metric: str = "euclidean") -> tuple[np.ndarray, np.ndarray]:
    """The contract's ``nearest_neighbours``: :func:`k_nearest` or :func:`hamming_nearest`, with
    ``k=1``'s ``(N,)`` shapes (an empty target set: ``-1`` and ``inf``)."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, not {metric!r}")
    search = k_nearest if metric == "euclidean" else hamming_nearest
    index, distance = search(source, target, k, max_distance)
    return (index[:, 0], distance[:, 0]) if k == 1 else (index, distance)
