"""The input checks every operation shares, wherever its arrays live (NumPy in ``ops``, Dask in
``dask``): one home, so a wrong call fails with the same words on every path."""

from __future__ import annotations

import math
import operator
import sys
from fractions import Fraction
from typing import Any

import numpy as np

from ..contract._declaration import NARROW_FIELDS
from ..contract._errors import describe
from ..kit._separable import SIGMA_SKIPPED, gaussian_radius

_NUMERIC_KINDS = frozenset("biuf")
_F32 = np.dtype(np.float32)
_I64 = np.dtype(np.int64)
_ZERO = np.float32(0.0)
_FLOAT64_MAX = Fraction(float(np.finfo(np.float64).max))


def _numeric(value: Any, name: str) -> np.ndarray:
    if type(value) is np.ndarray:
        array = value
    else:
        if "numpy.ma" in sys.modules and isinstance(value, np.ma.MaskedArray):
            # scipy.ndimage ignores the mask as well, silently; a peak under the mask would be
            # reported as real, so the caller decides (``.filled(...)`` or ``.data``).
            raise TypeError(f"{name} is a masked array; pass {name}.filled(value) or {name}.data "
                            "(a mask would be silently ignored)")
        try:
            array = np.asarray(value)
        except ValueError as exc:  # ragged lists: a shape, not a type, is wrong
            raise ValueError(f"{name} cannot be read as an array: {describe(exc)}") from None
        except (RuntimeError, TypeError) as exc:
            # A torch tensor that requires grad or has its conjugate bit set raises RuntimeError,
            # the class that would read as "backend declined": it is the caller's input that is wrong.
            raise TypeError(f"{name} cannot be read as a NumPy array: {describe(exc)}") from None
    if array.dtype.kind not in _NUMERIC_KINDS:
        raise TypeError(
            f"{name} must hold real numbers (bool, integer or float), got dtype {array.dtype}"
        )
    return array


def _read_only(array: np.ndarray) -> np.ndarray:
    """A view of ``array`` that a plugin cannot write to (no copy).

    A plugin that scribbles into its input and then declines would corrupt the caller's array and
    the input the next backend computes on; with a read-only view the write raises inside the
    plugin (``ValueError: assignment destination is read-only``), which makes it that plugin's
    fault. (A plugin that sets ``flags.writeable = True`` on it is not careless but hostile; NumPy
    cannot refuse that without a copy, which the per-tile path cannot afford.)
    """
    view = array.view()
    view.setflags(write=False)  # ~0.4 us: reading ``flags`` first would double it on the per-tile path
    return view


def _options(gpu: Any, backend: Any) -> bool:
    """``gpu`` as a bool and ``backend`` checked: the keywords every operation shares.

    ``0`` and ``1`` are taken as ``False`` and ``True``: spaCR reads its settings from files and
    forms, where a flag arrives as an integer. Anything else (``2``, ``"yes"``, ``None``) is refused
    rather than guessed.
    """
    if gpu is not True and gpu is not False:
        if isinstance(gpu, (bool, np.bool_)) or (isinstance(gpu, (int, np.integer)) and gpu in (0, 1)):
            gpu = bool(gpu)
        else:
            raise TypeError(f"gpu must be True or False (or 1 or 0), got {type(gpu).__name__} ({gpu!r})")
    if backend is not None and (type(backend) is not str or not backend):
        raise TypeError(f"backend must be a backend name (a non-empty str) or None, got {backend!r}")
    return bool(gpu)


def _scalar(value: Any) -> Any:
    """A 0-d array as the NumPy scalar it holds (NumPy's own reading: ``np.ndim(x) == 0`` is a
    number, and SciPy takes ``np.array(1.5)`` as a sigma); anything else as it is."""
    return value[()] if type(value) is np.ndarray and value.ndim == 0 else value


def _shown(value: Any) -> str:
    """``repr(value)`` for a message, an integer too long to print as its size: Python refuses to
    turn one of over 4300 digits into text, which would replace the message with its own."""
    if isinstance(value, int) and value.bit_length() > 128:
        return f"{'a negative' if value < 0 else 'an'} integer of {value.bit_length()} bits"
    try:
        return repr(value)
    except ValueError:  # a container holding such an integer
        return f"a {type(value).__name__} too long to print"


