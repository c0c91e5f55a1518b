"""Ordering: priorities, ties by name, SPACR_ACCEL_BACKENDS, use(), gpu=False, API versions, blocking."""

from __future__ import annotations

import logging
import os
import random
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import spacr_accel_core
from spacr_accel_core import API_VERSION, BackendDeclined, BackendUnavailable, Registry, ops, use

FIRST = np.arange(6, dtype=np.float32).reshape(2, 3)
SECOND = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
PRODUCT = (FIRST.astype(np.float64) @ SECOND.astype(np.float64)).astype(np.float32)

PRIORITIES = {"low": 10.0, "mid": 50.0, "b_tie": 50.0, "a_tie": 50.0, "high": 90.0, "floor_mate": 100.0}
RANKED = ("floor_mate", "high", "a_tie", "b_tie", "mid", "low")


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("SPACR_ACCEL_BACKENDS", raising=False)
    monkeypatch.delenv("SPACR_ACCEL_DISABLE", raising=False)
    return monkeypatch


def declining_registry(kit, registry, numpy_plugin, order):
    """Fill a private registry with plugins that all decline matmul, and the real NumPy floor."""
    plugins = {}
    for name in order:
        plugins[name] = kit.make_plugin(name, priority=PRIORITIES[name],
                                        matmul=kit.raising(BackendDeclined(f"{name} says no")))
        registry.register(plugins[name], name)
    registry.register(numpy_plugin, "numpy")
    return registry, plugins


def call(registry: Registry, **kwargs):
    """``ops.matmul`` (dispatching to ``registry``, the ``private`` fixture) and what served it."""
    result = ops.matmul(FIRST, SECOND, **kwargs)
    return result, registry.last_dispatch()


@pytest.mark.parametrize("seed", range(4))
def test_priority_order_with_ties_by_name_whatever_the_registration_order(kit, private, numpy_plugin, clean_env, seed):
    order = list(PRIORITIES)
    random.Random(seed).shuffle(order)
    registry, _ = declining_registry(kit, private, numpy_plugin, order)
    # plugins() lists by priority (floor_mate ties with numpy at 100 and wins by name), but
    # dispatch walks the NumPy floor last whatever its priority: it always answers.
    assert registry.backend_names() == (*RANKED, "numpy")
    assert [p.name for p in registry.plugins()] == [RANKED[0], "numpy", *RANKED[1:]]
    assert [p.priority for p in registry.plugins()] == [100.0, 100.0, 90.0, 50.0, 50.0, 50.0, 10.0]
    result, dispatch = call(registry)
    np.testing.assert_array_equal(result, PRODUCT)
    assert dispatch.backend == "numpy"
    assert dispatch.declined == tuple((name, f"BackendDeclined: {name} says no") for name in RANKED)


def test_dispatch_walks_best_first(kit, private):
    registry = private
    for name, priority in PRIORITIES.items():
        registry.register(kit.make_plugin(name, priority=priority,
                                          matmul=kit.raising(BackendDeclined("no"))), name)
    registry.register(kit.make_plugin("last", priority=-5, matmul=kit.reference_matmul), "last")
    result, dispatch = call(registry)
    np.testing.assert_array_equal(result, PRODUCT)
    assert dispatch.backend == "last"
    assert [name for name, _ in dispatch.declined] == list(RANKED)


def test_environment_restricts_and_orders_with_the_floor_appended(kit, private, numpy_plugin, clean_env, core_log):
    clean_env.setenv("SPACR_ACCEL_BACKENDS", " low, no_such_backend ,high,low")
    registry, plugins = declining_registry(kit, private, numpy_plugin, list(PRIORITIES))
    assert registry.backend_names() == ("low", "high", "numpy")
    assert registry.restriction() == ("low", "high")  # an unknown name is not shown as in force
    result, dispatch = call(registry)
    np.testing.assert_array_equal(result, PRODUCT)
    assert dispatch.backend == "numpy"
    assert [name for name, _ in dispatch.declined] == ["low", "high"]
    assert plugins["floor_mate"].calls["matmul"] == 0 and plugins["mid"].calls["matmul"] == 0
    unknown = kit.records(core_log, logging.WARNING, "no_such_backend")
    assert len(unknown) == 1 and "SPACR_ACCEL_BACKENDS" in unknown[0].getMessage()
    # Read at discovery: a change needs refresh().
    clean_env.setenv("SPACR_ACCEL_BACKENDS", "mid")
    assert registry.backend_names() == ("low", "high", "numpy")
    registry.refresh()
    assert registry.backend_names() == ("mid", "numpy")


