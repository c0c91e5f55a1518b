"""How each patched spaCR call is served, and when it must be left to spaCR.

Every function here has the signature of the spaCR (or SciPy) function it stands in for, and either
returns ``(answer, backend)`` with spaCR's answer to the bit, or raises :class:`PassThrough` saying
why only spaCR's own function can give that answer. "Identical" is decided per call, from the
arguments, before any backend runs: a registry rule that differs from spaCR's on some input (the
NaN rule, ``+0.0`` for a zero extreme, an even window made odd) sends exactly those inputs to spaCR.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import ops
from ._errstate import underflow_ignored
from ._floor import above_floor
from ._outcome import PassThrough, served_by
from ._served_align import align_field as _align_field
from ._served_levels import clipped as _clipped
from ._served_levels import sbs_mean_target as _sbs_mean_target
from ._served_planes import estimate_read_locations as _estimate_read_locations
from ._served_planes import translate as _translate
from ._served_points import attribute_reads as _attribute_reads
from ._served_points import seed_by_scaled_pairs as _seed_by_scaled_pairs
from ._surface import SURFACE_NAME

__all__ = ["SERVED", "PassThrough"]

_MODES = ("reflect", "nearest")
"""SciPy's boundary modes the registry's filters reproduce (SciPy's default is ``reflect``)."""


def _float32_field(value: Any, what: str = "field") -> np.ndarray:
    """A float32 2-D ndarray exactly as given: SciPy's float32 out for float32 in is what the
    registry reproduces; any other dtype SciPy computes (and returns) in its own precision."""
    if type(value) is not np.ndarray or value.dtype != np.float32:
        raise PassThrough(f"a {what} that is not a float32 ndarray")
    if value.ndim != 2:
        raise PassThrough(f"a {what} that is not 2-D")
    if value.size == 0:
        raise PassThrough(f"an empty {what}")
    return value


def _without_nan_or_negative_zero(data: np.ndarray) -> None:
    """The windowed extremes' two rules that SciPy lacks (a NaN window is NaN, a zero extreme is
    ``+0.0``) change answers only where a NaN or a ``-0.0`` is in the field: one pass finds both."""
    lowest = data.min()
    if math.isnan(lowest):
        raise PassThrough("a NaN in the field (SciPy's answer depends on where it falls)")
    if lowest <= 0 and np.signbit(data[data == 0]).any():
        raise PassThrough("a -0.0 in the field (SciPy keeps the zero it met first)")


def _finite(data: np.ndarray) -> None:
    if not (math.isfinite(data.min()) and math.isfinite(data.max())):
        raise PassThrough("a NaN or infinity in the field")


def _mode(mode: Any) -> str:
    if not isinstance(mode, str) or mode not in _MODES:
        raise PassThrough(f"mode={mode!r} (the registry serves 'reflect' and 'nearest')")
    return mode


def _positive_number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < float(value) < math.inf:
        raise PassThrough(f"{name}={value!r} (the registry serves one positive number)")
    return float(value)


def _odd_window(size: Any, name: str = "size") -> int:
    try:
        window = operator.index(size)
    except TypeError:
        raise PassThrough(f"{name}={size!r} is not an integer") from None
    if window < 3 or window % 2 == 0:
        raise PassThrough(f"{name}={window} (an even or one-pixel window is spaCR's own)")
    return window


def _none(**given: Any) -> None:
    named = sorted(name for name, value in given.items() if value is not None)
    if named:
        raise PassThrough(f"{', '.join(name + '=' for name in named)} given")


def maximum_filter(field: Any, size: Any, *, gpu: Any = True, backend: Any = None) -> tuple[Any, str]:
    """``spacr.ops_accel.maximum_filter``: SciPy's ``maximum_filter(float32, size, mode="nearest")``
    with even sizes made odd, which is the registry's answer wherever neither rule of its own
    applies."""
    _none(backend=backend)
    try:
        data = np.asarray(field, dtype=np.float32)
    except (TypeError, ValueError):
        raise PassThrough("a field NumPy cannot read as float32") from None
    if data.ndim != 2 or data.size == 0:
        raise PassThrough("not a non-empty 2-D field")
    try:
        window = int(size)
    except (TypeError, ValueError):
        raise PassThrough(f"size={size!r} is not a number") from None
    if window <= 1:
        raise PassThrough(f"size={size!r} (a one-pixel window is a copy)")
    _without_nan_or_negative_zero(data)
    return ops.maximum_filter(data, window, gpu=bool(gpu)), served_by()  # an even size is made odd, as spaCR does


def extract_bases(stack: Any, peaks: Any, *, window: Any = 1,
                  original: Callable[..., Any]) -> tuple[Any, str]:
    """``spacr.ops_sbs.extract_bases``: the maximum of each peak's ``2 * window + 1`` window in
    every plane, the window clipped at the field's edge, which is the registry's ``window_maxima``
    (edge pixels repeated add no new value). Rows holding a zero or a NaN are recomputed by spaCR's
    own function: its ``max`` keeps the sign of the zero (or the NaN) it met first, the registry
    returns ``+0.0``."""
    array = np.asarray(stack, dtype=np.float32)
    if array.ndim != 4:
        raise PassThrough("a stack that is not (cycles, channels, Y, X)")
    half = operator.index(window)
    if half < 0:
        raise PassThrough(f"window={half}")
    coords = np.asarray(peaks, dtype=np.int64).reshape(-1, 2)
    height, width = array.shape[-2:]
    if coords.shape[0] == 0 or array.size == 0:
        raise PassThrough("no peaks or an empty stack")
    if (coords.min(axis=0) < 0).any() or coords[:, 0].max() >= height or coords[:, 1].max() >= width:
        raise PassThrough("a peak outside the field")
    values = ops.window_maxima(array, coords, 2 * half + 1)
    backend = served_by()
    redo = np.flatnonzero(((values == 0) | np.isnan(values)).any(axis=(1, 2)))
    if redo.size:
        values[redo] = original(array, coords[redo], window=half)
    return values, backend


def phase_correlate(first: Any, second: Any, *, register: Any, original: Callable[..., Any],
                    **options: Any) -> tuple[Any, str]:
    """``spacr.ops_register.phase_correlate`` (and the name ``spacr.ops_cycles`` bound at import):
    spaCR's own function, given spaCR's own surface arithmetic shared between the cores
    (:mod:`._surface`), so that the peak, ratio, unwrap and verdict are spaCR's code on spaCR's
    bits. Where spaCR itself would register on a card, the card's answer is spaCR's: it is left
    to spaCR."""
    _none(backend=options.get("backend"))
    underflow_ignored()  # a tiny field's transform underflows: reported as spaCR's NumPy reports it
    gpu = options.get("gpu", True)
    if gpu:
        order = register.available_backends(gpu)
        if order[0] != "numpy":
            raise PassThrough(f"spaCR registers on its own {order[0]} here")
    return original(first, second, **{**options, "backend": SURFACE_NAME}), "numpy"


def gaussian_laplace(input: Any, sigma: Any, output: Any = None, mode: Any = "reflect",  # SciPy's name
                     cval: Any = 0.0, **kwargs: Any) -> tuple[Any, str]:
    """``scipy.ndimage.gaussian_laplace`` on a float32 field: the registry gives SciPy's bits."""
    data = _float32_field(input)
    _none(output=output, **kwargs)
    chosen = _mode(mode)
    _finite(data)
    with above_floor("gaussian_laplace"):  # the floor is SciPy's speed: only a faster backend serves
        return ops.gaussian_laplace(data, _positive_number(sigma, "sigma"), mode=chosen), served_by()


def gaussian_filter(input: Any, sigma: Any, order: Any = 0, output: Any = None,  # SciPy's name
                    mode: Any = "reflect", cval: Any = 0.0, truncate: Any = 4.0, **kwargs: Any) -> tuple[Any, str]:
    """``scipy.ndimage.gaussian_filter`` on a float32 field (order 0): the registry gives SciPy's bits."""
    data = _float32_field(input)
    _none(output=output, **kwargs)
    if isinstance(order, bool) or order != 0:
        raise PassThrough(f"order={order!r}")
    chosen = _mode(mode)
    _finite(data)
    with above_floor("gaussian_filter"):  # the floor is SciPy's speed: only a faster backend serves
        smoothed = ops.gaussian_filter(data, _positive_number(sigma, "sigma"),
                                       truncate=_positive_number(truncate, "truncate"), mode=chosen)
        return smoothed, served_by()


def minimum_filter(input: Any, size: Any = None, footprint: Any = None, output: Any = None,
                   mode: Any = "reflect", cval: Any = 0.0, origin: Any = 0, **kwargs: Any) -> tuple[Any, str]:
    """``scipy.ndimage.minimum_filter`` on a float32 field with an odd square window."""
    data = _float32_field(input)
    _none(footprint=footprint, output=output, **kwargs)
    if isinstance(origin, bool) or not isinstance(origin, numbers.Integral) or origin != 0:
        raise PassThrough(f"origin={origin!r}")
    window = _odd_window(size)
    chosen = _mode(mode)
    _without_nan_or_negative_zero(data)
    return ops.minimum_filter(data, window, mode=chosen), served_by()


_FAR = 1e18
"""Coordinates up to this size keep spaCR's float32 squares finite (a sum of 32 squares of twice
it stays below float32's largest), so its distances carry only rounding."""

_NEAR = 1e-18
"""Distances above this keep spaCR's float32 squares out of the subnormal range, where rounding
stops being relative."""


def nearest_neighbours(source: Any, target: Any, *, gpu: Any = True, backend: Any = None, chunk: Any = 4096,
                       original: Callable[..., Any], accel: Any) -> tuple[Any, str]:
    """``spacr.ops_accel.nearest_neighbours``: spaCR's NumPy path takes, for each source point,
    the lowest-index minimum of its float32 distances ``norm(float32 difference)``, which rounding
    can reorder when two targets are nearly as near. The registry finds the two truly nearest; a
    row whose second is farther than any rounding can bridge is spaCR's first, with spaCR's
    float32 distance recomputed for that one pair, and every other row is asked of spaCR's own
    function. Where spaCR would search on a card, the card's answer is spaCR's: left to spaCR."""
    _none(backend=backend)
    if isinstance(chunk, bool) or not isinstance(chunk, numbers.Integral) or chunk < 1:
        raise PassThrough(f"chunk={chunk!r}")
    src = np.asarray(source, dtype=np.float32)
    dst = np.asarray(target, dtype=np.float32)
    if src.ndim != 2 or dst.ndim != 2 or src.shape[1] != dst.shape[1] or not 0 < src.shape[1] <= 32:
        raise PassThrough("point sets spaCR refuses, or wider than 32")
    if src.shape[0] == 0 or dst.shape[0] < 2:
        raise PassThrough("fewer than one source or two target points")
    if not all(math.isfinite(points.min()) and math.isfinite(points.max()) and np.abs(points).max() <= _FAR
               for points in (src, dst)):
        raise PassThrough("a coordinate that is not finite or beyond 1e18")
    spacrs_own = accel.accelerated_backends(gpu)[0] if gpu else "numpy"
    if spacrs_own != "numpy":
        raise PassThrough(f"spaCR searches on its own {spacrs_own} here")
    index, gap = ops.nearest_neighbours(src, dst, k=2, gpu=bool(gpu))
    served = served_by()
    first = np.ascontiguousarray(index[:, 0])
    slack = (src.shape[1] + 4) * 2.0**-22
    clear = (gap[:, 1] > _NEAR) & (gap[:, 1] * (1 - slack) > gap[:, 0] * (1 + slack))
    distance = np.linalg.norm(src[:, None, :] - dst[first][:, None, :], axis=2)[:, 0]
    unclear = np.flatnonzero(~clear)
    if unclear.size:
        first[unclear], distance[unclear] = original(src[unclear], dst, gpu=False)
    return (first, np.asarray(distance, dtype=np.float32)), served


def matmul(first: Any, second: Any, **options: Any) -> tuple[Any, str]:
    """``spacr.ops_accel.matmul``: never served. A float32 product's last bits depend on how its
    BLAS blocks the sums, so only spaCR's own call gives spaCR's bits."""
    raise PassThrough("a float32 product rounds as its BLAS blocks it: spaCR's own call")


SERVED: dict[str, Callable[..., tuple[Any, str]]] = {
    "maximum_filter": maximum_filter,
    "matmul": matmul,
    "nearest_neighbours": nearest_neighbours,
    "extract_bases": extract_bases,
    "phase_correlate": phase_correlate,
    "gaussian_laplace": gaussian_laplace,
    "gaussian_filter": gaussian_filter,
    "minimum_filter": minimum_filter,
    "attribute_reads": _attribute_reads,
    "seed_by_scaled_pairs": _seed_by_scaled_pairs,
    "translate": _translate,
    "align_field": _align_field,
    "spot_score": _estimate_read_locations,
    "clipped": _clipped,
    "sbs_mean_target": _sbs_mean_target,
}
"""The ways of serving, by the name of the function they stand in for."""
