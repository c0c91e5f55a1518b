"""Whether two answers are the same, bit for bit: the check a benchmark's row is conditioned on.

A benchmark that times the registry (or the patch) against spaCR's or NumPy's own code reports a
time only for an answer identical to theirs: a faster wrong answer is an error, not a row. Identical
means the same bits, not the same values: ``-0.0`` and ``+0.0`` differ, two NaNs of the same bits do
not, and an array's dtype and shape count. :func:`first_difference` walks the answers spaCR's
functions return (arrays, NumPy scalars, dictionaries key by key, lists and tuples item by item,
dataclass records field by field, Python floats by their bits) and names the first place they part.

The benchmarks import this module by name, beside them, as they import :mod:`_timing`.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np


def first_difference(got: Any, expected: Any, where: str = "") -> str | None:
    """Where ``got`` first differs from ``expected`` (dtype, shape, an element's bits, a record's
    field, a key), in words, or ``None`` when they are the same.

    :param got: the answer under test (the registry's, the patch's).
    :param expected: the answer it must equal (spaCR's own, NumPy's).
    :param where: the path to this part of the answer, for the message.
    """
    if isinstance(expected, (np.ndarray, np.generic)) or isinstance(got, (np.ndarray, np.generic)):
        return _array_difference(np.asarray(got), np.asarray(expected), where)
    if isinstance(expected, dict):
        return _dict_difference(got, expected, where)
    if isinstance(expected, (tuple, list)):
        return _sequence_difference(got, expected, where)
    fields = getattr(type(expected), "__dataclass_fields__", None)
    if fields is not None:
        return _record_difference(got, expected, fields, where)
    if isinstance(expected, float) and isinstance(got, float):
        same = struct.pack("<d", got) == struct.pack("<d", expected) or (math.isnan(got) and math.isnan(expected))
    else:
        same = type(got) is type(expected) and got == expected
    return None if same else f"{where or 'the answer'}: {got!r} against {expected!r}"


def _sequence_difference(got: Any, expected: tuple[Any, ...] | list[Any], where: str) -> str | None:
    if not isinstance(got, (tuple, list)) or len(got) != len(expected):
        return f"{where or 'the answer'}: {_short(got)} against {_short(expected)}"
    for position, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        found = first_difference(mine, theirs, f"{where}[{position}]")
        if found:
            return found
    return None


def _record_difference(got: Any, expected: Any, fields: Any, where: str) -> str | None:
    if type(got) is not type(expected):
        return f"{where or 'the answer'}: a {type(got).__name__} against a {type(expected).__name__}"
    for name in fields:
        if name != "backend":  # who served it: the one field two sides may rightly differ in
            found = first_difference(getattr(got, name), getattr(expected, name), f"{where}.{name}")
            if found:
                return found
    return None


def _dict_difference(got: Any, expected: dict[Any, Any], where: str) -> str | None:
    if not isinstance(got, dict) or sorted(map(str, got)) != sorted(map(str, expected)):
        keys = sorted(map(str, got)) if isinstance(got, dict) else _short(got)
        return f"{where or 'the answer'}: keys {keys} against {sorted(map(str, expected))}"
    for key, value in expected.items():
        found = first_difference(got[key], value, f"{where}[{key!r}]")
        if found:
            return found
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _array_difference(got: np.ndarray, expected: np.ndarray, where: str) -> str | None:
    label = where or "the array"
    if got.dtype != expected.dtype or got.shape != expected.shape:
        return f"{label}: {got.dtype}{list(got.shape)} against {expected.dtype}{list(expected.shape)}"
    if expected.dtype.kind in "biufc" and expected.size:
        mine = np.ascontiguousarray(got).view(np.uint8).reshape(got.size, -1)
        theirs = np.ascontiguousarray(expected).view(np.uint8).reshape(expected.size, -1)
        differs = np.flatnonzero((mine != theirs).any(axis=1))
        if differs.size:
            at = tuple(int(i) for i in np.unravel_index(int(differs[0]), expected.shape))
            return f"{label}{list(at)}: {got[at]!r} against {expected[at]!r} ({differs.size} elements differ)"
        return None
    return None if np.array_equal(got, expected) else f"{label}: the values differ"
