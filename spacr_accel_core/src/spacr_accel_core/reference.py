"""Plain, obviously correct answers for every operation: what every fast one must equal.

Each operation's table entry names its definition here (``reference=``): the conformance suite's small case and the
bench compare the backends with it. WHY A SEPARATE, SLOW MODULE. A fast exact search is a nominator plus a settling
step, a grid, a tree, a fused kernel: each is a place to be subtly wrong (a tie at the k-th place dropped, a window
crossing two fields of a stack, a distance bound rounded the wrong way). The functions here compare every pair and
every window, in bounded row blocks, with nothing cleverer than a stable sort, so a reader can check them against
the definitions below line by line, and the fast functions are tested against them. They share no code with the
backends (:mod:`spacr_accel_core.exact` included): a reference that shared their code would share their bugs. The
definitions:

- Euclidean "nearer": the float64 sum, coordinate by coordinate in order, of the squared differences of the float32
  coordinates; among equal sums the lower target index. The distance returned is that sum's square root rounded to
  float32.
- Hamming "nearer": the count of differing bits of two rows of packed bits (``uint8``), an exact integer, returned
  as float32; among equal counts the lower index.
- ``k`` nearest: the first ``k`` targets in that order, nearest first. A neighbour whose returned distance is
  greater than ``max_distance``, or that does not exist because there are fewer than ``k`` targets, is index ``-1``
  with distance ``inf``; such entries are always the last of a row.
- A local maximum of a field: a pixel equal to the maximum of its ``size`` x ``size`` window (even sizes raised to
  the next odd, the field's edge repeated beyond its border, a window holding a NaN has a NaN maximum, windows never
  crossing from one 2-D field of a stack into another), and greater than ``threshold`` when one is given. A NaN is
  never a maximum: it equals nothing.
- The window maxima of a stack at points: for each ``(y, x)`` and each field, the maximum of the pixels ``[y - r, y
  + r] x [x - r, x + r]`` that lie inside the field (``r = size // 2`` after even sizes are raised to odd), NaN when
  one of them is NaN, ``+0.0`` for a maximum of zero.
- A phase correlation of two 2-D fields (spaCR's definition): the float64 real FFTs ``A`` and ``B``; ``A * conj(B)``
  divided by its magnitude where that is non-zero, else 0; the zero frequency 0; the inverse real FFT at the field's
  shape. The peak is the first maximum in row-major order, the ratio the peak over the mean absolute surface (0 for
  a zero mean); each coordinate of the peak is folded to its representative nearest the expected shift (halfway: an
  even number of periods away). Accepted: within ``tolerance`` of the expected shift when one is given, else a ratio
  of at least ``min_peak_ratio`` with the peak not at the origin. A field with no variation has a zero surface (peak
  at the origin, ratio 0) and is never accepted.
- A mutual pair ``(i, j)``: ``j`` is the nearest of ``first[i]`` in ``second``, ``i`` the nearest of ``second[j]``
  in ``first``, each within ``max_distance``.
- The Gaussian filters: SciPy's ``gaussian_filter`` and ``gaussian_laplace`` of the float32 field over its last two
  axes: per axis (rows first) a 1-D correlation with SciPy's kernel summed in float64 (the centre term, then each
  mirrored pair from the outermost in) and rounded to float32; an axis whose sigma is at most ``1e-15`` left as it
  is. The Laplacian is the float32 sum of the second derivative along the rows and the second derivative along the
  columns.
- The minimum and maximum filters: the extreme of every ``size`` x ``size`` window, the field continued beyond its
  border by the mode (``"nearest"`` repeats the edge pixel, ``"reflect"`` mirrors the field with the edge pixel
  repeated), a window holding a NaN is NaN, a zero is ``+0.0``.
"""

from __future__ import annotations

import logging
import math
import operator
import warnings
from typing import Any

import numpy as np

from .contract._registration import Registration

__all__ = ["attribute_reads", "count_within", "gaussian_filter", "gaussian_laplace", "hamming_nearest", "k_nearest",
           "local_maxima", "matmul", "maximum_filter", "minimum_filter", "mutual_nearest", "nearest_neighbours",
           "percentiles", "phase_correlate", "phase_correlation", "rescale_fields", "spot_score", "translate",
           "window_maxima"]

