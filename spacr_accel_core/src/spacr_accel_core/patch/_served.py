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
from typing import Any, Literal

import numpy as np

from .. import ops
from ._floor import AT_FLOOR, FloorRule
from ._outcome import PassThrough, finite_extent, served_by

__all__ = ["PassThrough", "extract_bases", "gaussian_filter", "gaussian_laplace", "matmul", "maximum_filter",
           "minimum_filter", "nearest_neighbours"]

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


def _mode(mode: Any) -> str:
    if not isinstance(mode, str) or mode not in _MODES:
        raise PassThrough(f"mode={mode!r} (the registry serves 'reflect' and 'nearest')")
    return mode


_EXACT_INTEGER = 1 << 26
"""Integers up to this square exactly in float64, so SciPy's ``sigma * sigma`` of one is the float's."""


def _kernel_number(value: Any, name: str) -> float:
    """A ``sigma`` or ``truncate`` SciPy's kernel arithmetic reads as the float64 the registry is given.

    SciPy builds the kernel from the value as passed (``sigma * sigma``, ``-0.5 / sigma2``, ``truncate *
    sd``): a NumPy float32 or float16 scalar keeps its own precision there, and a small NumPy integer
    type can overflow its square, so only a Python or float64 number, or an integer whose square its
    own type and a float64 both hold, is served.
    """
    kind = type(value)
    if kind in (float, np.float64):
        number = float(value)
    elif kind is int or (isinstance(value, np.integer) and abs(int(value)) ** 2 <= np.iinfo(kind).max):
        number = float(value) if abs(int(value)) <= _EXACT_INTEGER else math.nan
    else:
        raise PassThrough(f"{name}={value!r} (SciPy builds the kernel in that number's own type)")
    if not 0 < number < math.inf:
        raise PassThrough(f"{name}={value!r} (the registry serves one positive number)")
    return number


def _cval(cval: Any) -> None:
    """SciPy reads ``cval`` as a real number in every mode (and raises TypeError for anything else)."""
    if not isinstance(cval, numbers.Real):
        raise PassThrough(f"cval={cval!r} (SciPy raises for a cval that is not a real number)")


def _quietly_or_raise() -> np.errstate:
    """The floating-point error modes under which a cast raises wherever the caller's modes would
    have it do anything (warn, raise, call, print, log) and is quiet where they ignore it."""
    modes = np.geterr()

    def strict(mode: str) -> Literal["ignore", "raise"]:
        return "ignore" if mode == "ignore" else "raise"

    return np.errstate(divide=strict(modes["divide"]), over=strict(modes["over"]), under=strict(modes["under"]),
                       invalid=strict(modes["invalid"]))


def _read_as(value: Any, dtype: type[np.floating[Any]] | type[np.integer[Any]], what: str) -> np.ndarray:
    """``np.asarray(value, dtype=dtype)`` as spaCR reads it, or a pass-through where that reading
    would warn or raise: the reading is left to spaCR's own call then, so its warning (an overflow in
    the cast, a NaN or an infinity cast to an integer, a complex part dropped) is given once, by
    spaCR, as it would be unpatched.

    :param value: the argument as the caller gave it.
    :param dtype: the type spaCR reads it as (``np.float32`` or ``np.int64``).
    :param what: the argument, as the pass-through's reason names it (``"a field"``, ``"peaks"``).
    """
    if type(value) is np.ndarray:
        if value.dtype == dtype or value.dtype.kind in "biu":  # a cast that sets no floating-point flag:
            return np.asarray(value, dtype=dtype)  # no error state to read (a served call's hot path)
        if value.dtype.kind != "f":
            raise PassThrough(f"{what} of dtype {value.dtype} (NumPy's cast of it is spaCR's own)")
    name = np.dtype(dtype).name
    try:
        with _quietly_or_raise():
            return np.asarray(value, dtype=dtype)
    except (TypeError, ValueError, OverflowError, FloatingPointError):
        raise PassThrough(f"{what} whose {name} reading warns or fails (spaCR's own cast)") from None


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


def _spacrs_own(module: Any, name: str) -> bool:
    """Whether ``module.name`` is still the function spaCR's module defines (not one put in its place)."""
    code = getattr(getattr(module, name, None), "__code__", None)
    return code is not None and code.co_name == name and code.co_filename == getattr(module, "__file__", None)


def _spacrs_order(module: Any, name: str, gpu: Any) -> tuple[Any, ...]:
    """spaCR's backend order (``module.name(gpu)``), asked as spaCR asks it. spaCR's own ends in
    ``"numpy"`` and is ``("numpy",)`` for ``gpu=False`` (so it is not asked then); one put in its
    place that lacks ``"numpy"`` (empty, or only cards that may fail) can end in spaCR's
    ``RuntimeError`` ("no usable backend"), which only spaCR's own function raises."""
    if not gpu and _spacrs_own(module, name):
        return ("numpy",)
    order = tuple(getattr(module, name)(gpu))
    if "numpy" not in order:
        raise PassThrough(f"spaCR's own backend order {order!r} has no numpy (spaCR may raise)")
    return order


