"""The real spaCR (``pip install --no-deps spacr==1.5.1.5``), patched and not, on edge inputs.

Every test here needs spaCR; without it they are skipped, saying how to install it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from spacr_accel_core.patch import first_difference

pytest.importorskip("spacr", reason="spaCR is not installed (pip install --no-deps spacr==1.5.1.5)")


@pytest.fixture(scope="session", autouse=True)
def _ready(compiled_backends: None) -> None:
    """Every test here starts with the compiled backends ready (``compiled_backends``)."""


def _layout(value: Any) -> Any:
    """Each array's C and F contiguity, through tuples, lists and records."""
    if isinstance(value, np.ndarray):
        return (value.flags.c_contiguous, value.flags.f_contiguous)
    if isinstance(value, (tuple, list)):
        return [_layout(item) for item in value]
    return None


@dataclass(frozen=True)
class Outcome:
    """What one call did: its answer, the exception it raised (type and message) and the warnings it
    gave (category and message, in order).

    :param answer: the return value, None where it raised.
    :param error: ``(type, message)`` of the exception, or None.
    :param warned: ``(category, message)`` of each warning.
    """

    answer: Any
    error: tuple[type[BaseException], str] | None
    warned: tuple[tuple[type[Warning], str], ...]


def outcome(call: Callable[[], Any]) -> Outcome:
    """Run ``call`` and record what it did (every warning shown, none filtered)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            answer, error = call(), None
        except Exception as exc:  # the outcome under test: spaCR's exception, compared below
            answer, error = None, (type(exc), str(exc))
    return Outcome(answer, error, tuple((item.category, str(item.message)) for item in caught))


def assert_same_outcome(got: Outcome, expected: Outcome) -> None:
    """The patched call did what spaCR's own did: the same exception, the same warnings, the same
    answer to the bit (dtype and shape included) and the same memory layout."""
    assert got.error == expected.error, f"raised {got.error} against spaCR's {expected.error}"
    assert got.warned == expected.warned, f"warned {got.warned} against spaCR's {expected.warned}"
    assert type(got.answer) is type(expected.answer)
    found = first_difference(got.answer, expected.answer)
    assert found is None, found
    assert _layout(got.answer) == _layout(expected.answer)


@pytest.fixture
def same_as_spacr(served_only: None) -> Callable[[Callable[[], Any], Callable[[], Any]], Outcome]:
    """``same_as_spacr(patched_call, own_call)``: both run (the patched first), their outcomes
    compared (:func:`assert_same_outcome`); returns spaCR's."""

    def compare(patched: Callable[[], Any], own: Callable[[], Any]) -> Outcome:
        got = outcome(patched)
        expected = outcome(own)
        assert_same_outcome(got, expected)
        return expected

    return compare