_log = logging.getLogger(__name__)

_BLOCK_PAIRS = 1 << 20
"""Pairs compared in one block of rows: a few tens of MiB of float64 and bits at most, whatever the
input's size, so the reference runs on sets far too large for an all-pairs matrix."""

METRICS = ("euclidean", "hamming")
"""The metrics :func:`mutual_nearest` takes."""


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
    needed. Rows shorter than ``k`` give all their columns."""
    order = np.argsort(distance, axis=1, kind="stable")
    return order[:, :k]


def _finish(index: np.ndarray, found: np.ndarray, limit: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Pad rows to ``k`` columns with ``-1``/``inf`` and drop the neighbours beyond ``limit``.

    ``found`` is float32 and ``limit`` a float: the comparison is made exactly, in float64."""
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
    :raises TypeError: ``k`` not an integer, coordinates that are not numbers."""
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
    :raises ValueError: different row widths, a negative or NaN limit."""
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


def _window_maximum(field: np.ndarray, size: int) -> np.ndarray:
    """The windowed maximum of one 2-D float32 field: edge padding, then the maximum of every window.

    ``ndarray.max`` propagates NaN, which is the NaN rule."""
    if size <= 1 or field.size == 0:
        return field.copy()
    radius = size // 2
    padded = np.pad(field, radius, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, (size, size))
    return np.asarray(windows.max(axis=(-2, -1)), dtype=np.float32)


def _size(size: object) -> int:
    """The window edge as an odd int (even raised, as the contract's maximum_filter does)."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise TypeError(f"size must be an integer, not {type(size).__name__}")
    edge = operator.index(size)
    if edge < 1:
        raise ValueError(f"size must be at least 1, not {size}")
    return edge + 1 if edge % 2 == 0 else edge


def local_maxima(field: object, size: int, threshold: float | None = None) -> np.ndarray:
    """The coordinates of the pixels equal to their window's maximum (and above ``threshold``), plainly.

    Each 2-D field of a stack is filtered on its own (edge padding per field), so a window never
    reaches into the neighbouring field; the comparison is ``pixel == window maximum``, which a NaN
    never passes, and ``pixel > threshold``, made exactly in float64.

    :param field: ``(..., H, W)`` numbers, taken as float32 (the contract's maximum_filter casts so).
        A stack of fields (a plate, the cycles of a screen) is answered in one call.
    :param size: the window edge, at least 1 (even raised to the next odd; 1 makes every non-NaN
        pixel a maximum).
    :param threshold: only pixels greater than it; ``None``: every maximum. Rejects the flat
        background, where every pixel of a constant region equals its window's maximum.
    :returns: int64 ``(P, field.ndim)`` coordinates in row-major order.
    :raises ValueError: fewer than 2 dimensions, a NaN threshold.
    :raises TypeError: a non-numeric field or size."""
    data = np.asarray(field)
    if data.ndim < 2:
        raise ValueError(f"field must have at least 2 dimensions (..., H, W), not {data.ndim}")
    if data.dtype.kind not in "biuf":
        raise TypeError(f"field must hold numbers, not {data.dtype}")
    edge = _size(size)
    if threshold is not None and math.isnan(float(threshold)):
        raise ValueError("threshold must be a number, not NaN (no pixel would ever pass it)")
    values = data.astype(np.float32)
    flat = values.reshape((-1, *values.shape[-2:]))
    peak = np.empty(flat.shape, dtype=bool)
    for number, plane in enumerate(flat):
        peak[number] = plane == _window_maximum(plane, edge)
    if threshold is not None:
        peak &= values.reshape(flat.shape).astype(np.float64) > float(threshold)
    return np.argwhere(peak.reshape(values.shape)).astype(np.int64, copy=False)


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
    :raises ValueError: an unknown metric (and whatever the one-way searches refuse)."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, not {metric!r}")
    search = k_nearest if metric == "euclidean" else hamming_nearest
    forward, _ = search(first, second, 1, max_distance)
    backward, _ = search(second, first, 1, max_distance)
    forward, backward = forward[:, 0], backward[:, 0]
    rows = np.flatnonzero(forward >= 0)
    mutual = rows[backward[forward[rows]] == rows]
    return np.stack([mutual, forward[mutual]], axis=1).astype(np.int64, copy=False)


# ---- the decode chain's filters ------------------------------------------------------------------


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


# ---- the decode chain: base intensities and registration ----------------------------------------


def window_maxima(stack: object, points: object, size: int) -> np.ndarray:
    """float32 ``(N, *stack.shape[:-2])``: each point's window maximum in every field, one window at a time."""
    data = np.asarray(stack).astype(np.float32)
    rows = np.asarray(points, dtype=np.int64).reshape(-1, 2)
    radius = _size(size) // 2
    height, width = data.shape[-2:]
    out = np.empty((rows.shape[0], *data.shape[:-2]), dtype=np.float32)
    for n, (y, x) in enumerate(rows):
        top, bottom = max(0, y - radius), min(height, y + radius + 1)
        window = data[..., top:bottom, max(0, x - radius):min(width, x + radius + 1)]
        best = window.max(axis=(-2, -1))  # NumPy's max propagates NaN: the NaN rule
        out[n] = best + np.float32(0.0)
    return out


def _nearest_turn(value: int, extent: int, about: int) -> int:
    """The representative of ``value`` modulo ``extent`` nearest ``about`` (ties: round half to even)."""
    from fractions import Fraction

    return value + extent * round(Fraction(about - value, extent))


def phase_correlation(first: object, second: object, expected: tuple[int, int] = (0, 0),
                      tolerance: float | tuple[float, float] | None = None,
                      min_peak_ratio: float = 3.0) -> tuple[int, int, float, bool]:
    """``(dy, dx, peak_ratio, accepted)`` of two 2-D fields by the definition above, in plain NumPy."""
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


# ---- the product and the one-way search, as ops calls them ---------------------------------------

def matmul(first: object, second: object) -> np.ndarray:
    """``first @ second`` in float64, rounded once to float32: what a float32 product approximates."""
    product: np.ndarray = np.matmul(np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64))
    return product.astype(np.float32)


