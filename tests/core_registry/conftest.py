"""In-process plugins for the registry tests: built on the fly, registered, always removed."""

from __future__ import annotations

import logging
import sys
import types
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from spacr_accel_core import BackendInfo, Registry, hookimpl, ops

LOGGER = "spacr_accel_core"


def reference_matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """A correct float32 product (what a well-behaved backend returns)."""
    product = np.matmul(np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64))
    return np.asarray(product, dtype=np.float32)


def make_plugin(
    name: str,
    *,
    priority: float = 1000.0,
    accelerated: bool = False,
    usable: bool = True,
    note: str = "",
    info: Callable[[], Any] | None = None,
    api_version: Any = None,
    matmul: Callable[..., Any] | None = None,
    maximum_filter: Callable[..., Any] | None = None,
    nearest_neighbours: Callable[..., Any] | None = None,
) -> types.ModuleType:
    """A module holding hookimpls; ``module.calls`` counts every hook call by operation."""
    module = types.ModuleType(f"spacr_accel_test_plugin_{name}")
    calls: Counter[str] = Counter()
    module.calls = calls  # type: ignore[attr-defined]
    if api_version is not None:
        module.SPACR_ACCEL_API_VERSION = api_version  # type: ignore[attr-defined]

    def spacr_accel_backend_info() -> Any:
        calls["backend_info"] += 1
        if info is not None:
            return info()
        return BackendInfo(name=name, priority=priority, accelerated=accelerated, usable=usable, note=note)

    module.spacr_accel_backend_info = hookimpl(spacr_accel_backend_info)  # type: ignore[attr-defined]

    if matmul is not None:
        def spacr_accel_matmul(first: np.ndarray, second: np.ndarray) -> Any:
            calls["matmul"] += 1
            return matmul(first, second)

        module.spacr_accel_matmul = hookimpl(spacr_accel_matmul)  # type: ignore[attr-defined]
    if maximum_filter is not None:
        def spacr_accel_maximum_filter(field: np.ndarray, size: int) -> Any:
            calls["maximum_filter"] += 1
            return maximum_filter(field, size)

        module.spacr_accel_maximum_filter = hookimpl(spacr_accel_maximum_filter)  # type: ignore[attr-defined]
    if nearest_neighbours is not None:
        def spacr_accel_nearest_neighbours(source: np.ndarray, target: np.ndarray, chunk: int) -> Any:
            calls["nearest_neighbours"] += 1
            return nearest_neighbours(source, target, chunk)

        module.spacr_accel_nearest_neighbours = hookimpl(spacr_accel_nearest_neighbours)  # type: ignore[attr-defined]
    return module


def raising(exc: BaseException) -> Callable[..., Any]:
    def hook(*_args: Any) -> Any:
        raise exc

    return hook


def returning(value: Any) -> Callable[..., Any]:
    def hook(*_args: Any) -> Any:
        return value

    return hook


@pytest.fixture
def kit() -> types.ModuleType:
    """This module: ``kit.make_plugin``, ``kit.raising``, ``kit.returning``, ``kit.records``...

    (Test files cannot import a conftest under ``--import-mode=importlib``.)
    """
    return sys.modules[__name__]


@pytest.fixture
def private(monkeypatch: pytest.MonkeyPatch) -> Registry:
    """An empty registry that sees no installed plugin, wired in as the one ``ops`` dispatches to.

    The environment's ``SPACR_ACCEL_*`` variables are cleared for the test (set them and call
    ``private.refresh()`` to exercise them).
    """
    monkeypatch.delenv("SPACR_ACCEL_BACKENDS", raising=False)
    monkeypatch.delenv("SPACR_ACCEL_DISABLE", raising=False)
    registry = Registry(discover=False)
    monkeypatch.setattr(ops, "REGISTRY", registry)
    return registry


@pytest.fixture
def numpy_plugin() -> types.ModuleType:
    """The real NumPy backend module, for private registries that need the floor."""
    from spacr_accel_numpy import _plugin

    return _plugin


@pytest.fixture
def core_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    return caplog


def records(caplog: pytest.LogCaptureFixture, level: int, needle: str) -> list[logging.LogRecord]:
    """The core's log records at exactly ``level`` whose message contains ``needle``."""
    return [r for r in caplog.records
            if r.name == LOGGER and r.levelno == level and needle in r.getMessage()]
