"""One patched call: served or handed to spaCR, counted, and in check mode compared with spaCR's own.

A seam never takes a call down. Whatever goes wrong on the way to the registry's answer (a backend
that every plugin declines, an argument the registry refuses) becomes a pass-through with that
reason, and spaCR's own function answers, raising spaCR's own errors for spaCR's own bad input.
Only the two modes a user asks for raise: ``check`` on a difference, ``strict`` on a pass-through.
"""

from __future__ import annotations

import functools
import logging
import math
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._report import Tally
from ._served import SERVED, PassThrough

__all__ = ["Modes", "PatchMismatch", "first_difference", "make_wrapper"]

LOG = logging.getLogger("spacr_accel_core.patch")


class PatchMismatch(AssertionError):
    """A patched call's answer differs from spaCR's own (``check``), or a call could not be served
    (``strict``). The message names the seam, the arguments' shapes and dtypes and what differed."""


@dataclass
class Modes:
    """What the patch does besides serving: ``check`` runs spaCR's own function beside every served
    call and compares; ``strict`` raises where a call would go to spaCR; ``report`` prints the
    report at exit."""

    check: bool = False
    strict: bool = False
    report: bool = False


def _describe(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    def one(value: Any) -> str:
        if isinstance(value, np.ndarray):
            return f"{value.dtype}{list(value.shape)}"
        text = repr(value)
        return text if len(text) <= 40 else f"{type(value).__name__}(...)"

    return ", ".join([*(one(value) for value in args), *(f"{key}={one(value)}" for key, value in kwargs.items())])


def _float_bits(value: float) -> bytes:
    return struct.pack("<d", value)


def first_difference(got: Any, expected: Any, where: str = "") -> str | None:  # noqa: PLR0912  # one branch per kind of answer spaCR returns
    """Where two answers first differ (dtype, shape, an element's bits, a record's field), or None.

    Bits, not values: ``-0.0`` and ``+0.0`` differ, two NaNs of the same bits do not.
    """
    if isinstance(expected, np.ndarray) or isinstance(got, np.ndarray):
        return _array_difference(np.asarray(got), np.asarray(expected), where)
    if isinstance(expected, np.generic) or isinstance(got, np.generic):
        return _array_difference(np.asarray(got), np.asarray(expected), where)
    if isinstance(expected, dict):
        return _dict_difference(got, expected, where)
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"{where or 'the answer'}: {_short(got)} against spaCR's {_short(expected)}"
        for position, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
            found = first_difference(mine, theirs, f"{where}[{position}]")
            if found:
                return found
        return None
    fields = getattr(type(expected), "__dataclass_fields__", None)
    if fields is not None:
        if type(got) is not type(expected):
            return f"{where or 'the answer'}: a {type(got).__name__} against spaCR's {type(expected).__name__}"
        for name in fields:
            if name != "backend":
                found = first_difference(getattr(got, name), getattr(expected, name), f"{where}.{name}")
                if found:
                    return found
        return None
    if isinstance(expected, float) and isinstance(got, float):
        same = _float_bits(got) == _float_bits(expected) or (math.isnan(got) and math.isnan(expected))
    else:
        same = type(got) is type(expected) and got == expected
    return None if same else f"{where or 'the answer'}: {got!r} against spaCR's {expected!r}"


def _dict_difference(got: Any, expected: dict[Any, Any], where: str) -> str | None:
    if not isinstance(got, dict) or sorted(map(str, got)) != sorted(map(str, expected)):
        keys = sorted(map(str, got)) if isinstance(got, dict) else _short(got)
        return f"{where or 'the answer'}: keys {keys} against spaCR's {sorted(map(str, expected))}"
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
        return f"{label}: {got.dtype}{list(got.shape)} against spaCR's {expected.dtype}{list(expected.shape)}"
    if expected.dtype.kind in "biufc" and expected.size:
        mine = np.ascontiguousarray(got).view(np.uint8).reshape(got.size, -1)
        theirs = np.ascontiguousarray(expected).view(np.uint8).reshape(expected.size, -1)
        differs = np.flatnonzero((mine != theirs).any(axis=1))
        if differs.size:
            at = tuple(int(i) for i in np.unravel_index(int(differs[0]), expected.shape))
            return f"{label}{list(at)}: {got[at]!r} against spaCR's {expected[at]!r} ({differs.size} elements differ)"
        return None
    return None if np.array_equal(got, expected) else f"{label}: the values differ"


def make_wrapper(tally: Tally, modes: Modes) -> Callable[..., Callable[..., Any]]:
    """The installer's ``wrap``: one seam's replacement from its way of serving and spaCR's original."""

    def wrap(seam: str, way: str, original: Callable[..., Any], context: dict[str, Any]) -> Callable[..., Any]:
        serve = SERVED[way]

        def patched(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                answer, backend = serve(*args, **kwargs, **context)
            except PassThrough as why:
                reason = str(why)
            except Exception as error:  # a seam never takes a call down: spaCR answers
                reason = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:120]
                LOG.debug("spacr-accel patch: %s could not be served", seam, exc_info=True)
            else:
                if modes.check:
                    found = first_difference(answer, original(*args, **kwargs))
                    if found:
                        raise PatchMismatch(f"{seam}({_describe(args, kwargs)}): {found}")
                tally.served(seam, backend, time.perf_counter() - started)
                return answer
            if modes.strict:
                raise PatchMismatch(f"{seam}({_describe(args, kwargs)}) could not be served: {reason}")
            LOG.debug("spacr-accel patch: %s passed to spaCR's own: %s", seam, reason)
            try:
                return original(*args, **kwargs)
            finally:  # counted even when spaCR refuses its own bad input
                tally.passed(seam, reason, time.perf_counter() - started)

        functools.update_wrapper(patched, original)
        return patched

    return wrap

