"""The peaks family: a field's peaks as coordinates, and each read's window maxima in every field.

Both are the windowed maximum read at points rather than written out whole: on a card only the
coordinates or the values cross the bus. Declared here once each (its hook's specification beside
it); re-exported by :mod:`spacr_accel_core.ops`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import reference
from ..contract._markers import hookspec
from ..dispatch._registry import REGISTRY
from ..operations._adapters import (
    adapt_gather,
    adapt_peaks,
)
from ..operations._checks import (
    _F32,
    _I64,
    _options,
    _read_only,
    as_filtered,
    field_array,
    threshold_below,
    window_edge,
    window_points,
)
from ..operations._inputs import (
    gather_bench,
    peaks_bench,
    small_field,
    small_gather,
)
from ..operations._operations import OwnGraph, operation
from ..operations._results import (
    agree_coordinates,
    agree_gathered,
    check_coordinates,
    check_gathered,
)
from ._filters import _whole_field_maxima


@hookspec
def spacr_accel_local_maxima(  # type: ignore[empty-body]  # a specification has no body
    field: np.ndarray, size: int, threshold: np.float32 | None
) -> np.ndarray:
    """The pixels equal to their window's ``maximum_filter`` and above ``threshold``.

    On a card only the coordinates come back: a few kilobytes instead of the whole filtered field.

    :param field: as for ``maximum_filter`` (2-D, or a stack for a plugin declaring ``stacks``).
    :param size: an odd window edge, at least 3.
    :param threshold: ``None``, or a float32 ``t`` chosen by the core so that, for a float32 pixel
        ``v``, ``v > t`` is exactly "above the caller's threshold"; compare in float32.
    :returns: int64 coordinates ``(P, field.ndim)`` in row-major order; a NaN is never a peak.
    """


@operation(
    spec=spacr_accel_local_maxima,
    task="Reads as coordinates (local_maxima)",
    check=check_coordinates,
    agree=agree_coordinates,
    reference=reference.local_maxima,
    small=small_field,
    bench=peaks_bench,
    adapt=adapt_peaks,
    dask=OwnGraph(),
)
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


@hookspec
def spacr_accel_window_maxima(  # type: ignore[empty-body]  # a specification has no body
    stack: np.ndarray, points: np.ndarray, size: int
) -> np.ndarray:
    """The maximum of the ``size`` x ``size`` window centred on each point, in every field of a stack.

    Exactly ``maximum_filter(stack, size)[:, y, x]`` for each point (the window clipped at the
    field's edges, a window holding NaN is NaN), without filtering the stack: on a card only the
    ``N x F`` values come back.

    :param stack: a non-empty ``(F, H, W)`` float32 stack (a plugin that declares ``field_dtypes``
        also receives those camera dtypes unconverted); never modify it.
    :param points: C-contiguous int64 ``(N, 2)`` rows ``(y, x)``, every one inside the field,
        ``N >= 1``.
    :param size: an odd window edge, at least 1.
    :returns: float32 ``(N, F)``; a maximum of zero is ``+0.0``.
    """


@operation(
    spec=spacr_accel_window_maxima,
    task="Base intensities at reads (window_maxima)",
    check=check_gathered,
    agree=agree_gathered,
    reference=reference.window_maxima,
    small=small_gather,
    bench=gather_bench,
    adapt=adapt_gather,
    dask=OwnGraph(),
)
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
