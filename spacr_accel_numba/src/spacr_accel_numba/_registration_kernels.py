# mypy: disallow-untyped-defs=False, disallow-untyped-calls=False
"""The registration family's compiled loops and their driver: phase correlation whose passes between
the transforms are compiled. Imported by the hook of :mod:`._registration` once the kernel is ready
(it imports numba, ~0.4 s), and by the warm-up.

The transforms are SciPy's (pocketfft in float64, as the NumPy floor's), one axis at a time
(``toolkit.real_spectrum``, ``real_surface``: SciPy's ``irfft2`` does not split its last pass
between threads, the separate passes do); the normalisation of the cross-power spectrum (a
product, a magnitude and a division per frequency) is one compiled pass instead of four array
passes, split between the threads by rows (:func:`normalise_rows`); the surface's first maximum and
absolute mean come from one vectorised compiled pass of row maxima and row sums
(:func:`row_statistics`). A reference field shared by several pairs (every cycle registered to one
reference cycle) is transformed once: the core passes each distinct reference once, and the pairs
are walked grouped by it (``toolkit.correlation_runs``).

The walk and the bands are this module's own: its runs and its compiled loops are handed to the
kit's pool (``toolkit.cpu_pool``) from here, so a field goes from here into the kit's transforms and
comes back as their answer, never as a call back into this module.
"""

from __future__ import annotations

import contextvars
import math
from typing import Any

import numba
import numpy as np

from spacr_accel_core.toolkit import by_reference, correlation_runs, cpu_pool, real_spectrum, real_surface, settled

from . import _locator  # noqa: F401  (before any njit: these kernels' cache stamped with every file they come from)


@numba.njit(nogil=True, cache=True)
def normalise_rows(first, second, start, stop):
    """Rows ``start:stop`` of ``second`` become the normalised cross-power spectrum ``A conj(B) / |.|``
    of ``first`` (A) and ``second`` (B), 0 where the product is 0; the zero frequency is set to 0 by
    the driver. ``first`` is only read (it may serve the next pair). The magnitude's reciprocal is one
    square root and one division (an ulp from spaCR's two divisions); a square that could have under-
    or overflowed takes ``hypot`` instead."""
    columns = first.shape[1]
    for row in range(start, stop):
        for column in range(columns):
            a, b = first[row, column], second[row, column]
            real = a.real * b.real + a.imag * b.imag
            imag = a.imag * b.real - a.real * b.imag
            square = real * real + imag * imag
            if 1e-290 < square < 1e290:
                scale = 1.0 / math.sqrt(square)
            else:
                magnitude = math.hypot(real, imag)
                scale = 1.0 / magnitude if magnitude > 0 else 0.0
            second[row, column] = complex(real * scale, imag * scale)


@numba.njit(nogil=True, cache=True, fastmath=True)
def row_statistics(surface, start, stop, maxima, sums):
    """``maxima[r]`` and ``sums[r]``: row ``r``'s maximum and sum of absolute values, rows
    ``start:stop``, in one vectorised pass over a finite surface (``fastmath`` lets both reductions
    run in SIMD lanes: the maximum is exact in any order, the sum moves by rounding only). The
    driver finds the first maximum as the first row holding the largest row maximum, then that
    row's first maximum: the flat ``argmax``."""
    columns = surface.shape[1]
    for row in range(start, stop):
        best = surface[row, 0]
        total = 0.0
        for column in range(columns):
            value = surface[row, column]
            best = max(best, value)
            total += abs(value)
        maxima[row] = best
        sums[row] = total


# ---- the driver ---------------------------------------------------------------------------------


def _bands(rows: int, threads: int) -> list[tuple[int, int]]:
    edges = np.linspace(0, rows, threads + 1).astype(int)
    return [(int(edges[i]), int(edges[i + 1])) for i in range(threads) if edges[i + 1] > edges[i]]