def _float(value: Any) -> float:
    """``float(value)``, an integer beyond float64's range as the infinity of its sign rather than
    an OverflowError (``10**400`` is a perfectly good number, larger than every float64)."""
    try:
        with np.errstate(over="ignore"):  # an np.longdouble beyond float64: its infinity, quietly
            return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _integer(value: Any, name: str) -> int:
    """A whole number of pixels or rows: any integer, or a float holding a whole number.

    spaCR computes sizes from radii and scales (``2 * radius + 1`` with a float radius), so ``7.0``
    and ``np.float32(7)`` are taken as 7; a fraction is refused rather than silently rounded.
    """
    value = _scalar(value)
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got a bool ({value!r})")
    try:
        return operator.index(value)
    except TypeError:
        pass
    if isinstance(value, (float, np.floating)):
        number = float(value)
        if not number.is_integer():  # NaN and infinity are not whole numbers either
            raise ValueError(f"{name} must be a whole number, got {value!r}")
        return int(number)
    raise TypeError(f"{name} must be an integer, got {type(value).__name__} ({value!r})")



def fields_shape(shape: tuple[int, ...], name: str = "field") -> None:
    """A field is 2-D, or a stack ``(..., H, W)`` of 2-D fields; anything else is refused (the
    message names the caller's argument: ``stack`` for :func:`~spacr_accel_core.ops.window_maxima`)."""
    if len(shape) < 2:
        raise ValueError(f"{name} must be a 2-D array (or a stack (..., H, W) of 2-D fields), got "
                         f"{len(shape)}-D with shape {shape}")


def window_edge(size: Any) -> int:
    """``size`` as the odd window edge the contract filters with: even sizes raised to the next odd
    (a window with no centre cannot be centred), 0 and 1 both a window of one pixel."""
    window = _integer(size, "size")
    if window < 0:
        raise ValueError(f"size must be a non-negative window edge in pixels, got {window}")
    return window + 1 if window % 2 == 0 else window


