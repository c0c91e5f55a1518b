"""The Gaussian passes every backend runs: SciPy's kernels, and the order SciPy sums them in.

WHY BIT-IDENTITY NEEDS THIS. ``scipy.ndimage.gaussian_filter`` of a float32 field is a chain of
1-D correlations, one per axis (rows first), each summed in float64 and rounded to float32 before
the next. Each output pixel of a pass is, with ``w[j]`` the correlation weight at offset ``-j``
(the kernel is symmetric, or antisymmetric for odd derivative orders)::

    acc = x[i] * w[0]
    for j in r, r - 1, ..., 1:          # the outermost pair first
        acc = acc + (x[i - j] + x[i + j]) * w[j]     # "-" for an antisymmetric kernel
    out[i] = float32(acc)

in float64, each product and sum rounded on its own (no fused multiply-add: a fused one rounds
once and changes the last bit). A backend that sums in another order, in float32, or fuses, is
close but not equal. The weights come from here, computed on the host with NumPy exactly as SciPy
computes them, so no device's ``exp`` enters the answer.

Outside the field the line continues by the boundary mode (:func:`source_index`): ``"reflect"``
mirrors it about its edge with the edge pixel repeated, periodically with period ``2 n`` when the
kernel is longer than the line; ``"nearest"`` repeats the edge pixel.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

__all__ = ["Pass", "gaussian_passes", "gaussian_weights", "laplace_terms", "source_index"]

SIGMA_SKIPPED = 1e-15
"""SciPy filters no axis whose sigma is at most this (it copies that axis): so does every backend.
Defined here, with the passes it decides, so that the input checks of ``operations/_checks.py``
(which refuse a kernel too long to build) and the passes agree on which axes are smoothed."""


def gaussian_radius(sigma: float, truncate: float) -> int:
    """The kernel's half-width in pixels, as SciPy computes it: ``int(truncate * sigma + 0.5)``
    (0 for an axis that is not smoothed)."""
    return 0 if sigma <= SIGMA_SKIPPED else int(truncate * sigma + 0.5)


@dataclass(frozen=True)
class Pass:
    """One 1-D correlation of a field, as SciPy sums it.

    :param axis: ``-2`` (along the rows: each column filtered) or ``-1`` (along each row).
    :param weights: ``weights[j]`` is the correlation weight at offset ``-j``, ``j = 0 .. radius``
        (float64 values, in a tuple so a pass can be cached and compared).
    :param sign: ``1`` for a symmetric kernel (pairs added), ``-1`` for an antisymmetric one (the
        right neighbour subtracted from the left).
    """

    axis: int
    weights: tuple[float, ...]
    sign: int

    @property
    def radius(self) -> int:
        """The pixels the pass reaches on either side."""
        return len(self.weights) - 1

    def half(self) -> np.ndarray:
        """:attr:`weights` as a float64 array."""
        return np.array(self.weights, dtype=np.float64)


def gaussian_weights(sigma: float, order: int, radius: int) -> np.ndarray:
    """The correlation weights SciPy's ``gaussian_filter1d`` uses (its kernel, reversed): the same
    NumPy operations in the same order, so the same float64 bits.

    :param sigma: the standard deviation in pixels (> 0).
    :param order: 0 to smooth, 2 for the second derivative.
    :param radius: the half-width (:func:`gaussian_radius`).
    :returns: float64 weights of length ``2 * radius + 1``, index ``radius`` at offset 0.
    """
    exponents = np.arange(order + 1)
    sigma2 = sigma * sigma
    x = np.arange(-radius, radius + 1)
    phi = np.exp(-0.5 / sigma2 * x ** 2)
    phi = phi / phi.sum()
    if order == 0:
        return np.ascontiguousarray(phi[::-1])
    q = np.zeros(order + 1)
    q[0] = 1
    derivative = np.diag(exponents[1:], 1) + np.diag(np.ones(order) / -sigma2, -1)
    for _ in range(order):
        q = derivative.dot(q)
    q = (x[:, None] ** exponents).dot(q)
    return np.ascontiguousarray((q * phi)[::-1])


def _symmetry(weights: np.ndarray) -> int:
    """SciPy's test of a kernel: ``1`` symmetric, ``-1`` antisymmetric (each within DBL_EPSILON)."""
    centre = len(weights) // 2
    eps = np.finfo(np.float64).eps
    left, right = weights[centre - 1::-1] if centre else weights[:0], weights[centre + 1:]
    if np.all(np.abs(right - left) <= eps):
        return 1
    if np.all(np.abs(right + left) <= eps):
        return -1
    raise ValueError("the kernel is neither symmetric nor antisymmetric")  # not for orders 0 and 2


@functools.lru_cache(maxsize=256)
def _pass(axis: int, sigma: float, order: int, truncate: float) -> Pass:
    weights = gaussian_weights(sigma, order, gaussian_radius(sigma, truncate))
    centre = len(weights) // 2
    return Pass(axis, tuple(float(w) for w in weights[centre::-1]), _symmetry(weights))


def gaussian_passes(sigma: tuple[float, float], truncate: float,
                    orders: tuple[int, int] = (0, 0)) -> tuple[Pass, ...]:
    """The passes of ``scipy.ndimage.gaussian_filter(f, sigma, order=orders, truncate=truncate,
    axes=(-2, -1))`` in SciPy's order: rows first, an axis whose sigma is at most
    ``1e-15`` skipped (none at all: the field is copied).

    :param sigma: ``(rows, columns)`` standard deviations, each >= 0.
    :param truncate: the reach in standard deviations.
    :param orders: the derivative order along each axis.
    """
    return tuple(_pass(axis, s, order, truncate)
                 for axis, s, order in zip((-2, -1), sigma, orders, strict=True) if s > SIGMA_SKIPPED)


def laplace_terms(sigma: tuple[float, float], truncate: float) -> tuple[tuple[Pass, ...], tuple[Pass, ...]]:
    """The two terms of ``scipy.ndimage.gaussian_laplace``: the second derivative along the rows
    (smoothed along the columns), then along the columns (smoothed along the rows); the answer is
    ``float32(first) + float32(second)``, added in float32."""
    return gaussian_passes(sigma, truncate, (2, 0)), gaussian_passes(sigma, truncate, (0, 2))


def source_index(length: int, radius: int, mode: str) -> np.ndarray:
    """For the line extended by ``radius`` on each side, the index in the line each position reads.

    :param length: the line's length (>= 1).
    :param radius: the extension on each side.
    :param mode: ``"reflect"`` or ``"nearest"``.
    :returns: int64 of length ``length + 2 * radius``; position ``p`` holds pixel ``p - radius``.
    """
    offsets = np.arange(-radius, length + radius, dtype=np.int64)
    if mode == "nearest":
        return np.clip(offsets, 0, length - 1)
    folded = offsets % (2 * length)
    return np.where(folded < length, folded, 2 * length - 1 - folded)
