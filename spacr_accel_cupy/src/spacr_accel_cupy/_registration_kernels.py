"""The registration family against a :class:`~._kit.Kit` (CuPy on the card, NumPy in the tests):
batches of float64 phase correlations.

Only the answers come back: two numbers per pair. The batches of pairs go to the card in groups
sized to its free memory (:meth:`Kit.budget`), and a group that still runs out is halved and
retried (the loop of :func:`._runtime.tiles`, each group by :func:`_batch`). Imported by the hook of
:mod:`._registration` at its first call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._kit import Kit
from ._runtime import tiles

__all__ = ["phase_correlate"]


def _surfaces(kit: Kit, references: Any, second: Any, pairing: Any) -> tuple[Any, Any]:
    """Each pair's surface peak (flat index) and peak-to-mean ratio, for a batch on the card: each
    distinct reference field of the batch transformed once, its spectrum read by every pair of it."""
    xp = kit.xp
    shape = second.shape[-2:]
    product = xp.conj(xp.fft.rfft2(second, axes=(-2, -1)))
    product *= xp.fft.rfft2(references, axes=(-2, -1))[pairing]
    magnitude = xp.abs(product)
    nonzero = magnitude > 0
    product = xp.where(nonzero, product / xp.where(nonzero, magnitude, 1.0), 0)
    product[:, 0, 0] = 0
    surface = xp.fft.irfft2(product, s=shape, axes=(-2, -1)).reshape(second.shape[0], -1)
    where = xp.argmax(surface, axis=1)  # the first maximum of each surface
    best = xp.take_along_axis(surface, where[:, None], axis=1)[:, 0]
    mean = xp.abs(surface).mean(axis=1)
    ratio = xp.where(mean > 0, best / xp.where(mean > 0, mean, 1.0), 0.0)
    return where, ratio


def _batch(kit: Kit, first: np.ndarray, second: np.ndarray, pairing: np.ndarray, start: int, stop: int,
           peaks: np.ndarray, ratios: np.ndarray) -> None:
    """Pairs ``start:stop`` on the card, their peaks and ratios written into ``peaks`` and ``ratios``:
    each distinct reference field of the batch sent once. Its arrays die with its frame, so a batch
    that ran out of memory holds nothing when the cache is released for the retry."""
    xp = kit.xp
    chosen, index = np.unique(pairing[start:stop], return_inverse=True)
    a = kit.to_device(np.ascontiguousarray(first[chosen])).astype(xp.float64)
    b = kit.to_device(np.ascontiguousarray(second[start:stop])).astype(xp.float64)
    where, ratio = _surfaces(kit, a, b, kit.to_device(index.reshape(-1)))
    peaks[start:stop] = kit.to_host(where)
    ratios[start:stop] = kit.to_host(ratio)


def phase_correlate(kit: Kit, first: np.ndarray, second: np.ndarray,
                    pairing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's surface peak and ratio in float64, the pairs in batches sized to the free memory.

    :param kit: the library to run on.
    :param first: ``(K, H, W)`` finite float32 or float64 reference fields.
    :param second: ``(B, H, W)``, the same dtype.
    :param pairing: int64 ``(B,)``: pair ``i`` is ``first[pairing[i]]`` and ``second[i]``.
    :returns: int64 ``(B,)`` and float64 ``(B,)``.
    """
    count, height, width = second.shape
    # a field and a reference, spectra, surface, temporaries (at most as many references as pairs)
    batch = max(1, kit.budget() // (8 * height * width * 10))
    peaks = np.empty(count, dtype=np.int64)
    ratios = np.empty(count, dtype=np.float64)
    for part in tiles(count, batch, 1, kit, "phase_correlate"):
        with part:
            _batch(kit, first, second, pairing, part.start, part.stop, peaks, ratios)
    return peaks, ratios