def _product_shape(first: tuple[int, ...], second: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's ``@`` result shape, or ValueError naming both operands."""
    if len(first) == 2 and len(second) == 2:  # the per-tile case: keep it cheap
        if first[1] != second[0]:
            raise ValueError(
                f"matmul: first has {first[1]} columns but second has {second[0]} rows "
                f"(shapes {first} and {second})"
            )
        return (first[0], second[1])
    inner_first = first[-1]
    inner_second = second[0] if len(second) == 1 else second[-2]
    if inner_first != inner_second:
        raise ValueError(
            f"matmul: the last axis of first ({inner_first}) must match the "
            f"{'only' if len(second) == 1 else 'second-to-last'} axis of second ({inner_second}) "
            f"(shapes {first} and {second})"
        )
    batch_first = first[:-2]
    batch_second = second[:-2]
    try:
        batch = np.broadcast_shapes(batch_first, batch_second)
    except ValueError:
        raise ValueError(
            f"matmul: the batch axes of first {first} and second {second} do not broadcast"
        ) from None
    rows = (first[-2],) if len(first) >= 2 else ()
    cols = (second[-1],) if len(second) >= 2 else ()
    return tuple(batch) + rows + cols



def _points(value: Any, name: str) -> np.ndarray:
    array = _numeric(value, name)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (points, coordinates) array, got shape {array.shape}")
    return array


def _widths_and_chunk(source: tuple[int, ...], target: tuple[int, ...], chunk: Any,
                      names: tuple[str, str] = ("source", "target")) -> int:
    """The checks two 2-D point sets share, wherever they live (NumPy here, Dask in its module):
    the same width, at least one coordinate, and a chunk of at least one row, which is returned.
    ``names`` are the caller's argument names (``first``/``second`` for mutual matching)."""
    one, other = names
    if source[1] != target[1]:
        raise ValueError(
            f"{one} and {other} must have the same width (coordinates per point): "
            f"{one} has {source[1]} coordinates per point, {other} has {target[1]}"
        )
    if source[1] == 0:
        raise ValueError(f"{one} and {other} must have at least one coordinate per point")
    rows = _integer(chunk, "chunk")
    if rows < 1:
        raise ValueError(f"chunk must be at least 1 row, got {rows}")
    return rows




def out_array(out: Any, shape: tuple[int, ...], *inputs: np.ndarray) -> np.ndarray | None:
    """``out=`` checked by NumPy's convention: ``None``, or a writable C-contiguous float32 array of
    the result's shape that shares no memory with an input (a backend reading an input while
    writing the result would read its own output)."""
    if out is None:
        return None
    if not isinstance(out, np.ndarray) or ("numpy.ma" in sys.modules and isinstance(out, np.ma.MaskedArray)):
        # A subclass is written through as NumPy's own ``out=`` does: ``np.memmap`` is how a mosaic
        # larger than memory is written. A masked array is not (its mask would be silently ignored).
        raise TypeError(f"out must be a NumPy array (or None), got {type(out).__name__}")
    if out.dtype != _F32:
        raise TypeError(f"out must be float32 (the result's dtype), got {out.dtype}")
    if out.shape != shape:
        raise ValueError(f"out has shape {out.shape}; the result's shape is {shape}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be C-contiguous and writable")
    if any(np.may_share_memory(out, array) for array in inputs):
        raise ValueError("out overlaps an input; pass a separate array")
    return out


def _exact_number(value: Any, name: str, what: str, if_nan: str) -> Fraction | float:
    """``value`` as an exact rational (or ``±inf``), refusing what is not a real number or is NaN.

    Exact because the comparisons built on it are promised exact: an integer beyond ``2**53`` or an
    ``np.longdouble`` would be rounded by ``float()`` before the comparison, and one beyond float64's
    range would raise ``OverflowError`` although it is a perfectly good number. A 0-d array is the
    number it holds, as for every other option.
    """
    value = _scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__}")
    if isinstance(value, (int, np.integer)):
        return Fraction(int(value))
    if np.isnan(value):
        raise ValueError(if_nan)
    if np.isinf(value):
        return math.inf if value > 0 else -math.inf
    return Fraction(*value.as_integer_ratio())  # np.longdouble included: all its bits


def _round_down(exact: Fraction | float, kind: type[np.floating[Any]]) -> np.floating[Any]:
    """The largest ``kind`` value at or below ``exact`` (``±inf`` beyond ``kind``'s range).

    Round to nearest first, which is monotonic, so the result is one of the two values of ``kind``
    around ``exact``; one step down when it landed above. Between the answer and the next value up
    lies no value of ``kind``, nor of any narrower type, so ``v > answer`` is exactly ``v > exact``.
    """
    if isinstance(exact, float):  # an infinity
        return kind(exact)
    try:
        nearest = float(exact)
    except OverflowError:  # beyond float64's range
        nearest = math.inf if exact > 0 else -math.inf
    with np.errstate(over="ignore"):
        candidate = kind(nearest)
    above = candidate > 0 if math.isinf(candidate) else Fraction(float(candidate)) > exact
    if above:
        candidate = np.nextafter(candidate, kind(-np.inf))
    return kind(candidate)


def threshold_below(threshold: Any) -> np.float32 | None:
    """The float32 ``t`` for which, for every float32 pixel ``v``, ``v > t`` is exactly ``v > threshold``.

    A backend compares in float32 on the device; rounding the caller's threshold to the nearest
    float32 could move a pixel across it, so it is rounded DOWN: the largest float32 at or below
    it. Between that and the next float32 up lies no pixel value, so the comparison is exact, for
    an integer beyond ``2**53`` and an ``np.longdouble`` too (both read without rounding).
    """
    if threshold is None:
        return None
    exact = _exact_number(threshold, "threshold", "a real number or None",
                          "threshold is NaN; pass None for no threshold")
    return np.float32(_round_down(exact, np.float32))


