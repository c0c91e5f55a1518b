"""Registration's float64 transforms on the CPU, one axis at a time (needs SciPy).

WHY ONE AXIS AT A TIME. ``scipy.fft.irfft2`` of a 1480 x 1480 cross-power spectrum took 35 ms on
one thread and 32 ms with two workers (its last, real pass is not split between the threads),
where the same two passes called separately (the complex inverse down the columns, in place, then
the real inverse along the rows) took 25 ms on one thread and 12 ms on two, to within an ulp of
the same surface. The forward transform is spelled the same way for symmetry and so that its
column pass runs in place on the row pass's output (one allocation, not two). Both are pocketfft
in float64, as spaCR's NumPy path and the NumPy floor compute.

WHY PIECES, NOT A WALK. A CPU backend walks a call's pairs itself, in its own module: the runs
(:func:`correlation_runs`) on the kit's pool (:func:`~._tiling.cpu_pool`), each pair on the
transforms here. So a field goes down from the backend into the kit and stops there, never back
up into the backend by a callback; :func:`correlate_by_reference` is the same walk for a backend
that hands over its pair's arithmetic instead.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator

import numpy as np

from ._tiling import cpu_pool, cpu_threads, settled


def real_spectrum(field: np.ndarray, workers: int) -> np.ndarray:
    """The float64 half spectrum of a real field (``rfft2``'s, over the last two axes).

    :param field: ``(..., H, W)`` real; float32 is cast to float64 first.
    :param workers: threads for each pass.
    :returns: complex128 ``(..., H, W // 2 + 1)``.
    """
    from scipy import fft

    rows = fft.rfft(np.asarray(field, dtype=np.float64), axis=-1, workers=workers)
    spectrum: np.ndarray = fft.fft(rows, axis=-2, workers=workers, overwrite_x=True)
    return spectrum


def real_surface(spectrum: np.ndarray, width: int, workers: int) -> np.ndarray:
    """The real field whose half spectrum is ``spectrum`` (``irfft2``'s, over the last two axes).

    :param spectrum: complex128 ``(..., H, width // 2 + 1)``; overwritten (the column pass runs in
        place).
    :param width: the field's width (the half spectrum does not say whether it was odd).
    :param workers: threads for each pass.
    :returns: float64 ``(..., H, width)``.
    """
    from scipy import fft

    columns = fft.ifft(spectrum, axis=-2, workers=workers, overwrite_x=True)
    surface: np.ndarray = fft.irfft(columns, n=width, axis=-1, workers=workers)
    return surface


SPLIT_PIXELS = 1 << 18
"""A lone pair's passes are split between threads from this many pixels of field on: below it a
thread hand-off costs more than it saves (one transform, one worker against two: 16 x 16, 7 against
93 us; 384 x 384, 456 against 644 us; 512 x 512, 834 against 657 us). A 16 x 16 pair took 0.8 ms a
call with two workers."""


def reference_runs(pairing: np.ndarray, runs: int) -> list[np.ndarray]:
    """The pairs in order of their reference field, cut into at most ``runs`` runs of nearly equal
    length, one per thread: a run meets a reference's pairs one after another, so its spectrum is
    computed once and held only while they last, and each cut costs at most one extra transform.

    :param pairing: int64 ``(B,)``, each pair's reference field (the hook's ``pairing``).
    :param runs: how many runs at most (the threads).
    :returns: non-empty int64 arrays of pair numbers, together every pair once.
    """
    order = np.argsort(pairing, kind="stable")
    return [run for run in np.array_split(order, max(1, min(runs, order.size))) if run.size]


def correlation_runs(pairing: np.ndarray, pixels: int) -> list[tuple[np.ndarray, int]]:
    """How a ``phase_correlate`` call's pairs are shared out on the CPU: whole pairs per thread, in
    runs grouped by reference field (:func:`reference_runs`), each pair's passes on one thread; a
    lone pair (or one thread) is one run whose passes are split between all the threads instead,
    when its field holds at least :data:`SPLIT_PIXELS` pixels (one thread below).

    :param pairing: the hook's int64 ``(B,)`` index of each pair's reference.
    :param pixels: one field's pixels (``H * W``).
    :returns: ``[(numbers, workers), ...]``: each run's pair numbers in order of their reference,
        and the threads each of its transforms may use; together every pair once. The first run is
        the calling thread's, the others are for :func:`~._tiling.cpu_pool`.
    """
    threads = cpu_threads()
    if pairing.shape[0] == 1 or threads == 1:
        # a lone pair: every pass split between the threads, where the field is big enough to pay
        return [(np.argsort(pairing, kind="stable"), threads if pixels >= SPLIT_PIXELS else 1)]
    return [(run, 1) for run in reference_runs(pairing, threads)]


def by_reference(first: np.ndarray, pairing: np.ndarray, numbers: np.ndarray,
                 workers: int) -> Iterator[tuple[int, np.ndarray]]:
    """A run's pairs, each with its reference field's spectrum: computed once for the pairs that share
    it (a run meets them one after another) and held only while they last. A generator, not a walk
    given the pair's arithmetic: the backend's own loop does each pair, so its kernels are called from
    its own module.

    :param first: the hook's ``(K, H, W)`` reference fields.
    :param pairing: its int64 ``(B,)`` index of each pair's reference.
    :param numbers: the run's pair numbers, grouped by reference (a run of :func:`correlation_runs`).
    :param workers: threads for each transform.
    :returns: ``(number, reference_spectrum)`` for each pair of the run, in order.
    """
    held, reference = -1, np.empty(0, dtype=np.complex128)
    for number in numbers:
        if pairing[number] != held:  # pairs come grouped by reference: the last spectrum only
            held = int(pairing[number])
            reference = real_spectrum(first[held], workers)
        yield int(number), reference


def correlate_by_reference(first: np.ndarray, second: np.ndarray, pairing: np.ndarray,
                           pair: Callable[[np.ndarray, np.ndarray, int], tuple[int, float]]
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of a ``phase_correlate`` call on the CPU, given one pair's arithmetic: the runs of
    :func:`correlation_runs`, the first in the calling thread and the others on the kit's pool, each
    reference's spectrum computed once a run and held only while its pairs last.

    :param first: the hook's ``(K, H, W)`` reference fields.
    :param second: its ``(B, H, W)`` fields.
    :param pairing: its int64 ``(B,)`` index of each pair's reference.
    :param pair: ``pair(reference_spectrum, field, workers) -> (peak, ratio)``: one pair's surface
        peak (flat index) and peak-to-mean ratio from its reference's :func:`real_spectrum`.
    :returns: int64 ``(B,)`` peaks and float64 ``(B,)`` ratios.
    """
    count = second.shape[0]
    peaks = np.empty(count, dtype=np.int64)
    ratios = np.empty(count, dtype=np.float64)

    def walk(numbers: np.ndarray, workers: int) -> None:
        for number, reference in by_reference(first, pairing, numbers, workers):
            peaks[number], ratios[number] = pair(reference, second[number], workers)

    runs = correlation_runs(pairing, second[0].size)
    pool = cpu_pool() if len(runs) > 1 else None
    if pool is None:
        for numbers, workers in runs:
            walk(numbers, workers)
        return peaks, ratios
    # one copy of the context per run: a context may not be entered by two threads at once
    futures = [pool.submit(contextvars.copy_context().run, walk, numbers, workers) for numbers, workers in runs[1:]]
    with settled(futures):
        walk(*runs[0])
    return peaks, ratios