def test_environment_order_through_the_global_registry(kit, plug, clean_env):
    plug(kit.make_plugin("zeta", priority=2000.0, matmul=kit.reference_matmul), "zeta")
    plug(kit.make_plugin("eta", priority=1000.0, matmul=kit.reference_matmul), "eta")
    assert ops.accelerated_backends()[:2] == ("zeta", "eta")
    clean_env.setenv("SPACR_ACCEL_BACKENDS", "eta,zeta")
    spacr_accel_core.refresh()
    try:
        assert ops.accelerated_backends() == ("eta", "zeta", "numpy")
        np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
        assert spacr_accel_core.last_dispatch().backend == "eta"
        clean_env.setenv("SPACR_ACCEL_BACKENDS", "numpy")
        spacr_accel_core.refresh()
        assert ops.accelerated_backends() == ("numpy",)
        ops.matmul(FIRST, SECOND)
        assert spacr_accel_core.last_dispatch().backend == "numpy"
    finally:
        clean_env.delenv("SPACR_ACCEL_BACKENDS")
        spacr_accel_core.refresh()
    assert ops.accelerated_backends()[:2] == ("zeta", "eta")


def test_use_restricts_orders_nests_and_restores(kit, private, numpy_plugin, clean_env):
    clean_env.setenv("SPACR_ACCEL_BACKENDS", "low")
    registry, _ = declining_registry(kit, private, numpy_plugin, list(PRIORITIES))
    assert registry.backend_names() == ("low", "numpy")
    with use("mid", "high"):
        assert registry.backend_names() == ("mid", "high", "numpy")  # use() beats the environment
        _, dispatch = call(registry)
        assert [name for name, _ in dispatch.declined] == ["mid", "high"]
        with use("numpy"):
            assert registry.backend_names() == ("numpy",)
            _, dispatch = call(registry)
            assert dispatch.declined == ()
        assert registry.backend_names() == ("mid", "high", "numpy")
    assert registry.backend_names() == ("low", "numpy")


def test_use_with_unknown_names_is_refused_listing_what_is_installed(kit, private, numpy_plugin, clean_env):
    registry, plugins = declining_registry(kit, private, numpy_plugin, list(PRIORITIES))
    with use("no_such_backend", "high"):
        with pytest.raises(ValueError, match=r"use\(\)/config\.override\(\) names backends that are not "
                                             r"installed: 'no_such_backend'; "
                                             r"installed: a_tie, b_tie, floor_mate, high, low, mid, numpy"):
            registry.backend_names()
        with pytest.raises(ValueError, match="no_such_backend"):
            call(registry)
    assert plugins["high"].calls["matmul"] == 0
    with use("high"):  # a known name still works after a refused one
        assert registry.backend_names() == ("high", "numpy")


@pytest.mark.parametrize("names", [(), ("",), (3,), ("numpy", None)])
def test_use_rejects_non_names(names):
    with pytest.raises(TypeError, match="backend names"), use(*names):
        pass