def distance_bound(max_distance: Any) -> float | None:
    """``max_distance`` as the float64 ``b`` with ``d > b`` exactly ``d > max_distance`` for every
    float32 distance ``d``, or ``None`` (no bound); NaN and negatives are refused.

    Rounded DOWN to float64 (an integer beyond ``2**53``, an ``np.longdouble``), as the threshold is
    to float32: every backend compares its float32 distances with this float64 in float64, so the
    comparison the docs call exact is exact. A bound beyond float64's range (``10**400``) is larger
    than every distance: no bound.
    """
    if max_distance is None:
        return None
    exact = _exact_number(max_distance, "max_distance", "a non-negative number or None",
                          f"max_distance must be a non-negative number, got {_shown(max_distance)}")
    if exact < 0:
        raise ValueError(f"max_distance must be a non-negative number, got {_shown(max_distance)}")
    if exact == math.inf or exact > _FLOAT64_MAX:
        return None
    return float(_round_down(exact, np.float64))


METRICS = ("euclidean", "hamming")


def _one_of(value: Any, name: str, choices: tuple[str, ...]) -> str:
    """``value`` checked: one of the strings ``choices`` (a non-string is a TypeError)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, one of {choices}, got {type(value).__name__}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def metric_name(metric: Any) -> str:
    return _one_of(metric, "metric", METRICS)


def packed_bits(dtype: np.dtype[Any], name: str) -> None:
    """Hamming points must be uint8 rows of packed bits; anything else is refused, not converted
    (a float descriptor cast to bytes would compare meaningless bits)."""
    if dtype != np.uint8:
        raise TypeError(f"metric='hamming' takes uint8 rows of packed bits (ORB's 32 bytes); {name} is {dtype}")


def neighbour_count(k: Any) -> int:
    count = _integer(k, "k")
    if count < 1:
        raise ValueError(f"k must be at least 1 neighbour, got {count}")
    return count


# ---- the decode chain's filters: sigma, truncate, boundary mode ------------------------------

FILTER_MODES = ("reflect", "nearest")
"""The boundary modes the filters take, by SciPy's names: ``"reflect"`` mirrors the field about its
edge, the edge pixel repeated (``d c b a | a b c d | d c b a``); ``"nearest"`` repeats the edge pixel."""


def filter_mode(mode: Any) -> str:
    """``mode`` checked: one of :data:`FILTER_MODES`."""
    return _one_of(mode, "mode", FILTER_MODES)


def _real(value: Any, name: str) -> float:
    value = _scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} ({value!r})")
    number = _float(value)
    if not math.isfinite(number):
        finite = isinstance(value, (int, np.integer)) or bool(np.isfinite(value))
        beyond = " (beyond float64's range)" if finite else ""
        raise ValueError(f"{name} must be finite, got {_shown(value)}{beyond}")
    return number


def sigma_pair(sigma: Any) -> tuple[float, float]:
    """``sigma`` as ``(rows, columns)`` standard deviations in pixels: a number or a pair, each
    finite and not negative. 0 is taken as SciPy takes it: that axis is not smoothed (a sigma of
    at most :data:`SIGMA_SKIPPED` leaves its axis as it is)."""
    sigma = _scalar(sigma)
    if isinstance(sigma, (tuple, list, np.ndarray)):
        values = list(np.asarray(sigma, dtype=object).ravel()) if isinstance(sigma, np.ndarray) else list(sigma)
        if len(values) != 2 or (isinstance(sigma, np.ndarray) and sigma.ndim != 1):
            raise ValueError(f"sigma must be a number or a pair (rows, columns), got {len(values)} values")
        pair = (_real(values[0], "sigma"), _real(values[1], "sigma"))
    else:
        number = _real(sigma, "sigma")
        pair = (number, number)
    if min(pair) < 0.0:
        raise ValueError(f"sigma must not be negative, got {sigma!r}")
    return pair


def truncate_value(truncate: Any) -> float:
    """``truncate``: the kernel's reach in standard deviations (SciPy's ``truncate``), finite, not negative."""
    number = _real(truncate, "truncate")
    if number < 0.0:
        raise ValueError(f"truncate must not be negative, got {truncate!r}")
    return number


KERNEL_RADIUS_LIMIT = (sys.maxsize // 8 - 1) // 2
"""The longest half-width a kernel may have: ``2 * radius + 1`` float64 weights is the most a NumPy
array can hold (``2**59 - 1`` on a 64-bit machine). Past it no backend could build the kernel
(NumPy raises "Maximum allowed size exceeded", or OverflowError for an infinite radius), which is
the caller's input, not a backend's fault; below it a kernel too large for the memory is an
out-of-memory, as any large call is."""


def kernel_radii(sigma: tuple[float, float], truncate: float) -> tuple[int, int]:
    """The kernel's half-width along the rows and the columns (:func:`gaussian_radius`), refused
    with a ValueError naming both arguments when it is longer than :data:`KERNEL_RADIUS_LIMIT`."""
    for value in sigma:
        reach = truncate * value + 0.5  # float64: 1e300 * 1e300 is inf, no exception
        if value > SIGMA_SKIPPED and not reach < KERNEL_RADIUS_LIMIT + 1:
            raise ValueError(f"sigma and truncate give a kernel radius of {reach:.4g} pixels (int(truncate * "
                             f"sigma + 0.5) with sigma {value!r}, truncate {truncate!r}); at most "
                             f"{KERNEL_RADIUS_LIMIT} is taken, the longest kernel a NumPy array can hold")
    return gaussian_radius(sigma[0], truncate), gaussian_radius(sigma[1], truncate)


# ---- the decode chain: points, and registration's options ---------------------------------------


def window_points(points: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``points`` as C-contiguous int64 ``(N, 2)`` rows ``(y, x)``, each a pixel of a field of ``shape``.

    A point outside the field has no window to read (NumPy's negative indices would read the
    opposite edge), and a fractional one no centre pixel, so both are refused, not rounded. No
    points are ``[]`` or zero rows of two; ``(2, 0)`` is two points without coordinates, refused.
    """
    if "numpy.ma" in sys.modules and isinstance(points, np.ma.MaskedArray):
        raise TypeError("points is a masked array; pass points[~points.mask.any(axis=1)] or points.data "
                        "(a mask would be silently ignored)")
    try:
        array = np.asarray(points)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise ValueError(f"points cannot be read as an (N, 2) array: {describe(exc)}") from None
    if array.shape == (0,):
        array = array.reshape(0, 2)
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"points must be an (N, 2) array of (y, x) rows, got shape {array.shape}")
    if array.dtype.kind not in "iuf":
        array = _object_integers(array)
    if array.dtype.kind == "f" and not (np.isfinite(array).all() and (array == np.floor(array)).all()):
        raise ValueError("points must be whole pixel coordinates; got a fractional or non-finite one")
    if array.dtype.kind in "uf" and array.size and float(np.abs(array).max()) >= 2.0 ** 62:
        # Past int64 (a uint64 of 2**63 would be cast to a negative coordinate): outside any field.
        raise ValueError("points holds a coordinate outside the field")
    rows = np.ascontiguousarray(array, dtype=_I64)
    height, width = shape[-2:]
    outside = (rows[:, 0] < 0) | (rows[:, 0] >= height) | (rows[:, 1] < 0) | (rows[:, 1] >= width)
    if outside.any():
        first = int(np.flatnonzero(outside)[0])
        raise ValueError(f"points holds {int(outside.sum())} point(s) outside the {height} x {width} field, "
                         f"the first ({rows[first, 0]}, {rows[first, 1]}) at row {first}")
    return rows


