"""The real spaCR (``pip install --no-deps spacr==1.5.1.5``), patched and not, on edge inputs: every
seam's answer, layout, warnings and errors against spaCR's own.

Every test here needs spaCR; without it they are skipped, saying how to install it.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from spacr_accel_core.patch._calls import first_difference

pytest.importorskip("spacr", reason="spaCR is not installed (pip install --no-deps spacr==1.5.1.5)")


@pytest.fixture(scope="session", autouse=True)
def _ready(compiled_backends: None) -> None:
    """Every test here starts with the compiled backends ready (``compiled_backends``)."""


@dataclass(frozen=True)
class Outcome:
    """What one call did: its answer (or None), the exception it raised as ``(type, message)`` (or
    None), and every warning it gave as ``(category, message)``, in order."""

    value: Any
    error: tuple[type, str] | None
    warned: tuple[tuple[type, str], ...]


def _run(call: Callable[[], Any]) -> Outcome:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value, error = call(), None
        except Exception as exc:  # spaCR's own exception is part of what is compared
            value, error = None, (type(exc), str(exc))
    return Outcome(value, error, tuple((item.category, str(item.message)) for item in caught))


def _layout_difference(got: Any, expected: Any, where: str = "the answer") -> str | None:
    """Where two answers' types or memory layouts first differ: the C and Fortran flags, and the strides
    of every axis longer than one (an axis of one element has no stride to keep)."""
    if type(got) is not type(expected):
        return f"{where}: a {type(got).__name__} against spaCR's {type(expected).__name__}"
    if isinstance(expected, np.ndarray):
        mine = (got.flags.c_contiguous, got.flags.f_contiguous,
                [stride for stride, size in zip(got.strides, got.shape, strict=True) if size > 1])
        theirs = (expected.flags.c_contiguous, expected.flags.f_contiguous,
                  [stride for stride, size in zip(expected.strides, expected.shape, strict=True) if size > 1])
        return None if mine == theirs else f"{where}: layout {mine} against spaCR's {theirs}"
    if isinstance(expected, (tuple, list)):
        for position, (mine_item, theirs_item) in enumerate(zip(got, expected, strict=True)):
            found = _layout_difference(mine_item, theirs_item, f"{where}[{position}]")
            if found:
                return found
    fields = getattr(type(expected), "__dataclass_fields__", None)
    for name in fields or ():
        found = _layout_difference(getattr(got, name), getattr(expected, name), f"{where}.{name}")
        if found:
            return found
    return None


def _same_state(before: Any, after: Any) -> bool:
    return first_difference(after, before) is None  # an array's layout cannot change in place: its bits can


@pytest.fixture
def same_as_spacr(served_only: None) -> Iterator[Callable[..., Outcome]]:
    """``same_as_spacr(call, *inputs)``: ``call()`` patched and then with spaCR unpatched (nothing of
    the patch anywhere inside it), asserting the same answer to the bit, the same types, dtypes and
    layouts, the same exception and the same warnings, and every input as it was given; returns the
    patched call's :class:`Outcome`."""
    from spacr_accel_core import patch

    def compare(call: Callable[[], Any], *inputs: Any) -> Outcome:
        given = copy.deepcopy(inputs)
        patched = _run(call)
        assert all(_same_state(before, now) for before, now in zip(given, inputs, strict=True)), "an input changed"
        patch.uninstall()
        try:
            own = _run(call)
        finally:
            assert patch.install()
        assert patched.error == own.error, (patched.error, own.error)
        assert patched.warned == own.warned, (patched.warned, own.warned)
        if own.error is None:
            found = first_difference(patched.value, own.value) or _layout_difference(patched.value, own.value)
            assert found is None, found
        return patched

    yield compare
