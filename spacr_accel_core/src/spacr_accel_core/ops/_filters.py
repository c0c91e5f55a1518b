"""The filters family: the window maximum and minimum, the Gaussian and its Laplacian.

Each operation is declared here once (:func:`~spacr_accel_core.operations._operations.operation`):
its hook's specification beside it, the public function that checks the input, answers what needs no
backend (a copy, an empty field, a window that covers the whole field) and dispatches the rest.
Re-exported by :mod:`spacr_accel_core.ops`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import reference
from ..contract._markers import hookspec
from ..dispatch._registry import REGISTRY
from ..kit._separable import SIGMA_SKIPPED
from ..operations._adapters import (
    adapt_filter,
    adapt_smoothing,
)
from ..operations._checks import (
    _F32,
    _ZERO,
    _options,
    _read_only,
    as_filtered,
    field_array,
    filter_mode,
    kernel_radii,
    out_array,
    sigma_pair,
    truncate_value,
    window_edge,
)
from ..operations._inputs import (
    filter_bench,
    gaussian_bench,
    laplace_bench,
    minimum_bench,
    small_field,
    small_smoothing,
)
from ..operations._operations import OwnGraph, operation
from ..operations._results import (
    agree_field,
    check_array,
)


def _whole_field_maxima(data: np.ndarray) -> np.ndarray:
    """Each field's maximum, shaped to broadcast over it: the answer for a window covering every
    pixel from every pixel (``size >= 2 * max(H, W) - 1`` with the edge repeated). np.max
    propagates NaN (the NaN rule), and rounding to float32 is monotonic."""
    with np.errstate(over="ignore"):
        maxima: np.ndarray = np.max(data, axis=(-2, -1), keepdims=True).astype(_F32)
    return maxima


@hookspec
def spacr_accel_maximum_filter(  # type: ignore[empty-body]  # a specification has no body
    field: np.ndarray, size: int, out: np.ndarray | None
) -> np.ndarray:
    """The maximum of every ``size`` x ``size`` window, edges repeating the border pixel.

    (Repeated or mirrored, the border gives the same answer: a window crossing an edge holds the
    pixels the border would copy already, so ``mode="reflect"`` is served by this hook as it is.)

    :param field: a non-empty 2-D float32 array (may be non-contiguous; never modify it); a stack
        ``(..., H, W)`` only for a plugin whose declaration says ``stacks=True`` (each field
        filtered on its own, the window never crossing fields). A plugin that declares
        ``field_dtypes`` also receives fields of those camera dtypes unconverted, so it can filter
        in the narrow type and cast once. The answer must equal the filter of
        ``field.astype(float32)`` bit for bit.
    :param size: an odd window edge, at least 3.
    :param out: optional (leave it out of the signature and the core copies the result in): a
        writable C-contiguous float32 array of ``field.shape`` to write into and return, or
        ``None`` for a new array.
    :returns: a float32 array of ``field.shape`` (``out`` when given); a window holding a NaN
        yields NaN.
    """


@operation(
    spec=spacr_accel_maximum_filter,
    task="Peak finding (maximum_filter)",
    check=check_array,
    agree=agree_field,
    reference=reference.maximum_filter,
    small=small_field,
    bench=filter_bench,
    adapt=adapt_filter,
    optional={"out": None},
    dask=OwnGraph(),
)
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


def _whole_field_extremes(data: np.ndarray, minimum: bool) -> np.ndarray:
    """Each field's minimum or maximum, shaped to broadcast over it (see :func:`_whole_field_maxima`)."""
    if not minimum:
        return _whole_field_maxima(data)
    with np.errstate(over="ignore"):
        minima: np.ndarray = np.min(data, axis=(-2, -1), keepdims=True).astype(_F32)
    return minima


@hookspec
def spacr_accel_minimum_filter(  # type: ignore[empty-body]  # a specification has no body
    field: np.ndarray, size: int, out: np.ndarray | None
) -> np.ndarray:
    """The minimum of every ``size`` x ``size`` window: ``maximum_filter``'s contract with the
    minimum (the same field, size and ``out``; a window holding a NaN yields NaN; a minimum of
    zero is ``+0.0``, which the core sees to for a plugin not declaring ``positive_zeros``)."""


@operation(
    spec=spacr_accel_minimum_filter,
    task="Background floor (minimum_filter)",
    check=check_array,
    agree=agree_field,
    reference=reference.minimum_filter,
    small=small_field,
    bench=minimum_bench,
    adapt=adapt_filter,
    optional={"out": None},
    dask=OwnGraph(),
)
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


@hookspec
def spacr_accel_gaussian_filter(  # type: ignore[empty-body]  # a specification has no body
    field: np.ndarray, sigma: tuple[float, float], out: np.ndarray | None, truncate: float, mode: str
) -> np.ndarray:
    """``scipy.ndimage.gaussian_filter(field.astype(float32), sigma, mode=mode, truncate=truncate,
    axes=(-2, -1))``, bit for bit.

    :func:`spacr_accel_core.separable.gaussian_passes` gives the passes (SciPy's float64 weights)
    and the order each pixel's sum is taken in; only that order, in float64 without fused
    multiply-adds, rounded to float32 after each pass, gives SciPy's bits.

    :param field: as for ``maximum_filter`` (2-D float32, a declared camera dtype, or a stack for a
        plugin declaring ``stacks``); every field filtered on its own.
    :param sigma: ``(rows, columns)`` standard deviations in pixels, each ``>= 0``; an axis whose
        sigma is at most ``1e-15`` is not filtered (as in SciPy), but not both (the core copies).
    :param out: optional, as for ``maximum_filter``.
    :param truncate: the kernel's reach in standard deviations (radius ``int(truncate * sigma + 0.5)``).
    :param mode: ``"reflect"`` or ``"nearest"``.
    :returns: float32 of ``field.shape`` (``out`` when given).
    """


@operation(
    spec=spacr_accel_gaussian_filter,
    task="Smoothing (gaussian_filter)",
    check=check_array,
    agree=agree_field,
    reference=reference.gaussian_filter,
    small=small_smoothing,
    bench=gaussian_bench,
    adapt=adapt_smoothing,
    optional={"out": None},
    dask=OwnGraph(),
)
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


@hookspec
def spacr_accel_gaussian_laplace(  # type: ignore[empty-body]  # a specification has no body
    field: np.ndarray, sigma: tuple[float, float], out: np.ndarray | None, truncate: float, mode: str
) -> np.ndarray:
    """``scipy.ndimage.gaussian_laplace`` of each field of ``field.astype(float32)``, bit for bit:
    the two terms of :func:`spacr_accel_core.separable.laplace_terms`, each rounded to float32,
    added in float32. The arguments are ``gaussian_filter``'s.
    """


@operation(
    spec=spacr_accel_gaussian_laplace,
    task="Spot enhancement (gaussian_laplace)",
    check=check_array,
    agree=agree_field,
    reference=reference.gaussian_laplace,
    small=small_smoothing,
    bench=laplace_bench,
    adapt=adapt_smoothing,
    optional={"out": None},
    dask=OwnGraph(),
)
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
