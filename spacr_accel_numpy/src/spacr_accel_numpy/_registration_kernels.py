"""Phase correlation on the NumPy floor, by ``scipy.fft``.

WHY ``scipy.fft``. Measured side by side on a 1480 x 1480 pair, SciPy's real FFT with two workers
takes 12 ms where ``numpy.fft`` takes 31 (both pocketfft in float64; SciPy's
splits the rows between threads); each transform is run one axis at a time
(``toolkit.real_spectrum``, ``real_surface``), which SciPy splits between threads where its
``irfft2`` does not. The cross-power spectrum is normalised in place through a real
view of the complex array (no complex temporaries), which is spaCR's ``product / magnitude``
component by component. A stack of pairs is shared between the threads in runs of whole pairs,
each pair's transforms single-threaded: whole pairs per thread scale better than rows of one
transform. A reference field shared by several pairs is transformed once: the core passes each
distinct reference field once with each pair's index into them, and a run walks its pairs grouped
by their reference (``toolkit.correlation_runs``).

The walk is this module's own (:func:`_walk`), its runs handed to the kit's pool
(``toolkit.cpu_pool``) by this module: a field goes from here into the kit's transforms and comes
back as their answer, never as a call back into this module.

Imported by :func:`._registration.spacr_accel_phase_correlate` at its first call.
"""

from __future__ import annotations

import contextvars

import numpy as np

from spacr_accel_core.toolkit import by_reference, correlation_runs, cpu_pool, real_spectrum, real_surface, settled


def normalise(first: np.ndarray, product: np.ndarray) -> None:
    """``product`` (B) becomes the normalised cross-power spectrum of ``first`` (A) and B.

    ``A * conj(B)`` divided by its magnitude where that is non-zero (0 elsewhere, where the product
    is 0 already), the zero frequency set to 0. ``first`` is left as it is (it may be held for the
    next pair with the same reference field).

    A zero magnitude is divided by 1 instead (its product is zero, and stays zero with its sign)
    rather than masked out: a masked ``divide`` took 13 ms of a 1480 x 1480 spectrum, this 8.
    """
    np.conjugate(product, out=product)
    np.multiply(first, product, out=product)
    magnitude = np.abs(product)
    magnitude[magnitude == 0] = 1.0
    parts = product.view(np.float64).reshape(*product.shape, 2)
    np.divide(parts, magnitude[..., None], out=parts)
    product[..., 0, 0] = 0


def surface_peak(surface: np.ndarray) -> tuple[int, float]:
    """The first maximum's flat index and its ratio to the mean absolute surface (0 for a zero mean).

    ``surface`` is overwritten by its absolute values (the mean is taken in place: no 17 MB
    temporary for a 1480 x 1480 surface, 5 ms down to 2).
    """
    peak = int(np.argmax(surface))
    value = float(surface.flat[peak])
    mean = float(np.abs(surface, out=surface).mean())
    return peak, (value / mean if mean > 0 else 0.0)


def _pair(reference: np.ndarray, field: np.ndarray, workers: int) -> tuple[int, float]:
    """One pair's peak and ratio from its reference's spectrum. Its own frame: the pair's spectrum
    and surface are freed as it returns (held by the walk until its run ended, a lone 512 x 512 pair
    took about 0.5 ms more a call, 5.5 ms against 5.0)."""
    product = real_spectrum(field, workers)
    normalise(reference, product)
    return surface_peak(real_surface(product, field.shape[-1], workers))


def _walk(first: np.ndarray, second: np.ndarray, pairing: np.ndarray, numbers: np.ndarray, workers: int,
          peaks: np.ndarray, ratios: np.ndarray) -> None:
    """The pairs ``numbers`` (grouped by reference), each one's peak and ratio written into ``peaks``
    and ``ratios``: a reference's spectrum computed once and held only while its pairs last, every
    transform on ``workers`` threads."""
    for number, reference in by_reference(first, pairing, numbers, workers):
        peaks[number], ratios[number] = _pair(reference, second[number], workers)


def phase_correlate(first: np.ndarray, second: np.ndarray, pairing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's surface peak (flat index) and peak-to-mean ratio, in float64: the runs of
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
