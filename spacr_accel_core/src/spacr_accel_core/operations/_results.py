"""What a backend's answer must look like (the result checks dispatch runs on every answer), and
when two answers agree (the comparisons the bench and the conformance suite make against the
reference). Generic: an operation's table entry names the ones it uses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._checks import _F32, _I64

MATMUL_RTOL = 1e-5
"""Allowed ``||got - expected|| / ||expected||`` for a product: float32 rounding, not a different answer."""


@dataclass(frozen=True)
class Example:
    """An input of an operation, as ``ops.<name>(*args, **dict(keywords))`` takes it.

    :param label: the input in words (the bench's table).
    :param args: positional arguments.
    :param keywords: keyword arguments, as pairs (``(("threshold", 1000.0),)``).
    :param checks: further ``(label, args)`` inputs only checked against the reference, never
        timed: rules (the NaN rule) a backend may answer by declining.
    """

    label: str
    args: tuple[Any, ...]
    keywords: tuple[tuple[str, Any], ...] = ()
    checks: tuple[tuple[str, tuple[Any, ...]], ...] = ()


def check_array(result: Any, expected: tuple[tuple[int, ...], np.ndarray | None]) -> str | None:
    """A float32 array of the expected shape (``out`` itself when one was given)."""
    shape, out = expected
    if type(result) is np.ndarray and result.dtype is _F32 and result.shape == shape and out is None:
        return None  # the per-tile case, answered in three identity checks
    if not isinstance(result, np.ndarray):
        return f"returned {type(result).__name__}, not a NumPy array"
    if result.shape != shape or result.dtype != _F32:
        return f"returned {result.dtype}{list(result.shape)}, expected float32{list(shape)}"
    if out is not None and result is not out:
        return "returned a new array instead of the out= array it was given"
    return None


def check_neighbours(result: Any, expected: tuple[int, int, int, bool]) -> str | None:
    """``(indices, distances)`` of shape ``(N,)`` for ``k=1``, ``(N, k)`` otherwise.

    The index range is checked too: an index outside the target set is the one wrong answer a shape
    check cannot see, and it would crash the caller's pairing later. ``-1`` is allowed only where a
    neighbour may be missing (``k > M`` or ``max_distance``).
    """
    n, m, k, may_miss = expected
    shape = (n,) if k == 1 else (n, k)
    if not isinstance(result, tuple) or len(result) != 2:
        return f"returned {type(result).__name__}, not an (indices, distances) pair"
    index, distance = result
    if not isinstance(index, np.ndarray) or index.dtype != _I64 or index.shape != shape:
        return f"indices are not int64 of shape {shape}"
    if not isinstance(distance, np.ndarray) or distance.dtype != _F32 or distance.shape != shape:
        return f"distances are not float32 of shape {shape}"
    if index.size and (index.min() < (-1 if may_miss else 0) or index.max() >= m):
        return f"indices fall outside the {m} target points"
    return None


def check_coordinates(result: Any, shape: tuple[int, ...]) -> str | None:
    """int64 ``(P, ndim)`` coordinates inside the field, in row-major order.

    Cheap on purpose (a few passes over P x ndim integers): 343,000 peaks of a 4096^2 field are
    checked in about 3 ms rather than 12, which is the difference between ``local_maxima`` keeping
    pace with ``maximum_filter`` or not.
    """
    if not isinstance(result, np.ndarray) or result.dtype != _I64 or result.ndim != 2 \
            or result.shape[1] != len(shape):
        return f"returned {getattr(result, 'dtype', type(result).__name__)}" \
               f"{list(getattr(result, 'shape', ()))}, expected int64 (P, {len(shape)}) coordinates"
    if result.shape[0]:
        # Column by column: a reduction along axis 0 of a (P, 2) array is ~30 times slower.
        unsigned = result.view(np.uint64)  # a negative coordinate becomes huge: one bound checks both ends
        if any(unsigned[:, axis].max() >= length for axis, length in enumerate(shape)):
            return "returned coordinates outside the field"
        strides = np.cumprod((*shape[1:], 1)[::-1])[::-1].astype(np.int64)
        flat = result @ strides
        if flat.shape[0] > 1 and not (flat[1:] > flat[:-1]).all():
            return "returned coordinates not in row-major order (or repeated)"
    return None



def check_gathered(result: Any, expected: tuple[int, int]) -> str | None:
    """float32 ``(N, F)``: one value per point and field."""
    if type(result) is np.ndarray and result.dtype is _F32 and result.shape == expected:
        return None
    return f"returned {getattr(result, 'dtype', type(result).__name__)}" \
           f"{list(getattr(result, 'shape', ()))}, expected float32{list(expected)}"


def check_correlation(result: Any, expected: tuple[int, int]) -> str | None:
    """``(peaks, ratios)``: int64 ``(B,)`` flat indices inside the field, float64 ``(B,)`` ratios.

    A peak outside the field is the wrong answer a shape check cannot see (it would unwrap to a
    shift no surface holds); a negative or NaN ratio is not a ratio of a maximum to a mean.
    """
    count, pixels = expected
    if not isinstance(result, tuple) or len(result) != 2:
        return f"returned {type(result).__name__}, not a (peaks, ratios) pair"
    peaks, ratios = result
    if not isinstance(peaks, np.ndarray) or peaks.dtype != _I64 or peaks.shape != (count,):
        return f"peaks are not int64 of shape ({count},)"
    if not isinstance(ratios, np.ndarray) or ratios.dtype != np.float64 or ratios.shape != (count,):
        return f"ratios are not float64 of shape ({count},)"
    if count and (peaks.min() < 0 or peaks.max() >= pixels):
        return "returned peaks outside the field"
    if count and not (ratios >= 0).all():
        return "returned negative or NaN ratios"
    return None


# ---- agreement: (expected, got) -> (agrees, detail) ------------------------------------------


def agree_field(expected: Any, got: Any, what: str = "pixels") -> tuple[bool, str]:
    """Bit-identical, NaN where the reference has NaN (a filter is exact on every backend)."""
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return False, f"got {got.dtype}{list(got.shape)}, the reference gave {expected.dtype}{list(expected.shape)}"
    same = (got.view(np.uint32) == expected.view(np.uint32)) | (np.isnan(got) & np.isnan(expected)) \
        if got.dtype == _F32 else (got == expected)
    wrong = int(same.size - np.count_nonzero(same))
    return wrong == 0, "bit-identical" if wrong == 0 else f"{wrong} of {same.size} {what} differ"


def agree_gathered(expected: Any, got: Any) -> tuple[bool, str]:
    """Bit-identical values at the points (a window's maximum is exact on every backend)."""
    return agree_field(expected, got, "values")


def agree_product(expected: Any, got: Any) -> tuple[bool, str]:
    """Equal up to float32 rounding, measured against the size of the whole product.

    A relative norm rather than an element-wise tolerance, because a row of near-zero products
    legitimately differs in its last bits between BLAS implementations.
    """
    if got.shape != expected.shape:
        return False, f"got shape {list(got.shape)}, the reference gave {list(expected.shape)}"
    ref = expected.astype(np.float64)
    scale = float(np.linalg.norm(ref))
    error = float(np.linalg.norm(got.astype(np.float64) - ref))
    relative = error / scale if scale > 0 else error
    agrees = bool(np.isfinite(relative)) and relative <= MATMUL_RTOL
    return agrees, f"relative error {relative:.1e}"


def agree_nearest(expected: Any, got: Any) -> tuple[bool, str]:
    """Same indices and same distances: the search is exact, ties to the lowest index."""
    ref_index, ref_distance = expected
    index, distance = got
    if index.shape != ref_index.shape or distance.shape != ref_distance.shape:
        return False, f"got {len(index)} answers, the reference gave {len(ref_index)}"
    wrong_index = int(np.count_nonzero(index != ref_index))
    wrong_distance = int(np.count_nonzero(distance != ref_distance))
    if wrong_index == 0 and wrong_distance == 0:
        return True, "identical"
    return False, f"{wrong_index} indices and {wrong_distance} distances of {len(ref_index)} differ"


def agree_coordinates(expected: Any, got: Any) -> tuple[bool, str]:
    """The same coordinates, in the same (row-major) order."""
    if np.array_equal(expected, got) and got.shape == expected.shape:
        return True, "identical"
    return False, f"got {len(got)} coordinates, the reference gave {len(expected)}"


RATIO_RTOL = 1e-9
"""How far a backend's peak ratio may lie from the reference's (both float64 transforms)."""


def agree_registration(expected: Any, got: Any) -> tuple[bool, str]:
    """The same shifts and verdicts; the peak ratios within :data:`RATIO_RTOL` (a float32 device's 1e-5)."""
    for name in ("dy", "dx", "accepted"):
        if not np.array_equal(getattr(expected, name), getattr(got, name)):
            return False, f"{name} differs from the reference's"
    ratio = np.asarray(expected.peak_ratio, dtype=np.float64)
    error = float(np.max(np.abs(np.asarray(got.peak_ratio) - ratio) / np.maximum(np.abs(ratio), 1e-300)))
    tolerance = RATIO_RTOL if error <= RATIO_RTOL else 1e-5
    return error <= tolerance, f"same shifts, ratio within {error:.1e}"
