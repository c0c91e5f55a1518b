"""The registration family's reference: the phase correlation of two fields by spaCR's definition
(the package's, :mod:`spacr_accel_core.reference`), and of a stack as ``phase_correlate`` answers it.
"""

from __future__ import annotations

import numpy as np

from ..contract._registration import Registration


def _nearest_turn(value: int, extent: int, about: int) -> int:
    """The representative of ``value`` modulo ``extent`` nearest ``about`` (ties: round half to even)."""
    from fractions import Fraction

    return value + extent * round(Fraction(about - value, extent))


def phase_correlation(first: object, second: object, expected: tuple[int, int] = (0, 0),
                      tolerance: float | tuple[float, float] | None = None,
                      min_peak_ratio: float = 3.0) -> tuple[int, int, float, bool]:
    """``(dy, dx, peak_ratio, accepted)`` of two 2-D fields by the definition of
    :mod:`spacr_accel_core.reference`, in plain NumPy."""
    a = np.asarray(first, dtype=np.float64)
    b = np.asarray(second, dtype=np.float64)
    if a.max() == a.min() or b.max() == b.min():
        surface = np.zeros(a.shape)
    else:
        product = np.fft.rfft2(a) * np.conj(np.fft.rfft2(b))
        magnitude = np.abs(product)
        unit = np.zeros_like(product)
        unit[magnitude > 0] = product[magnitude > 0] / magnitude[magnitude > 0]
        unit[0, 0] = 0
        surface = np.fft.irfft2(unit, s=a.shape)
    peak = int(np.argmax(surface))
    y, x = divmod(peak, a.shape[1])
    mean = float(np.mean(np.abs(surface)))
    ratio = float(surface[y, x]) / mean if mean > 0 else 0.0
    dy = _nearest_turn(y, a.shape[0], int(expected[0]))
    dx = _nearest_turn(x, a.shape[1], int(expected[1]))
    varies = bool(a.max() > a.min() and b.max() > b.min())
    if tolerance is not None:
        rows, columns = (tolerance, tolerance) if isinstance(tolerance, (int, float)) else tolerance
        accepted = abs(dy - expected[0]) <= rows and abs(dx - expected[1]) <= columns
    else:
        accepted = ratio >= min_peak_ratio and peak != 0
    return dy, dx, ratio, bool(accepted and varies)


def phase_correlate(first: object, second: object, expected: tuple[int, int] = (0, 0),
                    tolerance: float | tuple[float, float] | None = None,
                    min_peak_ratio: float = 3.0) -> Registration:
    """:func:`phase_correlation` called as ``ops.phase_correlate`` is: each pair of a stack on its
    own, the answer a :class:`~spacr_accel_core.Registration` (arrays of the stack's leading shape)."""
    a = np.asarray(first, dtype=np.float64)
    b = np.asarray(second, dtype=np.float64)
    pairs = zip(a.reshape(-1, *a.shape[-2:]), b.reshape(-1, *b.shape[-2:]), strict=True)
    answers = [phase_correlation(x, y, expected, tolerance, min_peak_ratio) for x, y in pairs]
    dy, dx, ratio, accepted = (np.asarray(column).reshape(a.shape[:-2]) for column in zip(*answers, strict=True))
    if a.ndim == 2:
        return Registration(int(dy), int(dx), float(ratio), bool(accepted), "reference")
    return Registration(dy.astype(np.int64), dx.astype(np.int64), ratio.astype(np.float64), accepted.astype(bool),
                        "reference")