def _object_integers(array: np.ndarray) -> np.ndarray:
    """``points`` of an object array (a table's mixed column, Python integers past int64) as int64
    when every value is an integer, Python's or NumPy's; anything else is refused."""
    values = list(array.flat) if array.dtype == object else [True]
    if not all(isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) for value in values):
        raise ValueError(f"points must hold integer pixel coordinates, got dtype {array.dtype}")
    if values and max(abs(int(value)) for value in values) >= 2**62:
        raise ValueError("points holds a coordinate outside the field")  # past int64: outside any field
    return array.astype(_I64)


SHIFT_LIMIT = 2**62
"""The largest expected shift, in pixels either way: the unwrap's arithmetic is int64 and adds an
axis length to it, so past this it would overflow silently (a shift of ``2**63 - 1`` rows came back
negative)."""


def expected_shift(expected: Any) -> tuple[int, int]:
    """The shift a registration expects, ``(rows, columns)``, as two whole numbers within
    :data:`SHIFT_LIMIT`."""
    expected = _scalar(expected)
    if isinstance(expected, (str, bytes)) or not hasattr(expected, "__len__") or len(expected) != 2:
        raise ValueError(f"expected must be a (rows, columns) pair of whole numbers, got {_shown(expected)}")
    pair = _integer(expected[0], "expected[0]"), _integer(expected[1], "expected[1]")
    for axis, value in enumerate(pair):
        if abs(value) > SHIFT_LIMIT:
            raise ValueError(f"expected[{axis}] must be within 2**62 pixels either way (the shift is computed "
                             f"in int64), got {_shown(expected[axis])}")
    return pair