def nearest_neighbours(source: object, target: object, k: int = 1, max_distance: float | None = None,
                       metric: str = "euclidean") -> tuple[np.ndarray, np.ndarray]:
    """The contract's ``nearest_neighbours``: :func:`k_nearest` or :func:`hamming_nearest`, with
    ``k=1``'s ``(N,)`` shapes (an empty target set: ``-1`` and ``inf``)."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, not {metric!r}")
    search = k_nearest if metric == "euclidean" else hamming_nearest
    index, distance = search(source, target, k, max_distance)
    return (index[:, 0], distance[:, 0]) if k == 1 else (index, distance)


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


def translate(stack: object, shifts: object) -> np.ndarray:
    """Each field moved by its whole-pixel ``(dy, dx)`` (``shifts`` broadcast against the leading
    axes), pixel by pixel: ``out[..., y, x] = stack[..., y - dy, x - dx]`` where that pixel exists,
    else zero; the dtype kept."""
    data = np.asarray(stack)
    moves = np.broadcast_to(np.asarray(shifts), (*data.shape[:-2], 2))
    height, width = data.shape[-2:]
    out = np.zeros_like(data)
    for index in np.ndindex(*data.shape[:-2]):
        dy, dx = (max(-e, min(e, int(v))) for v, e in zip(moves[index], (height, width), strict=True))
        for y in range(height):
            if 0 <= y - dy < height:
                for x in range(width):
                    if 0 <= x - dx < width:
                        out[(*index, y, x)] = data[(*index, y - dy, x - dx)]
    return out


def spot_score(stack: object) -> np.ndarray:
    """spaCR's read score, by its own NumPy expression on the float32 stack in C order: the standard
    deviation over the cycles, then the mean over the channels (one cycle: the standard deviation
    over the channels). NumPy's float32 reductions along the first axis of a C-ordered array add
    the cycles in order, pixel by pixel (a single pixel is summed pairwise): that order is the answer."""
    data = np.ascontiguousarray(stack, dtype=np.float32)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # an empty axis: NaN, as NumPy answers it
        score = data[0].std(axis=0) if data.shape[0] == 1 else data.std(axis=0).mean(axis=0)
    return np.asarray(score, dtype=np.float32)


def attribute_reads(peaks: object, centroids: object, areas: object, *, footprint: float = 10.0,
                    tie: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """spaCR's ``attribute_reads``, read by read: the objects within ``max(radius) + footprint`` of a
    read by SciPy's KD-tree ball query, each one's gap ``np.hypot(dy, dx) - radius`` in float64, a
    stable sort; no owner beyond ``footprint``, ambiguous when the two smallest gaps differ by less
    than ``tie``."""
    from scipy.spatial import cKDTree

    points = np.asarray(peaks, dtype=float).reshape(-1, 2)
    centres = np.asarray(centroids, dtype=float).reshape(-1, 2)
    radius = np.sqrt(np.maximum(np.asarray(areas, dtype=float).reshape(-1), 0.0) / np.pi)
    owner = np.full(points.shape[0], -1, dtype=np.int64)
    ambiguous = np.zeros(points.shape[0], dtype=bool)
    if points.shape[0] == 0 or centres.shape[0] == 0:
        return owner, ambiguous
    reach = float(radius.max()) + float(footprint)
    for index, found in enumerate(cKDTree(centres).query_ball_point(points, r=reach)):
        if not found:
            continue
        near = np.asarray(found, dtype=np.int64)
        gap = np.hypot(centres[near, 0] - points[index, 0], centres[near, 1] - points[index, 1]) - radius[near]
        order = np.argsort(gap, kind="stable")
        if gap[order[0]] > footprint:
            continue
        if order.size > 1 and gap[order[1]] - gap[order[0]] < tie:
            ambiguous[index] = True
            continue
        owner[index] = int(near[order[0]])
    return owner, ambiguous


def count_within(moved: object, target: object, radius: float) -> np.ndarray:
    """spaCR's inlier count of each moved set: ``np.sum(cKDTree(target).query(points)[0] <= radius)``."""
    from scipy.spatial import cKDTree

    sets = np.asarray(moved, dtype=np.float64)
    tree = cKDTree(np.asarray(target, dtype=np.float64).reshape(-1, 2))
    lead = sets.shape[:-2]
    out = np.zeros(lead, dtype=np.int64)
    for index in np.ndindex(*lead):
        if sets[index].shape[0]:
            out[index] = int(np.sum(tree.query(sets[index])[0] <= radius))
    return out


