"""The input checks every operation shares, wherever its arrays live (NumPy in ``ops``, Dask in
``dask``): one home, so a wrong call fails with the same words on every path."""

from __future__ import annotations

import math
import operator
import sys
from fractions import Fraction
from typing import Any

import numpy as np

from ..contract._errors import describe

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


def _integer(value: Any, name: str) -> int:
    """A whole number of pixels or rows: any integer, or a float holding a whole number.

    spaCR computes sizes from radii and scales (``2 * radius + 1`` with a float radius), so ``7.0``
    and ``np.float32(7)`` are taken as 7; a fraction is refused rather than silently rounded.
    """
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



def fields_shape(shape: tuple[int, ...]) -> None:
    """A field is 2-D, or a stack ``(..., H, W)`` of 2-D fields; anything else is refused."""
    if len(shape) < 2:
        raise ValueError(f"field must be a 2-D array (or a stack (..., H, W) of 2-D fields), got "
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
    range would raise ``OverflowError`` although it is a perfectly good number.
    """
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
                          f"max_distance must be a non-negative number, got {max_distance!r}")
    if exact < 0:
        raise ValueError(f"max_distance must be a non-negative number, got {max_distance!r}")
    if exact == math.inf or exact > _FLOAT64_MAX:
        return None
    return float(_round_down(exact, np.float64))


METRICS = ("euclidean", "hamming")


def metric_name(metric: Any) -> str:
    if not isinstance(metric, str):
        raise TypeError(f"metric must be a string, one of {METRICS}, got {type(metric).__name__}")
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    return metric


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
