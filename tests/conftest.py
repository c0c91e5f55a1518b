"""Fixtures every test folder shares: in-process plugins that always leave the registry clean."""

from __future__ import annotations

import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import replace

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
        module.SPACR_ACCEL_PLUGIN = replace(plugin.SPACR_ACCEL_PLUGIN, name=name,  # type: ignore[attr-defined]
                                            priority=1000.0)

        @hookimpl
        def spacr_accel_backend_info() -> BackendInfo:
            return BackendInfo(usable=True)

        module.spacr_accel_backend_info = spacr_accel_backend_info  # type: ignore[attr-defined]
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
