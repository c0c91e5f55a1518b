"""The array operations spaCR's slow steps are made of, on whatever hardware there is.

A drop-in for ``spacr.ops_accel``. Strip the science away and peak finding, spectral unmixing and
cell matching are a windowed maximum, a matrix multiply and a nearest-neighbour search; they live
here so ONE place knows about devices and the modules that use them go on reading as the science
they are. Around them sit the calls the science makes of them: peaks as coordinates
(:func:`local_maxima`), the k nearest within a distance, binary descriptors (``metric="hamming"``)
and mutual matching (:func:`mutual_nearest_neighbours`).

EVERY FUNCTION TAKES AND RETURNS NUMPY, and every backend gives the same answer: the windowed
maximum bit for bit, the nearest neighbours exactly (ties to the lowest index), the product to
float32 rounding. Input is checked here, once, before any backend runs, so a wrong call fails
with a message that names the argument rather than with a device traceback.

AND IT NEVER ASSUMES THE CARD IS FREE. ``gpu=False`` refuses a device that exists, and a backend
that raises at run time (an out-of-memory, a driver that went away) falls through to the next.
THE CPU PATH IS NOT AN ERROR PATH: it is what runs on a laptop, in CI and beside a busy card.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._ops_levels import clip_to_percentiles, normalise_to_percentile, percentiles, rescale_fields
from ._ops_planes import spot_score, translate
from ._ops_points import attribute_reads, count_within
from .contract._declaration import NARROW_FIELDS
from .contract._registration import (
    Registration,
    cast_keeping_broadcast,
    judge,
    reference_fields,
)
from .dispatch._registry import REGISTRY
from .operations._checks import (
    _F32,
    _I64,
    _NUMERIC_KINDS,
    _ZERO,
    SIGMA_SKIPPED,
    _numeric,
    _options,
    _points,
    _product_shape,
    _read_only,
    _widths_and_chunk,
    as_filtered,
    distance_bound,
    expected_shift,
    field_array,
    field_pair,
    filter_mode,
    kernel_radii,
    metric_name,
    neighbour_count,
    out_array,
    packed_bits,
    ratio_floor,
    shift_tolerance,
    sigma_pair,
    threshold_below,
    truncate_value,
    window_edge,
    window_points,
)
from .operations._registration_fields import finite_and_in_range

__all__ = [
    "CHUNK", "Registration", "accelerated_backends", "attribute_reads", "clip_to_percentiles",
    "count_within", "gaussian_filter", "gaussian_laplace", "local_maxima", "matmul",
    "maximum_filter", "minimum_filter", "mutual_nearest_neighbours", "nearest_neighbours",
    "normalise_to_percentile", "percentiles", "phase_correlate", "rescale_fields", "spot_score",
    "translate", "window_maxima",
]

CHUNK = 4096
"""Default rows of ``source`` per pass of :func:`nearest_neighbours` (an upper bound; backends
may take fewer to stay inside their memory budget, and the answer never depends on it)."""


def accelerated_backends(gpu: bool = True) -> tuple[str, ...]:
    """Which backends can run here, best first, ending in ``"numpy"`` (the floor that always runs).

    Honours ``SPACR_ACCEL_BACKENDS`` and an enclosing ``use(...)``. Only ``SPACR_ACCEL_DISABLE=numpy``
    removes the floor, and then it is absent here too (and a call nothing else serves says why).

    :param gpu: ``False`` refuses the accelerated ones outright (without asking them anything).
    :returns: the usable names.
    """
    return REGISTRY.backend_names(_options(gpu, None))


def _whole_field_maxima(data: np.ndarray) -> np.ndarray:
    """Each field's maximum, shaped to broadcast over it: the answer for a window covering every
    pixel from every pixel (``size >= 2 * max(H, W) - 1`` with the edge repeated). np.max
    propagates NaN (the NaN rule), and rounding to float32 is monotonic."""
    with np.errstate(over="ignore"):
        maxima: np.ndarray = np.max(data, axis=(-2, -1), keepdims=True).astype(_F32)
    return maxima


def maximum_filter(field: Any, size: Any, *, mode: str = "nearest", gpu: Any = True,
                   backend: str | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """The maximum of each ``size`` x ``size`` window, centred on every pixel.

    WHAT PEAK FINDING IS MADE OF: a read is a local maximum of the spot score, and "local" means
    this. Edges repeat the border pixel, matching ``scipy.ndimage.maximum_filter(...,
    mode="nearest")``, because the alternative is a rim of false maxima all the way round the field.
    The result is bit-identical on every backend to scipy on ``field.astype(float32)``, with two
    rules scipy lacks: a window holding a NaN yields NaN (scipy's answer depends on where the NaN
    sits, and backends disagree there), and a maximum of zero is ``+0.0`` (scipy may return
    ``-0.0``, whichever zero its scan met first).

    :param field: a 2-D array of real numbers, or a stack ``(..., H, W)`` of them: each field is
        filtered on its own (the window never crosses fields), in one dispatch.
    :param size: the window edge, in pixels: an integer, or a float holding a whole number
        (``7.0``). Even sizes are raised to the next odd one (a window with no centre cannot be
        centred); ``size <= 1`` returns a copy.
    :param mode: how the field continues beyond its border: ``"nearest"`` repeats the edge pixel;
        ``"reflect"`` mirrors the field about its edge, the edge pixel repeated (``d c b a | a b c
        d``), as ``scipy.ndimage`` means it. The two give the same answer: a window reaching past
        the edge already holds every pixel either border would bring into it (the edge pixel; the
        mirror images of pixels nearer the edge than the window's reach), so the maximum is
        that of the window clipped to the field, and every backend serves both.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :param out: a float32 C-contiguous array of the field's shape to write into (NumPy's
        convention; it must not overlap ``field``): spares a large field's fresh-page faults.
    :returns: the filtered field as float32 of the same shape (``out`` when given).
    :raises ValueError: ``field`` is not 2-D (or a stack), ``size`` is negative or fractional,
        ``mode`` is unknown, or ``out`` has the wrong shape, layout, or overlaps ``field``.
    :raises TypeError: ``field`` is not numeric (or a masked array), ``size`` is not a number,
        ``out`` is not a float32 array, or ``gpu``/``backend`` are not a bool and a name.
    """
    return _window_extreme("maximum_filter", field, size, mode, gpu, backend, out)


def _window_extreme(operation: str, field: Any, size: Any, mode: Any, gpu: Any, backend: str | None,
                    out: np.ndarray | None) -> np.ndarray:
    """``maximum_filter`` or ``minimum_filter``: checked, answered here where no backend is needed,
    dispatched otherwise."""
    array = field_array(field)
    window = window_edge(size)
    filter_mode(mode)  # either answer is the window clipped to the field: see maximum_filter
    use_gpu = _options(gpu, backend)
    target = out_array(out, array.shape, array)
    if window <= 1 or array.size == 0 or window >= 2 * max(array.shape[-2:]) - 1:
        # No backend needed: a copy, an empty field, or a window that covers the whole field from
        # every pixel (a thin (1, 70000) field with size 200001 would otherwise ask a backend for
        # a 110 GiB padded buffer). Reflected or repeated, such a window holds every pixel of its
        # field: its reach, at least n - 1 along an axis of n, touches both ends from anywhere.
        REGISTRY.record_served(operation)
        answer = np.empty(array.shape, _F32) if target is None else target
        if window <= 1 or array.size == 0:
            answer[...] = as_filtered(array)
        else:
            answer[...] = _whole_field_extremes(array, operation == "minimum_filter")
        np.add(answer, _ZERO, out=answer)  # the +0.0 rule holds for a copy too
        return answer
    result: np.ndarray = REGISTRY.dispatch(
        operation, {"field": _read_only(as_filtered(array)), "size": window, "out": target}, gpu=use_gpu,
        backend=backend, expected=(array.shape, target))
    return result


def matmul(first: Any, second: Any, *, gpu: Any = True, backend: str | None = None,
           out: np.ndarray | None = None) -> np.ndarray:
    """``first @ second``, on the fastest thing available, as float32.

    THE UNMIXING IS THIS: correcting dye bleed-through is one small matrix applied to every spot
    of every cycle, a large multiply by a tiny operand, called per tile; so the checks here are
    kept to a few attribute reads.

    :param first: left operand (NumPy's ``@`` shape rules; at least 1-D).
    :param second: right operand.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :param out: a float32 C-contiguous array of the product's shape to write into (it must not
        overlap an operand): a fresh 64 MB result's page faults are about 40% of the product's time.
    :returns: the product as float32 NumPy (a 0-d array for two vectors; ``out`` when given).
    :raises ValueError: an operand is 0-d, the shapes do not multiply, or ``out`` does not fit.
    :raises TypeError: an operand is not real-numeric, or ``out`` is not a float32 array.
    """
    a = first if type(first) is np.ndarray else _numeric(first, "first")
    b = second if type(second) is np.ndarray else _numeric(second, "second")
    if a.dtype.kind not in _NUMERIC_KINDS or b.dtype.kind not in _NUMERIC_KINDS:
        _numeric(a, "first")
        _numeric(b, "second")
    a_shape, b_shape = a.shape, b.shape
    if len(a_shape) == 2 and len(b_shape) == 2 and a_shape[1] == b_shape[0]:
        shape: tuple[int, ...] = (a_shape[0], b_shape[1])  # the per-tile case, inline
    elif not a_shape or not b_shape:
        raise ValueError(
            f"matmul: operands must be at least 1-D, got first {a_shape} and second {b_shape}"
        )
    else:
        shape = _product_shape(a_shape, b_shape)
    use_gpu = gpu if gpu is True and backend is None else _options(gpu, backend)
    target = None if out is None else out_array(out, shape, a, b)
    if a.size == 0 or b.size == 0:
        REGISTRY.record_served("matmul")
        if target is None:
            return np.zeros(shape, dtype=_F32)
        target.fill(0.0)
        return target
    a_view = a.view()  # read-only views, inline: this is the per-tile path (see _read_only)
    a_view.setflags(write=False)
    b_view = b.view()
    b_view.setflags(write=False)
    return REGISTRY.dispatch(  # type: ignore[no-any-return]  # the check guarantees an ndarray
        "matmul", {"first": a_view, "second": b_view, "out": target}, gpu=use_gpu, backend=backend,
        expected=(shape, target))


def _point_sets(source: Any, target: Any, metric: str,
                names: tuple[str, str] = ("source", "target")) -> tuple[np.ndarray, np.ndarray]:
    """Both point sets as the backends receive them: C-contiguous float32 and finite (Euclidean),
    or C-contiguous uint8 rows of packed bits (Hamming). ``names`` are the caller's own argument
    names, so a message names what the user passed."""
    src = _points(source, names[0])
    tgt = _points(target, names[1])
    if metric == "hamming":
        packed_bits(src.dtype, names[0])
        packed_bits(tgt.dtype, names[1])
        return np.ascontiguousarray(src), np.ascontiguousarray(tgt)
    with np.errstate(over="ignore"):  # an out-of-range coordinate becomes inf, refused just below
        src = np.ascontiguousarray(src, dtype=_F32)
        tgt = np.ascontiguousarray(tgt, dtype=_F32)
    for name, points in zip(names, (src, tgt), strict=True):
        if not np.isfinite(points).all():
            raise ValueError(f"{name} holds NaN or infinite coordinates (after conversion to float32)")
    return src, tgt


def nearest_neighbours(
    source: Any,
    target: Any,
    *,
    gpu: Any = True,
    backend: str | None = None,
    chunk: Any = CHUNK,
    k: Any = 1,
    max_distance: Any = None,
    metric: str = "euclidean",
) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``source``, the closest rows of ``target``: exact, ties to the lowest index.

    CHUNKED, ALWAYS: a well can carry a hundred thousand nuclei and the full distance matrix
    between two such sets is 40 GB, so every backend bounds its working set however large the
    well is. Ties go to the lower index on every backend, so a caller pairing mutual nearest
    neighbours gets the same pairs whatever ran. Coordinates are taken as float32 (as spaCR
    did); "nearest" is decided exactly in float64 on those values.

    :param source: ``(N, D)`` points (uint8 packed bits for ``metric="hamming"``).
    :param target: ``(M, D)`` points, the same kind.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :param chunk: at most this many source rows per pass; the answer does not depend on it.
    :param k: neighbours per source row: the ratio test's nearest and second nearest is ``k=2``.
    :param max_distance: a neighbour farther than this (compared on the returned float32
        distance) is ``-1`` with distance ``inf``: a cell that left the field is matched to nobody
        rather than to a stranger. It also prunes the search.
    :param metric: ``"euclidean"``, or ``"hamming"`` for binary descriptors (ORB): the distance is
        the count of differing bits, as a float32 holding an exact integer.
    :returns: ``(indices, distances)``: int64 and float32, of shape ``(N,)`` for ``k=1`` and
        ``(N, k)`` otherwise, nearest first, equal distances in index order. A neighbour missing
        (fewer than ``k`` targets, an empty ``target``, or beyond ``max_distance``) is ``-1``/``inf``.
    :raises ValueError: not 2-D, not the same width, no coordinates, NaN or infinite
        coordinates, ``chunk < 1``, ``k < 1``, a negative or NaN ``max_distance``, an unknown metric.
    :raises TypeError: non-numeric points, a non-integer chunk or k, or Hamming points not uint8.
    """
    use_gpu = _options(gpu, backend)
    kind = metric_name(metric)
    count = neighbour_count(k)
    bound = distance_bound(max_distance)
    src, tgt = _point_sets(source, target, kind)
    rows = _widths_and_chunk(src.shape, tgt.shape, chunk)
    n, m = src.shape[0], tgt.shape[0]
    if n == 0 or m == 0:
        REGISTRY.record_served("nearest_neighbours")
        shape = (n,) if count == 1 else (n, count)
        return np.full(shape, -1, dtype=_I64), np.full(shape, np.inf, dtype=_F32)
    return REGISTRY.dispatch(  # type: ignore[no-any-return]  # the check guarantees the pair
        "nearest_neighbours", {"source": _read_only(src), "target": _read_only(tgt), "chunk": rows, "k": count,
                               "max_distance": bound, "metric": kind}, gpu=use_gpu,
        backend=backend, expected=(n, m, count, bound is not None or count > m))


