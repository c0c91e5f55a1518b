"""In-process plugins for the registry tests: built on the fly, registered, always removed."""

from __future__ import annotations

import logging
import os
import sys
import types
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from spacr_accel_core import API_VERSION, BackendInfo, Declaration, Registry, hookimpl
from spacr_accel_core.config import ENV_DISABLE, ENV_ONLY

LOGGER = "spacr_accel_core"
"""The core's logger; each of its modules logs under its own name beneath it."""

_PROBE_SIDE = tuple(f"{LOGGER}.{module}" for module in
                    ("accelerator", "_probers", "_bounded", "_host", "_records", "_memory", "_cellpose"))
"""The accelerator's modules: what they log is about probing, not about the registry."""


def _registry_record(record: logging.LogRecord) -> bool:
    """Logged by the registry's modules (discovery, configuration, dispatch), not by the probes."""
    return record.name.startswith(f"{LOGGER}.") and not record.name.startswith(_PROBE_SIDE)


def reference_matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """A correct float32 product (what a well-behaved backend returns)."""
    product = np.matmul(np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64))
    return np.asarray(product, dtype=np.float32)


_DECLARE: Any = object()
"""``make_plugin(declaration=...)``'s default: build a valid declaration from the other arguments."""


def make_plugin(
    name: str,
    *,
    priority: Any = 1000.0,
    accelerated: Any = False,
    try_last: Any = False,
    field_dtypes: Any = (),
    positive_zeros: Any = False,
    stacks: Any = False,
    api_version: Any = API_VERSION,
    declaration: Any = _DECLARE,
    usable: bool = True,
    note: str = "",
    info: Callable[[], Any] | None = None,
    describes: bool = True,
    matmul: Callable[..., Any] | None = None,
    maximum_filter: Callable[..., Any] | None = None,
    nearest_neighbours: Callable[..., Any] | None = None,
    local_maxima: Callable[..., Any] | None = None,
    warm_up: Callable[[float], Any] | None = None,
) -> types.ModuleType:
    """A module holding a declaration and hookimpls; ``module.calls`` counts every hook call by name.

    :param declaration: the ``SPACR_ACCEL_PLUGIN`` value; by default a :class:`Declaration` of the
        fields given here (left unvalidated, so a test can hand it a malformed field); ``None``
        leaves the attribute out (a plugin of the earlier API).
    :param info: what ``spacr_accel_backend_info`` does instead of answering ``usable``/``note``.
    :param describes: ``False`` leaves ``spacr_accel_backend_info`` out (a plugin that always runs).
    """
    module = types.ModuleType(f"spacr_accel_test_plugin_{name}")
    calls: Counter[str] = Counter()
    module.calls = calls  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
    if declaration is _DECLARE:
        declaration = Declaration(name=name, priority=priority, accelerated=accelerated, try_last=try_last,
                                  field_dtypes=field_dtypes, positive_zeros=positive_zeros, stacks=stacks,
                                  api_version=api_version)
    if declaration is not None:
        module.SPACR_ACCEL_PLUGIN = declaration  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes

    if describes:
        def spacr_accel_backend_info() -> Any:
            calls["backend_info"] += 1
            if info is not None:
                return info()
            return BackendInfo(usable=usable, note=note)

        module.spacr_accel_backend_info = hookimpl(spacr_accel_backend_info)  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes

    if matmul is not None:
        def spacr_accel_matmul(first: np.ndarray, second: np.ndarray) -> Any:
            calls["matmul"] += 1
            return matmul(first, second)

        module.spacr_accel_matmul = hookimpl(spacr_accel_matmul)  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
    if maximum_filter is not None:
        def spacr_accel_maximum_filter(field: np.ndarray, size: int) -> Any:
            calls["maximum_filter"] += 1
            return maximum_filter(field, size)

        module.spacr_accel_maximum_filter = hookimpl(spacr_accel_maximum_filter)  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
    if nearest_neighbours is not None:
        def spacr_accel_nearest_neighbours(source: np.ndarray, target: np.ndarray, chunk: int) -> Any:
            calls["nearest_neighbours"] += 1
            return nearest_neighbours(source, target, chunk)

        module.spacr_accel_nearest_neighbours = hookimpl(spacr_accel_nearest_neighbours)  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
    if local_maxima is not None:
        def spacr_accel_local_maxima(field: np.ndarray, size: int, threshold: Any) -> Any:
            calls["local_maxima"] += 1
            return local_maxima(field, size, threshold)

        module.spacr_accel_local_maxima = hookimpl(spacr_accel_local_maxima)  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
    if warm_up is not None:
        def spacr_accel_warm_up(timeout: float) -> Any:
            calls["warm_up"] += 1
            return warm_up(timeout)

        module.spacr_accel_warm_up = hookimpl(spacr_accel_warm_up)  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
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
    for variable in [v for v in os.environ if v.startswith("SPACR_ACCEL_BACKENDS") or v in (ENV_DISABLE, ENV_ONLY)]:
        monkeypatch.delenv(variable)
    registry = Registry(discover=False)
    # Every module of the ops face dispatches through its own binding of the registry (its family
    # modules and the table's public door): each is wired to this one.
    for name, module in list(sys.modules.items()):
        if name.startswith(("spacr_accel_core.ops", "spacr_accel_core.table")) and hasattr(module, "REGISTRY"):
            monkeypatch.setattr(module, "REGISTRY", registry)
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
            if _registry_record(r) and r.levelno == level and needle in r.getMessage()]