def _non_negative(value: Any, name: str) -> float:
    value = _scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a non-negative number, got {type(value).__name__} ({value!r})")
    number = _float(value)
    if not number >= 0.0:
        raise ValueError(f"{name} must be a non-negative number of pixels, got {_shown(value)}")
    return number


def shift_tolerance(tolerance: Any) -> tuple[float, float] | None:
    """``None``, one distance for both axes, or ``(rows, columns)``: how far from the expected shift
    a registration may land and be accepted (the two axes differ: a stage's skew is across). A
    tolerance beyond float64's range is infinite: every shift is within it."""
    tolerance = _scalar(tolerance)
    if tolerance is None:
        return None
    if isinstance(tolerance, (tuple, list, np.ndarray)):
        if len(tolerance) != 2:
            raise ValueError(f"tolerance must be one number or a (rows, columns) pair, got {_shown(tolerance)}")
        return _non_negative(tolerance[0], "tolerance[0]"), _non_negative(tolerance[1], "tolerance[1]")
    both = _non_negative(tolerance, "tolerance")
    return both, both


def ratio_floor(min_peak_ratio: Any) -> float:
    """``min_peak_ratio`` as a float (beyond float64's range, the infinity of its sign); NaN would
    accept nothing silently, so it is refused."""
    min_peak_ratio = _scalar(min_peak_ratio)
    if isinstance(min_peak_ratio, (bool, np.bool_)) or not isinstance(
            min_peak_ratio, (int, float, np.integer, np.floating)):
        raise TypeError(f"min_peak_ratio must be a number, got {type(min_peak_ratio).__name__}")
    value = _float(min_peak_ratio)
    if math.isnan(value):
        raise ValueError("min_peak_ratio is NaN")
    return value


def field_pair(first: np.ndarray, second: np.ndarray) -> None:
    """Two inputs of one shape ``(..., H, W)`` with non-empty fields: the shapes registration takes."""
    if first.shape != second.shape:
        raise ValueError(f"first and second must have one shape, got {first.shape} and {second.shape}")
    if first.ndim < 2:
        raise ValueError(f"first and second must be 2-D fields (or stacks (..., H, W)), got shape {first.shape}")
    if 0 in first.shape[-2:]:
        raise ValueError(f"first and second have empty fields (shape {first.shape})")


def field_array(field: Any, name: str = "field") -> np.ndarray:
    """``field`` as an array of numbers with at least the two field axes (what every field operation
    checks); ``name`` is the caller's argument name."""
    array = _numeric(field, name)
    fields_shape(array.shape, name)
    return array


def as_filtered(array: np.ndarray) -> np.ndarray:
    """The field as a backend receives it: a camera dtype as it is, anything else as float32.

    A float64 value beyond float32's range becomes inf quietly, as the contract says (NumPy would
    warn "overflow encountered in cast", an exception under ``-W error``).
    """
    if array.dtype in NARROW_FIELDS:
        return array
    with np.errstate(over="ignore"):
        converted: np.ndarray = array.astype(_F32, copy=False)
    return converted