def mutual_nearest_neighbours(first: Any, second: Any, *, max_distance: Any = None,
                              metric: str = "euclidean", gpu: Any = True,
                              backend: str | None = None) -> np.ndarray:
    """The pairs of points that are each other's nearest: how spaCR matches cells between cycles.

    Exactly the pairs the two one-way calls agree on: ``(i, j)`` with ``j`` the nearest of
    ``first[i]`` in ``second`` and ``i`` the nearest of ``second[j]`` in ``first``, both within
    ``max_distance``. Each direction is one :func:`nearest_neighbours` dispatch (ties to the lowest
    index on every backend, so the pairs never depend on what ran).

    :param first: ``(N, D)`` points (uint8 packed bits for ``metric="hamming"``).
    :param second: ``(M, D)`` points, the same kind.
    :param max_distance: a pair farther apart than this is no pair.
    :param metric: ``"euclidean"`` or ``"hamming"``.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: int64 pairs ``(P, 2)`` sorted by the first index.
    :raises ValueError: as :func:`nearest_neighbours`.
    :raises TypeError: as :func:`nearest_neighbours`.
    """
    use_gpu = _options(gpu, backend)
    kind = metric_name(metric)
    bound = distance_bound(max_distance)
    a, b = _point_sets(first, second, kind, ("first", "second"))  # checked once, for both directions
    _widths_and_chunk(a.shape, b.shape, CHUNK, ("first", "second"))
    if a.shape[0] == 0 or b.shape[0] == 0:
        REGISTRY.record_served("mutual_nearest_neighbours")
        return np.empty((0, 2), dtype=_I64)
    served = []
    directions = ((a, b), (b, a))
    found = []
    for source, target in directions:
        index, _ = REGISTRY.dispatch(
            "nearest_neighbours", {"source": _read_only(source), "target": _read_only(target), "chunk": CHUNK, "k": 1,
                                   "max_distance": bound, "metric": kind}, gpu=use_gpu,
            backend=backend, expected=(source.shape[0], target.shape[0], 1, bound is not None))
        found.append(index)
        served.append(REGISTRY.last_dispatch())
    forward, backward = found
    matched = np.flatnonzero(forward >= 0)
    mutual = matched[backward[forward[matched]] == matched]
    names = list(dict.fromkeys(d.backend for d in served if d is not None))
    declined = tuple(dict.fromkeys(row for d in served if d is not None for row in d.declined))
    waiting = tuple(dict.fromkeys(name for d in served if d is not None for name in d.waiting))
    REGISTRY.record_served("mutual_nearest_neighbours", ", ".join(names), declined, waiting)
    return np.stack([mutual, forward[mutual]], axis=1).astype(_I64, copy=False).reshape(-1, 2)


