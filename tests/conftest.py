"""Fixtures every test folder shares: in-process plugins that always leave the registry clean, the
compiled backends ready (numba's kernels, and every backend's warm-up), and spaCR patched set
against spaCR unpatched call by call (`same_as_spacr`)."""

from __future__ import annotations

import copy
import threading
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest

import spacr_accel_core
from spacr_accel_core import BackendInfo, Declaration, hookimpl


@pytest.fixture
def plug() -> Iterator[Callable[[object, str], object]]:
    """``plug(obj, name)`` registers an in-process plugin for this test only and returns it.

    Each registration refreshes the registry and the cached accelerator, so the next call sees the
    plugin; teardown unregisters every plugin and refreshes again.
    """
    names: list[str] = []

    def add(obj: object, name: str) -> object:
        spacr_accel_core.register(obj, name)
        names.append(name)
        spacr_accel_core.refresh()
        return obj

    spacr_accel_core.refresh()
    try:
        yield add
    finally:
        for name in names:
            spacr_accel_core.unregister(name)
        spacr_accel_core.refresh()


@pytest.fixture
def usable_stand_in() -> Iterator[Callable[..., str]]:
    """``usable_stand_in(plugin, name, *hooks)`` registers the named hooks of a backend's plugin
    module under a plugin ``name`` that claims a usable device and ranks first, so automatic
    dispatch picks a card's code path on a machine without the card; unregistered at teardown."""
    names: list[str] = []

    def add(plugin: types.ModuleType, name: str, *hooks: str) -> str:
        module = types.ModuleType(f"{name}_stand_in")
        module.SPACR_ACCEL_PLUGIN = replace(plugin.SPACR_ACCEL_PLUGIN, name=name,  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
                                            priority=1000.0)

        @hookimpl
        def spacr_accel_backend_info() -> BackendInfo:
            return BackendInfo(usable=True)

        module.spacr_accel_backend_info = spacr_accel_backend_info  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
        for hook in hooks:
            setattr(module, hook, getattr(plugin, hook))
        spacr_accel_core.register(module, name)
        names.append(name)
        return name

    try:
        yield add
    finally:
        for name in names:
            spacr_accel_core.unregister(name)


class SlowToDescribe:
    """A plugin whose loading, and so discovery, waits until the test releases it.

    The wait is in ``dir()``, which pluggy calls while registering the plugin: a hanging
    ``spacr_accel_backend_info`` no longer hangs discovery (it is asked lazily, under its own
    bound), but a plugin that hangs while being loaded still does, which is what these tests need.
    """

    SPACR_ACCEL_PLUGIN = Declaration(name="slow", priority=1.0)

    def __init__(self, release: threading.Event) -> None:
        self.release = release

    def __dir__(self) -> list[str]:
        self.release.wait()
        return list(super().__dir__())

    @hookimpl
    def spacr_accel_backend_info(self) -> BackendInfo:
        return BackendInfo()


@pytest.fixture
def slow_to_describe() -> type[SlowToDescribe]:
    """The :class:`SlowToDescribe` class (a conftest cannot be imported under importlib mode)."""
    return SlowToDescribe


@pytest.fixture(scope="session")
def compiled_backends() -> None:
    """The compiled backends ready (or given up on): while numba compiles, the spaCR patch hands the
    Gaussian seams to SciPy, and the tests of what the seams serve need it ready."""
    spacr_accel_core.warm_up(timeout=900)


@pytest.fixture(scope="session")
def numba_compiled() -> None:
    """numba's kernels compiled (the tests fail if they cannot be): until they are, numba declines
    every call and the floor answers, which would make a test of numba's kernels check the floor."""
    import spacr_accel_numba

    assert spacr_accel_numba.warm(timeout=600), f"the numba kernels did not compile: {spacr_accel_numba.failure()}"


@pytest.fixture
def patched() -> Iterator[None]:
    """spaCR patched, with the check mode on (every served call compared with spaCR's own), for
    one test; unpatched and counted afresh after it. Only for folders that skip without spaCR."""
    from spacr_accel_core import patch

    patch.reset()
    assert patch.install(check=True)
    try:
        yield
    finally:
        patch.uninstall()
        patch.install()  # modes back to their defaults ...
        patch.uninstall()  # ... and spaCR as it was
        patch.reset()


@pytest.fixture
def served_only() -> Iterator[None]:
    """spaCR patched without the check mode, what a user's run does; counted afresh before and after."""
    from spacr_accel_core import patch

    patch.reset()
    assert patch.install()
    try:
        yield
    finally:
        patch.uninstall()
        patch.reset()


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


@pytest.fixture
def same_as_spacr(served_only: None) -> Iterator[Callable[..., Outcome]]:
    """For folders that skip without spaCR (a folder may define its own of this name).
    ``same_as_spacr(call, *inputs)``: ``call()`` patched and then with spaCR unpatched (nothing of
    the patch anywhere inside it), asserting the same answer to the bit, the same types, dtypes and
    layouts, the same exception and the same warnings, and every input as it was given; returns the
    patched call's :class:`Outcome`."""
    from spacr_accel_core import patch
    from spacr_accel_core.patch import first_difference

    def compare(call: Callable[[], Any], *inputs: Any) -> Outcome:
        given = copy.deepcopy(inputs)
        patched = _run(call)
        # an array's layout cannot change in place: its bits can
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
            found = first_difference(patched.value, own.value) or _layout_difference(patched.value, own.value)
            assert found is None, found
        return patched

    yield compare