def maximum_filter(field: Any, size: Any, *, gpu: Any = True, backend: Any = None,
                   accel: Any) -> tuple[Any, str]:
    """``spacr.ops_accel.maximum_filter``: SciPy's ``maximum_filter(float32, size, mode="nearest")``
    with even sizes made odd, which is the registry's answer wherever neither rule of its own
    applies."""
    _none(backend=backend)
    if not _spacrs_own(accel, "accelerated_backends"):  # spaCR's own always offers numpy's answer
        _spacrs_order(accel, "accelerated_backends", gpu)
    data = _read_as(field, np.float32, "a field")
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
    array = _read_as(stack, np.float32, "a stack")
    if array.ndim != 4:
        raise PassThrough("a stack that is not (cycles, channels, Y, X)")
    half = operator.index(window)
    if half < 0:
        raise PassThrough(f"window={half}")
    coords = _read_as(peaks, np.int64, "peaks").reshape(-1, 2)
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


def gaussian_laplace(input: Any, sigma: Any, output: Any = None, mode: Any = "reflect",  # SciPy's name
                     cval: Any = 0.0, *, floor: FloorRule = AT_FLOOR, **kwargs: Any) -> tuple[Any, str]:
    """``scipy.ndimage.gaussian_laplace`` on a float32 field: the registry gives SciPy's bits, under
    ``floor``, the seam's rule in the table (:mod:`._floor`)."""
    data = _float32_field(input)
    _none(output=output, **kwargs)
    chosen = _mode(mode)
    _cval(cval)
    width = _kernel_number(sigma, "sigma")
    finite_extent(data, "the field")
    with floor.in_force():  # the floor is SciPy's speed: the table has only a faster backend serve
        return ops.gaussian_laplace(data, width, mode=chosen), served_by()


def gaussian_filter(input: Any, sigma: Any, order: Any = 0, output: Any = None,  # SciPy's name
                    mode: Any = "reflect", cval: Any = 0.0, truncate: Any = 4.0, *, floor: FloorRule = AT_FLOOR,
                    **kwargs: Any) -> tuple[Any, str]:
    """``scipy.ndimage.gaussian_filter`` on a float32 field (order 0): the registry gives SciPy's bits,
    under ``floor``, the seam's rule in the table (:mod:`._floor`)."""
    data = _float32_field(input)
    _none(output=output, **kwargs)
    if isinstance(order, bool) or order != 0:
        raise PassThrough(f"order={order!r}")
    chosen = _mode(mode)
    _cval(cval)
    width, reach = _kernel_number(sigma, "sigma"), _kernel_number(truncate, "truncate")
    finite_extent(data, "the field")
    with floor.in_force():  # the floor is SciPy's speed: the table has only a faster backend serve
        smoothed = ops.gaussian_filter(data, width, truncate=reach, mode=chosen)
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
    _cval(cval)
    _without_nan_or_negative_zero(data)
    return ops.minimum_filter(data, window, mode=chosen), served_by()


_FAR = 1e18
"""Coordinates up to this size keep spaCR's float32 squares finite (a sum of 32 squares of twice
it stays below float32's largest), so its distances carry only rounding."""

_PAIRWISE = 8
"""From this many coordinates NumPy sums a C-ordered row of squares pairwise, and a row laid out
otherwise (the difference of Fortran-ordered points) one by one: the two sums can differ in the last
bit, and the seam's recomputation of spaCR's distance is C-ordered."""

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
    src = _read_as(source, np.float32, "a source")
    dst = _read_as(target, np.float32, "a target")
    if src.ndim != 2 or dst.ndim != 2 or src.shape[1] != dst.shape[1] or not 0 < src.shape[1] <= 32:
        raise PassThrough("point sets spaCR refuses, or wider than 32")
    if src.shape[1] >= _PAIRWISE and not (src.flags.c_contiguous and dst.flags.c_contiguous):
        raise PassThrough("points of eight or more coordinates not in C order (spaCR's norm sums them in "
                          "another order)")
    if src.shape[0] == 0 or dst.shape[0] < 2:
        raise PassThrough("fewer than one source or two target points")
    if not all(math.isfinite(points.min()) and math.isfinite(points.max()) and np.abs(points).max() <= _FAR
               for points in (src, dst)):
        raise PassThrough("a coordinate that is not finite or beyond 1e18")
    spacrs_own = _spacrs_order(accel, "accelerated_backends", gpu)[0]
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
