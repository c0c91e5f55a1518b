"""The configuration in force: only mode, an order per operation (environment and override), overrides
local to their thread, ``gpu`` as 0/1, a forced backend waited for, and ``gpu=False`` when forcing."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest

from spacr_accel_core import BackendDeclined, NoBackendError, config, cpu_requested, ops, use
from spacr_accel_core.testing import reference_maximum_filter

FIRST = np.arange(6, dtype=np.float32).reshape(2, 3)
SECOND = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
PRODUCT = (FIRST.astype(np.float64) @ SECOND.astype(np.float64)).astype(np.float32)
FIELD = np.arange(30, dtype=np.float32).reshape(5, 6) % 7


def filtering(field: np.ndarray, size: int) -> np.ndarray:
    return reference_maximum_filter(field, size)


@pytest.fixture
def pair(kit, private, numpy_plugin):
    """``alpha`` (500) and ``beta`` (400), each serving matmul and maximum_filter right, and the floor."""
    plugins = {name: kit.make_plugin(name, priority=priority, matmul=kit.reference_matmul,
                                     maximum_filter=filtering)
               for name, priority in (("alpha", 500.0), ("beta", 400.0))}
    for name, plugin in plugins.items():
        private.register(plugin, name)
    private.register(numpy_plugin, "numpy")
    return plugins


def served(registry, operation: str) -> str:
    """Run ``operation`` on the fixed inputs and say which backend served it."""
    if operation == "matmul":
        np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
    else:
        np.testing.assert_array_equal(ops.maximum_filter(FIELD, 3), reference_maximum_filter(FIELD, 3))
    return registry.last_dispatch().backend


# ---- only: a decline is an error ------------------------------------------------------------------


@pytest.fixture
def card(kit, private, numpy_plugin):
    """``card`` (500) declines matmul; the floor would answer it."""
    plugin = kit.make_plugin("card", priority=500.0, matmul=kit.raising(BackendDeclined("no card in this slot")))
    private.register(plugin, "card")
    private.register(numpy_plugin, "numpy")
    return plugin


def _assert_only_error(error: NoBackendError) -> None:
    reasons = dict(error.reasons)
    assert reasons["card"] == "BackendDeclined: no card in this slot"
    assert reasons["numpy"] == "not in the backends in force ['card'] (only)"
    assert "  - card: BackendDeclined: no card in this slot" in str(error)
    assert "only the named backends may run" in str(error)


def test_use_only_makes_a_decline_an_error_naming_the_backend(private, card):
    with use("card"):  # the control: without only, the floor answers
        np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
        assert private.last_dispatch().backend == "numpy"
    with use("card", only=True):
        assert private.backend_names() == ("card",)
        with pytest.raises(NoBackendError) as info:
            ops.matmul(FIRST, SECOND)
    _assert_only_error(info.value)
    assert card.calls["matmul"] == 2


def test_override_only_is_the_same(private, card):
    with config.override(backends=["card"], only=True) as settings:
        assert (settings.backends, settings.only) == (("card",), True)
        with pytest.raises(NoBackendError) as info:
            ops.matmul(FIRST, SECOND)
    _assert_only_error(info.value)
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)  # outside: the floor again


def test_the_environment_s_only(private, card, monkeypatch):
    monkeypatch.setenv("SPACR_ACCEL_BACKENDS", "card")
    monkeypatch.setenv("SPACR_ACCEL_ONLY", "1")
    private.refresh()
    assert private.backend_names() == ("card",)
    with pytest.raises(NoBackendError) as info:
        ops.matmul(FIRST, SECOND)
    _assert_only_error(info.value)
    with config.override(only=False):  # an override beats the environment
        np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)


def test_only_serves_when_the_named_backend_answers(kit, private, numpy_plugin):
    good = kit.make_plugin("good", priority=1.0, matmul=kit.reference_matmul)
    private.register(good, "good")
    private.register(numpy_plugin, "numpy")
    with use("good", only=True):
        np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
    assert private.last_dispatch().backend == "good"


def test_only_needs_a_bool_and_without_names_restricts_nothing(private, pair):
    with config.override(only=True):  # no list to keep to: every backend may still run
        assert served(private, "matmul") == "alpha"
    with pytest.raises(TypeError, match="only must be True or False"), config.override(only="yes"):  # type: ignore[arg-type]  # a wrong type on purpose: its refusal is the test
        pass


# ---- an order per operation -----------------------------------------------------------------------


def test_the_environment_orders_one_operation(private, pair, monkeypatch, core_log, kit):
    monkeypatch.setenv("SPACR_ACCEL_BACKENDS_MAXIMUM_FILTER", "beta, nosuch")
    private.refresh()
    assert served(private, "maximum_filter") == "beta"
    assert served(private, "matmul") == "alpha"  # the other operations keep the priority order
    assert private.restriction("maximum_filter") == ("beta",) and private.restriction("matmul") is None
    assert private.backend_names(operation="maximum_filter") == ("beta", "numpy")
    assert private.backend_names(operation="matmul") == ("alpha", "beta", "numpy")
    unknown = kit.records(core_log, logging.WARNING, "nosuch")
    assert len(unknown) == 1 and "SPACR_ACCEL_BACKENDS_MAXIMUM_FILTER" in unknown[0].getMessage()


def test_the_operation_s_order_beats_the_general_one(private, pair, monkeypatch):
    monkeypatch.setenv("SPACR_ACCEL_BACKENDS", "alpha")
    monkeypatch.setenv("SPACR_ACCEL_BACKENDS_MATMUL", "beta")
    private.refresh()
    assert served(private, "matmul") == "beta"
    assert served(private, "maximum_filter") == "alpha"


def test_override_orders_one_operation(private, pair):
    with config.override(operations={"maximum_filter": ["beta", "alpha"]}):
        assert served(private, "maximum_filter") == "beta"
        assert served(private, "matmul") == "alpha"
        assert private.backend_names(operation="maximum_filter") == ("beta", "alpha", "numpy")
        with config.override(operations={"maximum_filter": ["numpy"]}):  # nested: the inner wins
            assert served(private, "maximum_filter") == "numpy"
        assert served(private, "maximum_filter") == "beta"
    assert served(private, "maximum_filter") == "alpha"


def test_override_orders_are_checked(private, pair):
    with pytest.raises(ValueError, match=r"unknown operations \['maximum'\]"), \
            config.override(operations={"maximum": ["beta"]}):
        pass
    with pytest.raises(TypeError, match=r"operations\['matmul'\] must be a non-empty list"), \
            config.override(operations={"matmul": "beta"}):
        pass
    with config.override(operations={"matmul": ["nosuch"]}), \
            pytest.raises(ValueError, match="names backends that are not installed: 'nosuch'"):
        ops.matmul(FIRST, SECOND)


def test_overrides_are_local_to_their_thread(private, pair):
    """Two threads inside different overrides at once each see their own order; the main thread none."""
    inside = threading.Barrier(3)
    leave = threading.Barrier(3)
    seen: dict[str, tuple[str, ...]] = {}
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            with config.override(operations={"matmul": [name]}, only=True):
                inside.wait(timeout=30)
                seen[name] = tuple(served(private, "matmul") for _ in range(20))
                assert config.current().order_for("matmul") == (name,)
                leave.wait(timeout=30)
        except BaseException as exc:
            errors.append(exc)
            inside.abort()
            leave.abort()

    threads = [threading.Thread(target=worker, args=(name,)) for name in ("alpha", "beta")]
    for thread in threads:
        thread.start()
    inside.wait(timeout=30)
    assert served(private, "matmul") == "alpha"  # no override here, while both threads hold theirs
    assert config.overridden() is None
    leave.wait(timeout=30)
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors
    assert seen == {"alpha": ("alpha",) * 20, "beta": ("beta",) * 20}


# ---- gpu as 0 and 1 --------------------------------------------------------------------------------


@pytest.fixture
def accelerated(kit, private, numpy_plugin):
    """``device`` (accelerated, 500) serves matmul and records whether the CPU was asked for."""
    asked: list[bool] = []

    def matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        asked.append(cpu_requested())
        return kit.reference_matmul(first, second)

    plugin = kit.make_plugin("device", priority=500.0, accelerated=True, matmul=matmul)
    plugin.asked = asked
    private.register(plugin, "device")
    private.register(numpy_plugin, "numpy")
    return plugin


@pytest.mark.parametrize(("gpu", "backend"), [(0, "numpy"), (1, "device"), (np.int64(0), "numpy"),
                                              (np.uint8(1), "device"), (np.False_, "numpy"), (True, "device")])
def test_gpu_takes_0_and_1(private, accelerated, gpu, backend):
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND, gpu=gpu), PRODUCT)
    assert private.last_dispatch().backend == backend
    assert ("device" in ops.accelerated_backends(gpu=gpu)) is (backend == "device")


@pytest.mark.parametrize("gpu", [2, -1, 1.0, "1", None])
@pytest.mark.parametrize("call", [
    lambda gpu: ops.matmul(FIRST, SECOND, gpu=gpu),
    lambda gpu: ops.maximum_filter(FIELD, 3, gpu=gpu),
    lambda gpu: ops.nearest_neighbours(FIRST, FIRST, gpu=gpu),
    lambda gpu: ops.local_maxima(FIELD, 3, gpu=gpu),
    lambda gpu: ops.accelerated_backends(gpu=gpu),
], ids=["matmul", "maximum_filter", "nearest_neighbours", "local_maxima", "accelerated_backends"])
def test_any_other_gpu_is_refused(private, accelerated, gpu, call):
    with pytest.raises(TypeError, match=r"gpu must be True or False \(or 1 or 0\)"):
        call(gpu)
    assert accelerated.asked == []


def test_forcing_an_accelerated_backend_with_gpu_0_asks_it_for_the_cpu(private, accelerated):
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND, gpu=0, backend="device"), PRODUCT)
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND, gpu=1, backend="device"), PRODUCT)
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
    assert accelerated.asked == [True, False, False]
    assert cpu_requested() is False


# ---- a forced backend still getting ready -----------------------------------------------------------


def lazy_plugin(kit, ready_after_warm_up: bool = True, warms: bool = True, hang: threading.Event | None = None):
    """A plugin whose matmul declines until its warm-up hook has been called (kernels compiling)."""
    state = {"ready": False, "timeouts": []}

    def matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        if not state["ready"]:
            raise BackendDeclined("still compiling its kernels")
        return kit.reference_matmul(first, second)

    def warm_up(timeout: float) -> bool:
        state["timeouts"].append(timeout)
        if hang is not None:
            hang.wait()
        state["ready"] = ready_after_warm_up
        return ready_after_warm_up

    plugin = kit.make_plugin("lazy", priority=500.0, matmul=matmul, warm_up=warm_up if warms else None)
    plugin.state = state
    return plugin


def test_a_forced_backend_that_declines_is_warmed_up_and_asked_again(kit, private, numpy_plugin, monkeypatch):
    monkeypatch.setenv("SPACR_ACCEL_PROBE_TIMEOUT", "7")
    lazy = lazy_plugin(kit)
    private.register(lazy, "lazy")
    private.register(numpy_plugin, "numpy")
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)  # automatic: not waited for
    assert private.last_dispatch().backend == "numpy" and lazy.calls["warm_up"] == 0
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND, backend="lazy"), PRODUCT)
    assert private.last_dispatch().backend == "lazy"
    assert lazy.calls["matmul"] == 3 and lazy.state["timeouts"] == [7.0]  # bounded by the probe bound
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND, backend="lazy"), PRODUCT)
    assert lazy.calls["warm_up"] == 1  # ready now: no second wait


def test_a_forced_backend_without_a_warm_up_declines_at_once(kit, private):
    lazy = lazy_plugin(kit, warms=False)
    private.register(lazy, "lazy")
    with pytest.raises(BackendDeclined, match="still compiling"):
        ops.matmul(FIRST, SECOND, backend="lazy")
    assert lazy.calls["matmul"] == 1


def test_a_forced_backend_whose_warm_up_fails_declines_after_one_wait(kit, private):
    lazy = lazy_plugin(kit, ready_after_warm_up=False)
    private.register(lazy, "lazy")
    with pytest.raises(BackendDeclined, match="still compiling"):
        ops.matmul(FIRST, SECOND, backend="lazy")
    assert (lazy.calls["warm_up"], lazy.calls["matmul"]) == (1, 1)


def test_a_forced_backend_that_declines_after_its_warm_up_is_asked_once_more_only(kit, private):
    stubborn = kit.make_plugin("stubborn", matmul=kit.raising(BackendDeclined("never")), warm_up=lambda t: True)
    private.register(stubborn, "stubborn")
    with pytest.raises(BackendDeclined, match="never"):
        ops.matmul(FIRST, SECOND, backend="stubborn")
    assert (stubborn.calls["warm_up"], stubborn.calls["matmul"]) == (1, 2)


def test_a_warm_up_that_never_returns_costs_its_bound(kit, private, monkeypatch):
    monkeypatch.setenv("SPACR_ACCEL_PROBE_TIMEOUT", "0.2")
    release = threading.Event()
    lazy = lazy_plugin(kit, hang=release)
    private.register(lazy, "lazy")
    start = time.monotonic()
    try:
        with pytest.raises(BackendDeclined, match="still compiling"):
            ops.matmul(FIRST, SECOND, backend="lazy")
        elapsed = time.monotonic() - start
    finally:
        release.set()
    assert elapsed < 0.2 + 5.0 + 3.0  # the bound, the grace after it, and a slow machine's slack
    assert lazy.state["timeouts"] == [0.2]


# ---- precedence: a context's backends beat the environment's per-operation orders -----------------


def test_use_beats_an_environment_order_for_one_operation(private, pair, monkeypatch):
    """``use("alpha")`` means alpha for every operation, even where the environment named another
    for one operation; with ``only=True`` nothing else may run at all."""
    monkeypatch.setenv("SPACR_ACCEL_BACKENDS_MATMUL", "beta")
    private.refresh()
    assert served(private, "matmul") == "beta"
    with use("alpha"):
        assert served(private, "matmul") == "alpha"
    with use("alpha", only=True):
        assert served(private, "matmul") == "alpha"
        assert private.restriction("matmul") == ("alpha",)


def test_use_keeps_the_environments_only_unless_told(private, card, monkeypatch):
    monkeypatch.setenv("SPACR_ACCEL_ONLY", "1")
    private.refresh()
    with use("card"), pytest.raises(NoBackendError) as info:  # SPACR_ACCEL_ONLY still in force
        ops.matmul(FIRST, SECOND)
    _assert_only_error(info.value)
    with use("card", only=False):
        np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)


def test_overrides_apply_to_the_environment_of_the_registry_that_dispatches(private, pair, monkeypatch):
    """A private registry's environment (read at its own discovery) is the base of an override."""
    monkeypatch.setenv("SPACR_ACCEL_BACKENDS", "beta")
    private.refresh()
    with config.override(only=True):
        assert private.backend_names() == ("beta",)


