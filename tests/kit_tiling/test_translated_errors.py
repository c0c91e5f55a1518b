"""A device library's errors in the contract's words: ``translated_errors`` around a hook's own call,
``call_translated`` around one handed-over call. What ``translate`` maps is raised in the contract's
type with the library's error as its cause; what it returns unchanged is raised as it was (a fault,
not the device); an answer passes through untouched."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from spacr_accel_core import BackendOutOfMemory, BackendUnavailable, Declaration, hookimpl, last_dispatch, ops
from spacr_accel_core.toolkit import call_translated, translated_errors


class OutOfMemoryError(MemoryError):
    """A library's out-of-memory (CuPy's is a MemoryError)."""


class DriverGone(RuntimeError):
    """A library's lost device."""


def translate(exc: BaseException, what: str) -> BaseException:
    """The library's exceptions in the contract's words; anything else unchanged."""
    if isinstance(exc, OutOfMemoryError):
        return BackendOutOfMemory(f"fake {what}: {exc}")
    if isinstance(exc, DriverGone):
        return BackendUnavailable(f"fake {what}: the driver went away ({exc})")
    return exc


def _raise(exc: BaseException) -> Any:
    raise exc


def test_call_translated_puts_a_librarys_out_of_memory_in_the_contracts_words() -> None:
    full = OutOfMemoryError("out of memory allocating 4 GiB")
    with pytest.raises(BackendOutOfMemory, match="fake maximum_filter: out of memory allocating 4 GiB") as info:
        call_translated(translate, "maximum_filter", _raise, full)
    assert info.value.__cause__ is full
    gone = DriverGone("device lost")
    with pytest.raises(BackendUnavailable, match="fake matmul: the driver went away") as unavailable:
        call_translated(translate, "matmul", _raise, gone)
    assert unavailable.value.__cause__ is gone


def test_call_translated_returns_the_answer_and_passes_the_arguments() -> None:
    assert call_translated(translate, "matmul", lambda a, b: (a, b), 2, "three") == (2, "three")


def test_an_error_translate_leaves_alone_is_raised_as_it_was() -> None:
    bug = KeyError("a bug in the primitive")
    with pytest.raises(KeyError) as info:
        call_translated(translate, "matmul", _raise, bug)
    assert info.value is bug and info.value.__cause__ is None
    with pytest.raises(KeyError) as again, translated_errors(translate, "matmul"):
        raise bug
    assert again.value is bug


def test_translated_errors_around_a_hooks_own_call() -> None:
    full = OutOfMemoryError("no room")
    with pytest.raises(BackendOutOfMemory, match="fake gaussian_filter: no room") as info, \
            translated_errors(translate, "gaussian_filter"):
        raise full
    assert info.value.__cause__ is full
    with translated_errors(translate, "gaussian_filter"):
        answer = 42
    assert answer == 42


class FullCard:
    """A backend whose primitive always finds its card full, its hook calling it through the kit."""

    SPACR_ACCEL_PLUGIN = Declaration(name="full_card", priority=1000.0)

    @staticmethod
    def _primitive(field: np.ndarray, size: int) -> np.ndarray:
        raise OutOfMemoryError(f"out of memory for a {field.shape} field, window {size}")

    @hookimpl
    def spacr_accel_maximum_filter(self, field: np.ndarray, size: int) -> np.ndarray:
        return call_translated(translate, "maximum_filter", self._primitive, field, size)


def test_dispatch_reads_the_translated_error_as_the_contracts(plug: Callable[[object, str], object]) -> None:
    """The point of the words: dispatch passes a translated out-of-memory on to the next backend
    and names it; forced, it is raised as the contract's ``BackendOutOfMemory``, not a fault."""
    plug(FullCard(), "full_card")
    field = np.arange(48, dtype=np.float32).reshape(6, 8)
    answer = ops.maximum_filter(field, 3)
    served = last_dispatch()
    assert served.backend != "full_card"
    assert dict(served.declined)["full_card"] == (
        "BackendOutOfMemory: fake maximum_filter: out of memory for a (6, 8) field, window 3")
    np.testing.assert_array_equal(answer, ops.maximum_filter(field, 3, backend="numpy"))
    with pytest.raises(BackendOutOfMemory, match="fake maximum_filter"):
        ops.maximum_filter(field, 3, backend="full_card")
