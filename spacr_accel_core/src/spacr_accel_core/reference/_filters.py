"""The filters family's references: the window minimum and maximum in both modes, SciPy's Gaussian
and its Laplacian.

Each window is read whole and each Gaussian sum written out term by term, in the order the
package's definitions (:mod:`spacr_accel_core.reference`) give: nothing here is shared with
:mod:`spacr_accel_core.separable`, which the backends run.
"""

from __future__ import annotations

import numpy as np


def _continued(length: int, radius: int, mode: str) -> list[int]:
    """For each position of a line of ``length`` continued by ``radius`` on either side, the pixel read."""
    read = []
    for start in range(-radius, length + radius):
        if mode == "nearest":
            read.append(min(max(start, 0), length - 1))
            continue
        position = start
        while position < 0 or position >= length:  # mirror about whichever edge it crossed, edge repeated
            position = -1 - position if position < 0 else 2 * length - 1 - position
        read.append(position)
    return read


def _kernel(sigma: float, order: int, truncate: float) -> np.ndarray:
    """SciPy's Gaussian kernel (order 0 or 2), as its ``_gaussian_kernel1d`` writes it, reversed
    for a correlation; the weight at offset ``-j`` is at index ``radius - j``."""
    radius = int(truncate * sigma + 0.5)
    x = np.arange(-radius, radius + 1)
    phi = np.exp(-0.5 / (sigma * sigma) * x ** 2)
    phi = phi / phi.sum()
    if order == 2:
        # q(x) = x^2 / sigma^4 - 1 / sigma^2, by SciPy's operator applied twice to q = 1
        powers = np.arange(3)
        q = np.array([1.0, 0.0, 0.0])
        step = np.diag(powers[1:], 1) + np.diag(np.ones(2) / -(sigma * sigma), -1)
        q = step.dot(step.dot(q))
        phi = (x[:, None] ** powers).dot(q) * phi
    return np.asarray(phi[::-1], dtype=np.float64)


def _correlate(data: np.ndarray, sigma: float, order: int, truncate: float, axis: int, mode: str) -> np.ndarray:
    """One 1-D pass of SciPy's correlate1d over ``axis`` of float32 ``data``: float64 sums, float32 out."""
    if sigma <= 1e-15:
        return data
    weights = _kernel(sigma, order, truncate)
    radius = len(weights) // 2
    assert np.array_equal(weights, weights[::-1]), "orders 0 and 2 give symmetric kernels"
    length = data.shape[axis]
    line = np.take(data.astype(np.float64), _continued(length, radius, mode), axis=axis)

    def shifted(offset: int) -> np.ndarray:
        return np.take(line, range(radius + offset, radius + offset + length), axis=axis)

    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf and inf * 0 are NaN, as in SciPy
        total = shifted(0) * weights[radius]
        for j in range(radius, 0, -1):
            total = total + (shifted(-j) + shifted(j)) * weights[radius - j]
        rounded: np.ndarray = total.astype(np.float32)
    return rounded


def _smoothing_arguments(field: object, sigma: object, mode: str) -> tuple[np.ndarray, tuple[float, float]]:
    """The field as float32 (beyond float32's range: infinity, quietly) and one sigma per axis, rows
    first; a mode other than the two the contract has, or fewer than two axes, is refused."""
    with np.errstate(over="ignore"):
        data = np.asarray(field).astype(np.float32)
    pair = tuple(float(s) for s in np.broadcast_to(np.asarray(sigma, dtype=np.float64), (2,)))
    if mode not in ("reflect", "nearest") or data.ndim < 2:
        raise ValueError("a field (..., H, W) and a mode 'reflect' or 'nearest'")
    return data, (pair[0], pair[1])


def gaussian_filter(field: object, sigma: object, truncate: float = 4.0, mode: str = "reflect") -> np.ndarray:
    """SciPy's ``gaussian_filter`` of ``field.astype(float32)`` over its last two axes, plainly."""
    data, (rows, columns) = _smoothing_arguments(field, sigma, mode)
    data = _correlate(data, rows, 0, truncate, data.ndim - 2, mode)
    return _correlate(data, columns, 0, truncate, data.ndim - 1, mode).copy()


def gaussian_laplace(field: object, sigma: object, truncate: float = 4.0, mode: str = "reflect") -> np.ndarray:
    """SciPy's ``gaussian_laplace`` of ``field.astype(float32)`` over its last two axes, plainly."""
    data, (rows, columns) = _smoothing_arguments(field, sigma, mode)
    down, across = data.ndim - 2, data.ndim - 1
    first = _correlate(_correlate(data, rows, 2, truncate, down, mode), columns, 0, truncate, across, mode)
    second = _correlate(_correlate(data, rows, 0, truncate, down, mode), columns, 2, truncate, across, mode)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(first + second, dtype=np.float32)


def _window_extreme(field: object, size: int, mode: str, pick: np.ufunc) -> np.ndarray:
    """The extreme ``pick`` chooses (``np.maximum`` or ``np.minimum``) of every window over the last
    two axes, each field continued by ``mode`` on its own, so no window crosses into another field.

    Even sizes are raised to the next odd; a window of one pixel is the field itself. Adding ``+0.0``
    gives the contract's sign of zero (an extreme of zero is ``+0.0``).
    """
    with np.errstate(over="ignore"):
        data = np.asarray(field).astype(np.float32)
    edge = size + 1 if size % 2 == 0 else size
    if edge <= 1 or data.size == 0:
        return data + np.float32(0.0)
    radius = edge // 2
    down, across = data.ndim - 2, data.ndim - 1
    padded = np.take(np.take(data, _continued(data.shape[down], radius, mode), axis=down),
                     _continued(data.shape[across], radius, mode), axis=across)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (edge, edge), axis=(down, across))
    found = pick.reduce(pick.reduce(windows, axis=-1), axis=-1)  # NaN propagates: the NaN rule
    return np.asarray(found, dtype=np.float32) + np.float32(0.0)


def maximum_filter(field: object, size: int, mode: str = "nearest") -> np.ndarray:
    """The maximum of every ``size`` x ``size`` window of each field, the border continued by ``mode``."""
    return _window_extreme(field, size, mode, np.maximum)


def minimum_filter(field: object, size: int, mode: str = "nearest") -> np.ndarray:
    """The minimum of every ``size`` x ``size`` window of each field, the border continued by ``mode``."""
    return _window_extreme(field, size, mode, np.minimum)