def test_use_is_context_local_across_threads(kit, plug):
    """Two threads inside different use() blocks at the same time each see their own choice."""
    plug(kit.make_plugin("alpha", priority=1001.0, matmul=kit.reference_matmul), "alpha")
    plug(kit.make_plugin("beta", priority=1002.0, matmul=kit.reference_matmul), "beta")
    inside = threading.Barrier(3)
    leave = threading.Barrier(3)
    seen: dict[str, object] = {}
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            with use(name):
                inside.wait(timeout=30)  # all three threads now hold their own override
                for _ in range(20):
                    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
                    assert spacr_accel_core.last_dispatch().backend == name
                seen[name] = ops.accelerated_backends()
                leave.wait(timeout=30)
        except BaseException as exc:
            errors.append(exc)
            inside.abort()
            leave.abort()

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("alpha", "beta")]
    for thread in threads:
        thread.start()
    inside.wait(timeout=30)
    # The main thread has no override: best priority first.
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
    assert spacr_accel_core.last_dispatch().backend == "beta"
    main_seen = ops.accelerated_backends()
    leave.wait(timeout=30)
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors
    assert seen == {"alpha": ("alpha", "numpy"), "beta": ("beta", "numpy")}
    assert main_seen[:2] == ("beta", "alpha") and main_seen[-1] == "numpy"


def test_gpu_false_refuses_an_accelerated_plugin(kit, plug):
    card = plug(kit.make_plugin("card", priority=5000.0, accelerated=True, matmul=kit.reference_matmul), "card")
    assert ops.accelerated_backends()[0] == "card"
    assert ops.accelerated_backends()[-1] == "numpy"
    assert "card" not in ops.accelerated_backends(gpu=False)
    assert ops.accelerated_backends(gpu=False)[-1] == "numpy"
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND, gpu=False), PRODUCT)
    assert spacr_accel_core.last_dispatch().backend != "card"
    assert card.calls["matmul"] == 0
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
    assert spacr_accel_core.last_dispatch().backend == "card"
    assert card.calls["matmul"] == 1
    with use("card"):  # even when asked for by name, gpu=False refuses it
        ops.matmul(FIRST, SECOND, gpu=False)
        assert spacr_accel_core.last_dispatch().backend == "numpy"
    assert card.calls["matmul"] == 1
    # Forced by name, gpu=False asks it to run on the CPU (cpu_requested()) instead of refusing it.
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND, gpu=False, backend="card"), PRODUCT)
    assert spacr_accel_core.last_dispatch().backend == "card"
    assert card.calls["matmul"] == 2
    row = next(p for p in spacr_accel_core.plugins() if p.name == "card")
    assert row.accelerated and row.status == "ok"


def test_gpu_false_reason_in_the_final_error(kit, private):
    private.register(kit.make_plugin("card", accelerated=True, matmul=kit.reference_matmul), "card")
    with pytest.raises(spacr_accel_core.NoBackendError) as info:
        ops.matmul(FIRST, SECOND, gpu=False)
    assert dict(info.value.reasons)["card"] == "accelerated, and gpu=False refuses it"


def test_accelerated_backends_always_ends_in_numpy(kit, plug, clean_env):
    assert ops.accelerated_backends()[-1] == "numpy"
    assert ops.accelerated_backends(gpu=False)[-1] == "numpy"
    plug(kit.make_plugin("above", priority=1e9, matmul=kit.reference_matmul), "above")
    plug(kit.make_plugin("unusable", priority=1e9, usable=False, matmul=kit.reference_matmul), "unusable")
    plug(kit.make_plugin("device", priority=1e8, accelerated=True, matmul=kit.reference_matmul), "device")
    names = ops.accelerated_backends()
    assert names[:2] == ("above", "device") and names[-1] == "numpy"
    assert "unusable" not in names
    assert len(set(names)) == len(names)
    cpu = ops.accelerated_backends(gpu=False)
    assert cpu[0] == "above" and cpu[-1] == "numpy" and "device" not in cpu
    with use("device", "above"):
        assert ops.accelerated_backends() == ("device", "above", "numpy")
        assert ops.accelerated_backends(gpu=False) == ("above", "numpy")


