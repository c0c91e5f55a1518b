"""Whether two answers are the same, bit for bit: what ``check`` compares a served call's answer with
spaCR's by, and what a benchmark's row is conditioned on (a faster wrong answer is an error, not a
row).

Identical means the same bits, not the same values: ``-0.0`` and ``+0.0`` differ, two NaNs of the
same bits do not, and an array's dtype and shape count. :func:`first_difference` walks the answers
spaCR's functions return (arrays, NumPy scalars, dictionaries key by key, lists and tuples item by
item, dataclass records field by field, Python floats by their bits) and names the first place they
part. A record's ``backend`` field is not compared: it says who served the call, the one field two
sides may rightly differ in.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

__all__ = ["first_difference"]


def first_difference(got: Any, expected: Any, where: str = "", *, against: str = "spaCR's") -> str | None:
    """Where ``got`` first differs from ``expected`` (dtype, shape, an element's bits, a record's
    field, a key), in words, or ``None`` when they are the same.

    :param got: the answer under test (the registry's, the patch's).
    :param expected: the answer it must equal (spaCR's own, NumPy's).
    :param where: the path to this part of the answer, for the message.
    :param against: whose ``expected`` is, in the message ("... against spaCR's 1.0").
    """
    theirs = _theirs(against)
    if isinstance(expected, (np.ndarray, np.generic)) or isinstance(got, (np.ndarray, np.generic)):
        return _array_difference(np.asarray(got), np.asarray(expected), where, theirs)
    if isinstance(expected, dict):
        return _dict_difference(got, expected, where, against)
    if isinstance(expected, (tuple, list)):
        return _sequence_difference(got, expected, where, against)
    fields = getattr(type(expected), "__dataclass_fields__", None)
    if fields is not None:
        return _record_difference(got, expected, fields, where, against)
    if isinstance(expected, float) and isinstance(got, float):
        same = struct.pack("<d", got) == struct.pack("<d", expected) or (math.isnan(got) and math.isnan(expected))
    else:
        same = type(got) is type(expected) and got == expected
    return None if same else f"{where or 'the answer'}: {got!r} against {theirs}{expected!r}"


def _sequence_difference(got: Any, expected: tuple[Any, ...] | list[Any], where: str, against: str) -> str | None:
    if not isinstance(got, (tuple, list)) or len(got) != len(expected):
        return f"{where or 'the answer'}: {_short(got)} against {_theirs(against)}{_short(expected)}"
    for position, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        found = first_difference(mine, theirs, f"{where}[{position}]", against=against)
        if found:
            return found
    return None


def _record_difference(got: Any, expected: Any, fields: Any, where: str, against: str) -> str | None:
    if type(got) is not type(expected):
        return (f"{where or 'the answer'}: a {type(got).__name__} against {_theirs(against)}"
                f"{type(expected).__name__}")
    for name in fields:
        if name != "backend":  # who served it: the one field two sides may rightly differ in
            found = first_difference(getattr(got, name), getattr(expected, name), f"{where}.{name}", against=against)
            if found:
                return found
    return None


def _dict_difference(got: Any, expected: dict[Any, Any], where: str, against: str) -> str | None:
    if not isinstance(got, dict) or sorted(map(str, got)) != sorted(map(str, expected)):
        keys = sorted(map(str, got)) if isinstance(got, dict) else _short(got)
        return f"{where or 'the answer'}: keys {keys} against {_theirs(against)}{sorted(map(str, expected))}"
    for key, value in expected.items():
        found = first_difference(got[key], value, f"{where}[{key!r}]", against=against)
        if found:
            return found
    return None


def _theirs(against: str) -> str:
    return f"{against} " if against else ""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _array_difference(got: np.ndarray, expected: np.ndarray, where: str, theirs: str) -> str | None:
    label = where or "the array"
    if got.dtype != expected.dtype or got.shape != expected.shape:
        return f"{label}: {got.dtype}{list(got.shape)} against {theirs}{expected.dtype}{list(expected.shape)}"
    if expected.dtype.kind in "biufc" and expected.size:
        mine = np.ascontiguousarray(got).view(np.uint8).reshape(got.size, -1)
        other = np.ascontiguousarray(expected).view(np.uint8).reshape(expected.size, -1)
        differs = np.flatnonzero((mine != other).any(axis=1))
        if differs.size:
            at = tuple(int(i) for i in np.unravel_index(int(differs[0]), expected.shape))
            return f"{label}{list(at)}: {got[at]!r} against {theirs}{expected[at]!r} ({differs.size} elements differ)"
        return None
    return None if np.array_equal(got, expected) else f"{label}: the values differ"
