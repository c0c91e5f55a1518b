"""A forced backend still building the piece a call needs is waited for, bounded, never raising
``BackendWarming`` (``backend=`` on a call); after the bound the error names what it was building.
``use(..., only=True)`` is waited for the same way, unless the caller says ``wait=False`` (spaCR's
patch, which hands such a call to spaCR's own function at once).
Each test runs a private registry with a plugin that builds one piece
in a thread while its whole warm-up never finishes within the bound."""

from __future__ import annotations

import sys
import threading
import time
import types
from typing import Any

import numpy as np
import pytest

from spacr_accel_core import (
    BackendInfo,
    BackendUnavailable,
    BackendWarming,
    Declaration,
    NoBackendError,
    Registry,
    config,
    hookimpl,
    ops,
    use,
)

FIRST = np.arange(6, dtype=np.float32).reshape(2, 3)
SECOND = np.arange(12, dtype=np.float32).reshape(3, 4)


def _building(seconds: float) -> tuple[types.ModuleType, dict[str, Any]]:
    """A plugin whose matmul declines as still building until ``seconds`` after its warm-up starts;
    its warm-up (the whole set) never finishes within a bound."""
    state: dict[str, Any] = {"ready": threading.Event(), "calls": 0, "warm_ups": 0}
    module = types.ModuleType("spacr_accel_trust_building")
    module.SPACR_ACCEL_PLUGIN = Declaration(name="building", priority=500.0)  # type: ignore[attr-defined]  # a plugin module made at run time

    def spacr_accel_backend_info() -> BackendInfo:
        return BackendInfo(usable=True)

    def spacr_accel_matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        state["calls"] += 1
        if not state["ready"].is_set():
            raise BackendWarming("building is still compiling its matmul kernel")
        return np.matmul(first.astype(np.float64), second.astype(np.float64)).astype(np.float32)

    def spacr_accel_warm_up(timeout: float) -> bool:
        state["warm_ups"] += 1
        timer = threading.Timer(seconds, state["ready"].set)
        timer.daemon = True  # never holds the test run open
        timer.start()
        time.sleep(timeout + 10.0)  # the whole set: longer than any bound
        return False

    for hook in (spacr_accel_backend_info, spacr_accel_matmul, spacr_accel_warm_up):
        setattr(module, hook.__name__, hookimpl(hook))
    return module, state


@pytest.fixture
def private(monkeypatch: pytest.MonkeyPatch) -> Registry:
    for variable in ("SPACR_ACCEL_ONLY", "SPACR_ACCEL_BACKENDS", "SPACR_ACCEL_DISABLE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("SPACR_ACCEL_PROBE_TIMEOUT", "5")
    registry = Registry(discover=False)
    # Every module of the ops face dispatches through its own binding of the registry (its family
    # modules and the table's public door): each is wired to this one.
    for name, module in list(sys.modules.items()):
        if name.startswith(("spacr_accel_core.ops", "spacr_accel_core.table")) and hasattr(module, "REGISTRY"):
            monkeypatch.setattr(module, "REGISTRY", registry)
    from spacr_accel_numpy import _plugin as floor

    registry.register(floor, "numpy")
    return registry


def test_a_forced_backend_waits_for_its_piece_not_for_its_whole_warm_up(private: Registry) -> None:
    plugin, state = _building(0.3)
    private.register(plugin, "building")
    began = time.monotonic()
    product = ops.matmul(FIRST, SECOND, backend="building")
    assert time.monotonic() - began < 4.0  # the piece's 0.3 s, not the warm-up's bound
    np.testing.assert_array_equal(product, np.matmul(FIRST, SECOND))
    assert private.last_dispatch().backend == "building" and state["warm_ups"] == 1 and state["calls"] >= 2


def test_only_waits_for_the_named_backend_as_a_forced_call_does(private: Registry) -> None:
    # nothing after the named backends may answer under only=True: the one still building is waited for
    plugin, state = _building(0.3)
    private.register(plugin, "building")
    began = time.monotonic()
    with use("building", only=True):
        product = ops.matmul(FIRST, SECOND)
    assert time.monotonic() - began < 4.0  # the piece's 0.3 s, not the warm-up's bound
    np.testing.assert_array_equal(product, np.matmul(FIRST, SECOND))
    assert private.last_dispatch().backend == "building" and state["calls"] >= 2


def test_only_after_the_bound_names_the_backend_and_is_not_a_warming(private: Registry,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACR_ACCEL_PROBE_TIMEOUT", "0.5")
    plugin, _ = _building(60.0)
    private.register(plugin, "building")
    with use("building", only=True), pytest.raises(BackendUnavailable) as raised:
        ops.matmul(FIRST, SECOND)
    assert not isinstance(raised.value, BackendWarming)
    assert "'building'" in str(raised.value) and "0.5 s" in str(raised.value)


def test_wait_false_hands_the_call_on_at_once(private: Registry) -> None:
    # spaCR's patch asks for the backends above the floor with only=True, wait=False and hands the call
    # to spaCR meanwhile: that must be at once, with the backend named as still building
    plugin, _ = _building(0.3)
    private.register(plugin, "building")
    began = time.monotonic()
    with config.override(backends=["building"], only=True, wait=False), pytest.raises(NoBackendError) as missed:
        ops.matmul(FIRST, SECOND)
    assert time.monotonic() - began < 0.2
    assert [name for name, reason in missed.value.reasons if reason.startswith("BackendWarming")] == ["building"]


def test_wait_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="wait must be True or False"), config.override(wait="no"):  # type: ignore[arg-type]  # the wrong type is the test
        pass


def test_after_the_bound_the_error_names_the_piece_and_is_not_a_warming(private: Registry,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACR_ACCEL_PROBE_TIMEOUT", "0.5")
    plugin, _ = _building(60.0)
    private.register(plugin, "building")
    began = time.monotonic()
    with pytest.raises(BackendUnavailable) as raised:
        ops.matmul(FIRST, SECOND, backend="building")
    assert time.monotonic() - began < 0.5 + 3.0
    assert not isinstance(raised.value, BackendWarming)
    message = str(raised.value)
    assert "'building'" in message and "0.5 s" in message and "matmul kernel" in message