def percentiles(stack: object, q: Any) -> object:
    """NumPy's own ``np.percentile(field, q)`` on each 2-D field of a stack, one call per field."""
    data = np.asarray(stack)
    if data.ndim == 2:
        return np.percentile(data, q)
    rows = [np.asarray(np.percentile(data[index], q)) for index in np.ndindex(*data.shape[:-2])]
    probe = np.asarray(np.percentile(np.zeros(1, data.dtype), q))
    out = np.stack(rows) if rows else np.empty((0, *probe.shape), probe.dtype)
    return out.reshape(*data.shape[:-2], *probe.shape)


def rescale_fields(stack: object, scale: object, low: object, high: object) -> np.ndarray:
    """``np.clip(field / scale, low, high)`` per field, with NumPy scalars: float64 where the stack, or a NumPy
    value among the three, is float64 or a wide integer, else float32 (a Python number is weak, NEP 50)."""
    data, wide = np.asarray(stack), {np.dtype(d) for d in (np.float64, np.int32, np.uint32, np.int64, np.uint64)}
    kind: type[np.floating[Any]] = np.float64 if data.dtype in wide or any(
        np.asarray(v).dtype in wide for v in (scale, low, high) if type(v) not in (int, float)) else np.float32
    by, lo, hi = (np.broadcast_to(np.asarray(v), data.shape[:-2]) for v in (scale, low, high))
    out = np.empty(data.shape, dtype=kind)
    for i in np.ndindex(*data.shape[:-2]):
        with np.errstate(all="ignore"):
            out[i] = np.clip(np.asarray(data[i], dtype=kind) / kind(by[i]), kind(lo[i]), kind(hi[i]))
    return out
