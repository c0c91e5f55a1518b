"""spaCR's ``nuclear_points`` patched and not: answers, layouts, warnings and errors against spaCR's own.

Every test here needs spaCR and scikit-image; without them they are skipped, saying how to install them.
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
pytest.importorskip("skimage", reason="scikit-image is not installed (spaCR's peak finder)")


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


def _layout(value: Any) -> Any:
    if not isinstance(value, np.ndarray):
        return type(value)
    return (value.flags.c_contiguous, value.flags.f_contiguous,
            [stride for stride, size in zip(value.strides, value.shape, strict=True) if size > 1])


@pytest.fixture
def same_as_spacr(served_only: None) -> Iterator[Callable[..., Outcome]]:
    """``same_as_spacr(call, *inputs)``: ``call()`` patched and then with spaCR unpatched, asserting
    the same answer to the bit, the same dtype and layout, the same exception and warnings, and
    every input as it was given; returns the patched call's :class:`Outcome`."""
    from spacr_accel_core import patch

    def compare(call: Callable[[], Any], *inputs: Any) -> Outcome:
        given = copy.deepcopy(inputs)
        patched = _run(call)
        assert all(first_difference(now, before) is None for before, now in zip(given, inputs, strict=True)), \
            "an input changed"
        patch.uninstall()
        try:
            own = _run(call)
        finally:
            assert patch.install()
        assert patched.error == own.error, (patched.error, own.error)
        assert patched.warned == own.warned, (patched.warned, own.warned)
        if own.error is None:
            found = first_difference(patched.value, own.value)
            assert found is None, found
            assert _layout(patched.value) == _layout(own.value)
        return patched

    yield compare