def local_maxima(field: Any, size: Any, *, threshold: Any = None, gpu: Any = True,
                 backend: str | None = None) -> np.ndarray:
    """The peaks of a field: the pixels equal to their window's maximum, as coordinates.

    "A read is a local maximum of the spot score": the pixels where :func:`maximum_filter` of the
    field equals the field, above ``threshold`` when given. On a card only the coordinates cross
    the bus: a few kilobytes of peaks instead of the whole 64 MiB filtered field.

    :param field: a 2-D array of real numbers, or a stack ``(..., H, W)`` (the window never
        crosses fields).
    :param size: the window edge, as for :func:`maximum_filter` (even sizes raised to odd).
    :param threshold: only pixels greater than this are peaks (compared exactly with the pixel's
        float32 value); ``None``: every local maximum. A NaN pixel is never a peak.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: int64 coordinates ``(P, field.ndim)`` in row-major order.
    :raises ValueError: as :func:`maximum_filter`, or a NaN threshold.
    :raises TypeError: as :func:`maximum_filter`, or a threshold that is not a number.
    """
    array = field_array(field)
    window = window_edge(size)
    use_gpu = _options(gpu, backend)
    below = threshold_below(threshold)
    data = as_filtered(array)
    if window <= 1 or array.size == 0 or window >= 2 * max(array.shape[-2:]) - 1:
        REGISTRY.record_served("local_maxima")
        values = data.astype(_F32, copy=False)
        peak = ~np.isnan(values)
        if window > 1 and array.size:
            peak &= values == _whole_field_maxima(values)
        if below is not None:
            peak &= values > below
        return np.argwhere(peak).astype(_I64, copy=False)
    return REGISTRY.dispatch(  # type: ignore[no-any-return]  # the check guarantees the coordinates
        "local_maxima", {"field": _read_only(data), "size": window, "threshold": below}, gpu=use_gpu, backend=backend,
        expected=array.shape)