def _on_bands(loop: Any, parts: list[tuple[Any, ...]]) -> None:
    """``loop(*part)`` for every part (a band of rows): the first in the calling thread, the others
    on the kit's pool (one after another in a thread of that pool). The loops are compiled and
    ``nogil``: they read no context."""
    pool = cpu_pool() if len(parts) > 1 else None
    if pool is None:
        for part in parts:
            loop(*part)
        return
    futures = [pool.submit(loop, *part) for part in parts[1:]]
    with settled(futures):
        loop(*parts[0])


def _one(reference: np.ndarray, second: np.ndarray, threads: int) -> tuple[int, float]:
    """One pair's peak and ratio from its reference's spectrum, every pass split by rows between
    ``threads``."""
    product = real_spectrum(second, threads)
    bands = _bands(product.shape[0], threads)
    _on_bands(normalise_rows, [(reference, product, start, stop) for start, stop in bands])
    product[0, 0] = 0
    return _peak(real_surface(product, second.shape[1], threads), threads)


def _peak(surface: np.ndarray, threads: int) -> tuple[int, float]:
    """The first maximum's flat index and its ratio to the mean absolute surface, from one compiled
    pass of row maxima and row sums (NumPy's argmax and ``abs().mean()`` are three passes)."""
    height, width = surface.shape
    maxima, sums = np.empty(height), np.empty(height)
    _on_bands(row_statistics, [(surface, start, stop, maxima, sums) for start, stop in _bands(height, threads)])
    row = int(np.argmax(maxima))
    peak = row * width + int(np.argmax(surface[row]))
    mean = float(sums.sum()) / surface.size
    return peak, (float(surface.flat[peak]) / mean if mean > 0 else 0.0)


def _walk(first: np.ndarray, second: np.ndarray, pairing: np.ndarray, numbers: np.ndarray, workers: int,
          peaks: np.ndarray, ratios: np.ndarray) -> None:
    """The pairs ``numbers`` (grouped by reference), each one's peak and ratio written into ``peaks``
    and ``ratios``: a reference's spectrum computed once and held only while its pairs last, every
    pass on ``workers`` threads."""
    for number, reference in by_reference(first, pairing, numbers, workers):
        peaks[number], ratios[number] = _one(reference, second[number], workers)


def phase_correlate(first: np.ndarray, second: np.ndarray, pairing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's surface peak (flat index) and peak-to-mean ratio: the runs of
    ``toolkit.correlation_runs``, the first walked in the calling thread and the others on the
    kit's pool (one after another in a thread of that pool).

    :param first: ``(K, H, W)`` finite float32 or float64 reference fields.
    :param second: ``(B, H, W)``, the same dtype.
    :param pairing: int64 ``(B,)``: pair ``i`` is ``first[pairing[i]]`` and ``second[i]``.
    :returns: int64 ``(B,)`` and float64 ``(B,)``.
    """
    count = second.shape[0]
    peaks = np.empty(count, dtype=np.int64)
    ratios = np.empty(count, dtype=np.float64)
    runs = correlation_runs(pairing, second[0].size)
    pool = cpu_pool() if len(runs) > 1 else None
    if pool is None:
        for numbers, workers in runs:
            _walk(first, second, pairing, numbers, workers, peaks, ratios)
        return peaks, ratios
    # one copy of the context per run: a context may not be entered by two threads at once
    futures = [pool.submit(contextvars.copy_context().run, _walk, first, second, pairing, numbers, workers,
                           peaks, ratios) for numbers, workers in runs[1:]]
    with settled(futures):
        _walk(first, second, pairing, *runs[0], peaks, ratios)
    return peaks, ratios


def warm_correlate() -> object:
    """Compile (or load) both loops on inputs of exactly the driver's types: for a warm-up."""
    field = np.arange(16, dtype=np.float64).reshape(1, 4, 4)
    return phase_correlate(field, field[:, ::-1].copy(), np.zeros(1, dtype=np.int64))