def test_only_with_every_named_backend_unknown_runs_nothing(private, pair, monkeypatch):
    """A typo in SPACR_ACCEL_BACKENDS under SPACR_ACCEL_ONLY must not let the floor answer quietly."""
    monkeypatch.setenv("SPACR_ACCEL_BACKENDS", "cupyX")
    monkeypatch.setenv("SPACR_ACCEL_ONLY", "1")
    private.refresh()
    with pytest.raises(NoBackendError):
        ops.matmul(FIRST, SECOND)
    monkeypatch.delenv("SPACR_ACCEL_ONLY")
    private.refresh()
    assert served(private, "matmul") == "alpha"  # without only, an unknown name is warned about and dropped


def test_an_override_for_one_operation_keeps_the_others(private, pair, monkeypatch):
    monkeypatch.setenv("SPACR_ACCEL_BACKENDS_MAXIMUM_FILTER", "beta")
    private.refresh()
    with config.override(operations={"matmul": ["beta"]}):
        assert served(private, "matmul") == "beta"
        assert served(private, "maximum_filter") == "beta"  # the environment's, kept
        with config.override(operations={"maximum_filter": ["alpha"]}):  # nested: both in force
            assert served(private, "matmul") == "beta"
            assert served(private, "maximum_filter") == "alpha"


def test_a_mistyped_operation_variable_is_warned_about(private, pair, monkeypatch, caplog):
    monkeypatch.setenv("SPACR_ACCEL_BACKENDS_MAXIMUMFILTER", "beta")
    private.refresh()
    with caplog.at_level(logging.WARNING):
        assert served(private, "maximum_filter") == "alpha"
    assert any("MAXIMUMFILTER names no operation" in r.getMessage() for r in caplog.records)


def test_use_discovers_nothing_on_entry(monkeypatch):
    """Entering use() only sets the context: discovery waits for a call that needs it."""
    from spacr_accel_core import REGISTRY

    REGISTRY.refresh()
    with use("numpy"):
        assert REGISTRY._snapshot is None