# ---- the decode chain's filters ------------------------------------------------------------------


def _whole_field_extremes(data: np.ndarray, minimum: bool) -> np.ndarray:
    """Each field's minimum or maximum, shaped to broadcast over it (see :func:`_whole_field_maxima`)."""
    if not minimum:
        return _whole_field_maxima(data)
    with np.errstate(over="ignore"):
        minima: np.ndarray = np.min(data, axis=(-2, -1), keepdims=True).astype(_F32)
    return minima


def minimum_filter(field: Any, size: Any, *, mode: str = "nearest", gpu: Any = True,
                   backend: str | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """The minimum of each ``size`` x ``size`` window, centred on every pixel.

    THE BACKGROUND FLOOR OF A CYCLE'S IMAGE: the local minimum is what a spot sits on, the first
    half of a morphological opening. The rules are :func:`maximum_filter`'s, with the minimum:
    ``scipy.ndimage.minimum_filter(field.astype(float32), size, mode=mode)`` bit for bit on every
    backend, a window holding a NaN yields NaN, a minimum of zero is ``+0.0``, even sizes are
    raised to the next odd one, a stack ``(..., H, W)`` is filtered field by field.

    :param field: a 2-D array of real numbers, or a stack ``(..., H, W)`` of them.
    :param size: the window edge in pixels (as for :func:`maximum_filter`).
    :param mode: ``"nearest"`` (the edge pixel repeated) or ``"reflect"`` (the field mirrored
        about its edge, the edge pixel repeated).
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :param out: a float32 C-contiguous array of the field's shape to write into.
    :returns: the filtered field as float32 of the same shape (``out`` when given).
    :raises ValueError: as :func:`maximum_filter`.
    :raises TypeError: as :func:`maximum_filter`.
    """
    return _window_extreme("minimum_filter", field, size, mode, gpu, backend, out)


def _smoothing(operation: str, field: Any, sigma: Any, truncate: Any, mode: Any, gpu: Any,
               backend: str | None, out: np.ndarray | None) -> np.ndarray:
    """``gaussian_filter`` or ``gaussian_laplace``: checked, answered here where no axis is
    smoothed or the field is empty, dispatched otherwise."""
    array = field_array(field)
    pair = sigma_pair(sigma)
    reach = truncate_value(truncate)
    kernel_radii(pair, reach)  # a kernel no array can hold is the caller's, refused before a backend
    border = filter_mode(mode)
    use_gpu = _options(gpu, backend)
    target = out_array(out, array.shape, array)
    if array.size == 0 or max(pair) <= SIGMA_SKIPPED:
        # SciPy smooths no axis whose sigma is at most 1e-15: the filter is a copy, and the
        # Laplacian the sum of two copies (each "second derivative" left the field as it was).
        REGISTRY.record_served(operation)
        answer = np.empty(array.shape, _F32) if target is None else target
        answer[...] = as_filtered(array)
        if operation == "gaussian_laplace":
            with np.errstate(over="ignore", invalid="ignore"):
                np.add(answer, answer, out=answer)
        return answer
    result: np.ndarray = REGISTRY.dispatch(
        operation, {"field": _read_only(as_filtered(array)), "sigma": pair, "out": target, "truncate": reach,
                    "mode": border}, gpu=use_gpu,
        backend=backend, expected=(array.shape, target))
    return result


def gaussian_filter(field: Any, sigma: Any, *, truncate: Any = 4.0, mode: str = "reflect", gpu: Any = True,
                    backend: str | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """The field smoothed by a Gaussian: ``scipy.ndimage.gaussian_filter`` bit for bit.

    THE FIRST STEP OF DECODING A CYCLE: the image is smoothed before its spots are scored. The
    answer is ``scipy.ndimage.gaussian_filter(field.astype(float32), sigma, mode=mode,
    truncate=truncate, axes=(-2, -1))`` to the last bit on every backend: each backend sums every
    pixel's pass in float64 in SciPy's order and rounds to float32 between the passes (see
    :mod:`spacr_accel_core.separable`); a device without float64 declines.

    :param field: a 2-D array of real numbers, or a stack ``(..., H, W)``: each field smoothed on
        its own over its last two axes.
    :param sigma: the standard deviation in pixels: a number, or a pair ``(rows, columns)``. Each
        finite and not negative; 0 smooths nothing along that axis, as in SciPy (which leaves an
        axis whose sigma is at most ``1e-15`` as it is).
    :param truncate: the kernel's reach in standard deviations (radius ``int(truncate * sigma +
        0.5)`` pixels), as in SciPy.
    :param mode: ``"reflect"`` (SciPy's default: the field mirrored about its edge, the edge pixel
        repeated) or ``"nearest"`` (the edge pixel repeated).
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :param out: a float32 C-contiguous array of the field's shape to write into.
    :returns: float32 of the field's shape (``out`` when given).
    :raises ValueError: ``field`` is not 2-D (or a stack); ``sigma`` is negative, not finite or
        not one or two values; ``truncate`` is negative or not finite; the two give a kernel radius
        no NumPy array can hold (over ``2**59 - 1`` pixels); ``mode`` is unknown; ``out`` does not fit.
    :raises TypeError: ``field``, ``sigma`` or ``truncate`` is not numeric, ``mode`` is not a
        string, ``out`` is not a float32 array.
    """
    return _smoothing("gaussian_filter", field, sigma, truncate, mode, gpu, backend, out)


def gaussian_laplace(field: Any, sigma: Any, *, truncate: Any = 4.0, mode: str = "reflect", gpu: Any = True,
                     backend: str | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """The Laplacian of the Gaussian-smoothed field: ``scipy.ndimage.gaussian_laplace`` bit for bit.

    THE SPOT SCORE: a bright spot of about ``sigma`` pixels is a deep minimum of this. Per field,
    the second derivative along the rows (smoothed along the columns) plus the second derivative
    along the columns (smoothed along the rows), each as SciPy computes it, added in float32.
    The arguments and rules are :func:`gaussian_filter`'s.

    :param field: a 2-D array of real numbers, or a stack ``(..., H, W)``.
    :param sigma: a number or a pair ``(rows, columns)``, as for :func:`gaussian_filter`.
    :param truncate: the kernel's reach in standard deviations.
    :param mode: ``"reflect"`` or ``"nearest"``.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :param out: a float32 C-contiguous array of the field's shape to write into.
    :returns: float32 of the field's shape (``out`` when given).
    :raises ValueError: as :func:`gaussian_filter`.
    :raises TypeError: as :func:`gaussian_filter`.
    """
    return _smoothing("gaussian_laplace", field, sigma, truncate, mode, gpu, backend, out)


def window_maxima(stack: Any, points: Any, size: Any, *, gpu: Any = True, backend: str | None = None) -> np.ndarray:
    """The maximum of the ``size`` x ``size`` window at each point, in every field: a read's base intensities.

    "Each cycle's intensity of a read is the brightest pixel near its peak": the cycles are
    registered to within a pixel, so the window's maximum rather than the centre pixel. Exactly
    ``maximum_filter(stack, size)[..., y, x]`` for each point, moved to the front (edges clipped,
    a window holding NaN is NaN, a maximum of zero ``+0.0``), without filtering the stack: on a
    card only the ``N`` values of each field come back.

    :param stack: a 2-D field, or a stack ``(..., H, W)`` (cycles and channels) of real numbers.
    :param points: ``(N, 2)`` integer ``(y, x)`` rows inside the field (``local_maxima``'s peaks).
    :param size: the window edge, as for :func:`maximum_filter` (even sizes raised to odd).
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: float32 ``(N, *stack.shape[:-2])``.
    :raises ValueError: as :func:`maximum_filter` (naming ``stack``), or ``points`` not ``(N, 2)``
        whole coordinates inside the field (``[]`` is no points).
    :raises TypeError: as :func:`maximum_filter`, or ``points`` a masked array.
    """
    array = field_array(stack, "stack")
    window = window_edge(size)
    use_gpu = _options(gpu, backend)
    rows = window_points(points, array.shape)
    lead = array.shape[:-2]
    fields = int(np.prod(lead, dtype=np.int64))
    if rows.shape[0] == 0 or fields == 0:
        REGISTRY.record_served("window_maxima")
        return np.empty((rows.shape[0], *lead), dtype=_F32)
    flat = as_filtered(array).reshape(fields, *array.shape[-2:])
    result: np.ndarray = REGISTRY.dispatch(
        "window_maxima", {"stack": _read_only(flat), "points": _read_only(rows), "size": window}, gpu=use_gpu,
        backend=backend,
        expected=(rows.shape[0], fields))
    return result.reshape(rows.shape[0], *lead)


def _registered(value: Any, name: str) -> np.ndarray:
    """A field as registration computes on it: float32 or float64 as it is, a camera dtype (every
    value exact in float32) as float32, half the bytes of a float64 copy of a raw stack for the
    same values, other numbers as float64."""
    array = _numeric(value, name)
    if array.dtype in (_F32, np.dtype(np.float64)):
        return array
    return cast_keeping_broadcast(array, _F32 if array.dtype in NARROW_FIELDS else np.dtype(np.float64))


def phase_correlate(first: Any, second: Any, *, expected: Any = (0, 0), tolerance: Any = None,
                    min_peak_ratio: Any = 3.0, gpu: Any = True, backend: str | None = None) -> Registration:
    """The translation that lands ``second`` on ``first``, by phase correlation: how cycles are registered.

    A drop-in for spaCR's ``ops_register.phase_correlate``: the float64 cross-power spectrum,
    normalised to unit magnitude, transformed back; its first maximum (row-major) is the wrapped
    shift, folded to the representative nearest ``expected``. ``np.roll(second, (dy, dx),
    axis=(-2, -1))`` equals ``first`` for a pure circular shift. A stack of pairs is one call (on a
    card one batch of transforms, sized to the free memory).

    :param first: the reference field, 2-D, or a stack ``(..., H, W)``.
    :param second: the field(s) to place against it, the same shape.
    :param expected: ``(rows, columns)``, roughly where ``second`` lies: the unwrap's centre
        (within ``2**62`` pixels either way: the shift is int64).
    :param tolerance: how far from ``expected`` a shift may land and be accepted: one number, or
        ``(rows, columns)``; when given, it IS the test and the peak ratio is only recorded.
    :param min_peak_ratio: without a tolerance, the least peak-to-mean ratio a pair is accepted at
        (a peak at the origin, the no-overlap signature, never is).
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: a :class:`Registration`: scalars for two 2-D fields, arrays of ``shape[:-2]`` for
        stacks. A field with no variation is never accepted (its ratio is 0); a field's scale
        never matters (one of ``1e-200`` is moved into range by an exact power of two).
    :raises ValueError: different shapes, fewer than two dimensions, an empty field, NaN or
        infinite pixels, a bad ``expected``, ``tolerance`` or ``min_peak_ratio``.
    :raises TypeError: non-numeric input or options.
    """
    use_gpu = _options(gpu, backend)
    about = expected_shift(expected)
    limits = shift_tolerance(tolerance)
    floor = ratio_floor(min_peak_ratio)
    a, b = _registered(first, "first"), _registered(second, "second")
    field_pair(a, b)
    if a.dtype != b.dtype:
        a, b = cast_keeping_broadcast(a, np.dtype(np.float64)), cast_keeping_broadcast(b, np.dtype(np.float64))
    shape = a.shape
    count = int(np.prod(shape[:-2], dtype=np.int64))
    a, b, varies = finite_and_in_range(a, b)
    if count == 0:
        REGISTRY.record_served("phase_correlate")
        return judge(np.zeros(0, _I64), np.zeros(0), varies, shape, about, limits, floor, "core")
    fields, pairing = reference_fields(a)
    b3 = np.ascontiguousarray(b).reshape(count, *shape[-2:])
    peaks, ratios = REGISTRY.dispatch(
        "phase_correlate", {"first": _read_only(fields), "second": _read_only(b3), "pairing": _read_only(pairing)},
        gpu=use_gpu, backend=backend, expected=(count, shape[-2] * shape[-1]))
    served = REGISTRY.last_dispatch()
    return judge(peaks, ratios, varies, shape, about, limits, floor, served.backend if served else "unknown")