@pytest.mark.parametrize("declared", [API_VERSION + 1, 0, "1", None])
def test_api_version_mismatch_is_incompatible_and_never_called(kit, plug, core_log, declared):
    module = kit.make_plugin("future", api_version=declared, matmul=kit.raising(AssertionError("must never run")))
    plug(module, "future")
    row = next(p for p in spacr_accel_core.plugins() if p.name == "future")
    assert row.status == "incompatible"
    assert repr(declared) in row.reason and str(API_VERSION) in row.reason
    assert not row.usable
    assert "future" not in ops.accelerated_backends()
    with use("future", "numpy"):
        np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
    assert spacr_accel_core.last_dispatch().backend == "numpy"
    with pytest.raises(BackendUnavailable, match="incompatible"):
        ops.matmul(FIRST, SECOND, backend="future")
    assert module.calls == {}  # not even asked to describe itself
    assert len(kit.records(core_log, logging.WARNING, "'future' is incompatible")) == 1


def test_matching_api_version_is_accepted(kit, plug):
    module = plug(kit.make_plugin("current", api_version=API_VERSION, matmul=kit.reference_matmul), "current")
    row = next(p for p in spacr_accel_core.plugins() if p.name == "current")
    assert row.status == "ok"
    with use("current"):
        ops.matmul(FIRST, SECOND)
    assert module.calls["matmul"] == 1


def test_blocked_in_process_plugin_is_never_asked(kit, plug, clean_env):
    clean_env.setenv("SPACR_ACCEL_DISABLE", "other, shunned")
    shunned = plug(kit.make_plugin("shunned", matmul=kit.raising(AssertionError("must never run"))), "shunned")
    spacr_accel_core.refresh()
    try:
        row = next(p for p in spacr_accel_core.plugins() if p.name == "shunned")
        assert (row.status, row.reason) == ("blocked", "named in SPACR_ACCEL_DISABLE")
        assert "shunned" not in ops.accelerated_backends()
        with use("shunned", "numpy"):
            np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
        with pytest.raises(BackendUnavailable, match="blocked"):
            ops.matmul(FIRST, SECOND, backend="shunned")
        assert shunned.calls == {}
    finally:
        clean_env.delenv("SPACR_ACCEL_DISABLE")
        spacr_accel_core.refresh()
    assert next(p for p in spacr_accel_core.plugins() if p.name == "shunned").status == "ok"


def test_blocked_entry_point_is_never_imported():
    """A real installed plugin named in SPACR_ACCEL_DISABLE is never imported (fresh interpreter)."""
    script = textwrap.dedent("""
        import sys
        import spacr_accel_core
        from spacr_accel_core import ops
        rows = {p.name: p for p in spacr_accel_core.plugins()}
        assert rows["torch"].status == "blocked", rows["torch"]
        assert rows["torch"].reason == "named in SPACR_ACCEL_DISABLE", rows["torch"]
        assert rows["torch"].distribution == "spacr-accel-torch", rows["torch"]
        assert rows["numpy"].status == "ok", rows["numpy"]
        assert "torch" not in ops.accelerated_backends()
        assert "spacr_accel_torch" not in sys.modules
        assert "torch" not in sys.modules
        assert "spacr_accel_numpy" in sys.modules  # the control: discovery did import the others
        print("OK")
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPACR_ACCEL")}
    env["SPACR_ACCEL_DISABLE"] = "torch"
    done = subprocess.run([sys.executable, "-c", script], check=False, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "OK"


def test_plugin_name_comes_from_registration_not_from_its_declaration(kit, plug):
    module = kit.make_plugin("impostor", matmul=kit.reference_matmul)
    plug(module, "honest")
    names = [p.name for p in spacr_accel_core.plugins()]
    assert "honest" in names and "impostor" not in names
    with use("honest"):
        ops.matmul(FIRST, SECOND)
    assert spacr_accel_core.last_dispatch().backend == "honest"


def test_registering_a_name_replaces_that_plugin(kit, plug):
    first = plug(kit.make_plugin("same", matmul=kit.reference_matmul), "same")
    with use("same"):
        ops.matmul(FIRST, SECOND)
    second = plug(kit.make_plugin("same", matmul=kit.reference_matmul), "same")
    with use("same"):
        ops.matmul(FIRST, SECOND)
    assert (first.calls["matmul"], second.calls["matmul"]) == (1, 1)
    assert [p.name for p in spacr_accel_core.plugins()].count("same") == 1
