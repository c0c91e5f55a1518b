"""Fault injection: a plugin ranked above NumPy misbehaves; the call still answers, via NumPy."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import spacr_accel_core
from spacr_accel_core import (
    BackendDeclined,
    BackendInfo,
    BackendOutOfMemory,
    BackendUnavailable,
    NoBackendError,
    PluginFault,
    ops,
    use,
)

FIRST = np.arange(12, dtype=np.float32).reshape(3, 4) / 4  # exact in float32: so is the product
SECOND = np.arange(8, dtype=np.float32).reshape(4, 2) - 3.5
SOURCE = np.array([[0.0, 0.0], [5.0, 5.0], [2.0, 9.0]], dtype=np.float32)
TARGET = np.array([[5.0, 4.0], [0.0, 1.0], [1.0, 0.0], [2.0, 8.0]], dtype=np.float32)
FIELD = np.array([[1, 2, 3, 0], [4, 0, 9, 1], [0, 0, 2, 7]], dtype=np.float32)


def expected_product() -> np.ndarray:
    return (FIRST.astype(np.float64) @ SECOND.astype(np.float64)).astype(np.float32)


def expected_nearest() -> tuple[np.ndarray, np.ndarray]:
    # source 0 is equally close to target 1 and 2: the lower index wins.
    return np.array([1, 0, 3], dtype=np.int64), np.array([1, 1, 1], dtype=np.float32)


def expected_filter() -> np.ndarray:
    from scipy.ndimage import maximum_filter

    return maximum_filter(FIELD, 3, mode="nearest")


def run_op(operation: str, **kwargs: object) -> object:
    if operation == "matmul":
        return ops.matmul(FIRST, SECOND, **kwargs)
    if operation == "nearest_neighbours":
        return ops.nearest_neighbours(SOURCE, TARGET, **kwargs)
    return ops.maximum_filter(FIELD, 3, **kwargs)


def assert_right_answer(operation: str, result: object) -> None:
    if operation == "matmul":
        assert isinstance(result, np.ndarray) and result.dtype == np.float32
        np.testing.assert_array_equal(result, expected_product())
    elif operation == "nearest_neighbours":
        index, distance = result  # type: ignore[misc]  # result is nearest_neighbours' (index, distance) pair in this branch
        want_index, want_distance = expected_nearest()
        np.testing.assert_array_equal(index, want_index)
        assert index.dtype == np.int64 and distance.dtype == np.float32
        np.testing.assert_array_equal(distance, want_distance)
    else:
        assert isinstance(result, np.ndarray) and result.dtype == np.float32
        np.testing.assert_array_equal(result, expected_filter())


# (operation, what the hook does, text the reason must hold, quarantined)
FAULTS = [
    ("matmul", TypeError("bad operand"), "faulty: raised TypeError: bad operand"),
    ("matmul", ValueError("nope"), "faulty: raised ValueError: nope"),
    ("matmul", KeyError("k"), "faulty: raised KeyError"),
    ("matmul", np.zeros((2, 2), np.float32), "faulty: returned float32[2, 2], expected float32[3, 2]"),
    ("matmul", np.zeros((3, 2), np.float64), "faulty: returned float64[3, 2], expected float32[3, 2]"),
    ("matmul", [[0.0, 0.0]] * 3, "faulty: returned list, not a NumPy array"),
    ("matmul", None, "faulty: returned NoneType, not a NumPy array"),
    ("maximum_filter", np.zeros((4, 3), np.float32), "faulty: returned float32[4, 3], expected float32[3, 4]"),
    ("maximum_filter", FIELD.astype(np.float16), "faulty: returned float16[3, 4], expected float32[3, 4]"),
    ("maximum_filter", ZeroDivisionError("oops"), "faulty: raised ZeroDivisionError: oops"),
    ("nearest_neighbours", (np.zeros(3, np.int64),), "not an (indices, distances) pair"),
    ("nearest_neighbours", [np.zeros(3, np.int64), np.zeros(3, np.float32)], "returned list"),
    ("nearest_neighbours", (np.zeros(3, np.int32), np.zeros(3, np.float32)), "indices are not int64"),
    ("nearest_neighbours", (np.zeros(2, np.int64), np.zeros(3, np.float32)), "indices are not int64 of shape (3,)"),
    ("nearest_neighbours", (np.zeros(3, np.int64), np.zeros(3, np.float64)), "distances are not float32"),
    ("nearest_neighbours", (np.zeros(3, np.int64), [0.0, 0.0, 0.0]), "distances are not float32"),
]


def hook_for(kit: Any, behaviour: object) -> Any:
    return kit.raising(behaviour) if isinstance(behaviour, BaseException) else kit.returning(behaviour)


@pytest.mark.parametrize(("operation", "behaviour", "reason"), FAULTS,
                         ids=[f"{op}-{i}" for i, (op, _, _) in enumerate(FAULTS)])
def test_fault_is_quarantined_logged_once_and_numpy_answers(kit, plug, core_log, operation, behaviour, reason):
    bad = plug(kit.make_plugin("bad", **{operation: hook_for(kit, behaviour)}), "bad")
    with use("bad", "numpy"):
        first = run_op(operation)
        first_dispatch = spacr_accel_core.last_dispatch()
        second = run_op(operation)
        second_dispatch = spacr_accel_core.last_dispatch()
    assert_right_answer(operation, first)
    assert_right_answer(operation, second)
    assert first_dispatch is not None and first_dispatch.operation == operation
    assert first_dispatch.backend == "numpy"
    assert len(first_dispatch.declined) == 1
    assert first_dispatch.declined[0][0] == "bad"
    assert first_dispatch.declined[0][1].startswith("faulty: ")
    assert reason in first_dispatch.declined[0][1]
    # Quarantined: the second call never reaches the plugin, and says why it was passed over.
    assert bad.calls[operation] == 1
    assert second_dispatch is not None and second_dispatch.backend == "numpy"
    assert second_dispatch.declined == (("bad", f"quarantined: {first_dispatch.declined[0][1][len('faulty: '):]}"),)
    warnings = kit.records(core_log, logging.WARNING, "'bad'")
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert operation in warnings[0].getMessage()
    row = next(p for p in spacr_accel_core.plugins() if p.name == "bad")
    assert len(row.faults) == 1
    assert row.faults[0][0] == operation
    assert reason.removeprefix("faulty: ") in row.faults[0][1]
    assert row.distribution == "(in-process)"
    # Other operations of the same plugin are not quarantined by this fault.
    assert all(op == operation for op, _ in row.faults)


def test_quarantine_ends_with_refresh(kit, plug, core_log):
    bad = plug(kit.make_plugin("bad", matmul=kit.raising(TypeError("x"))), "bad")
    with use("bad", "numpy"):
        ops.matmul(FIRST, SECOND)
        ops.matmul(FIRST, SECOND)
        assert bad.calls["matmul"] == 1
        spacr_accel_core.refresh()
        assert next(p for p in spacr_accel_core.plugins() if p.name == "bad").faults == ()
        ops.matmul(FIRST, SECOND)
    assert bad.calls["matmul"] == 2
    # A new chance, and a new warning when it breaks again.
    assert len(kit.records(core_log, logging.WARNING, "'bad'")) == 2


def test_fault_in_one_operation_leaves_the_others_served(kit, plug, core_log):
    bad = plug(kit.make_plugin("bad", matmul=kit.raising(TypeError("x")),
                               maximum_filter=lambda field, size: np.full(field.shape, 42, np.float32)),
               "bad")
    with use("bad", "numpy"):
        ops.matmul(FIRST, SECOND)
        result = ops.maximum_filter(FIELD, 3)
        assert spacr_accel_core.last_dispatch().backend == "bad"
    np.testing.assert_array_equal(result, np.full(FIELD.shape, 42, np.float32))
    assert bad.calls == {"backend_info": 1, "matmul": 1, "maximum_filter": 1}


EXPECTED_DECLINES = [
    BackendUnavailable("no device here"),
    BackendDeclined("input too small"),
    BackendOutOfMemory("card is full"),
]


@pytest.mark.parametrize("exc", EXPECTED_DECLINES, ids=lambda e: type(e).__name__)
def test_expected_declines_log_at_debug_and_are_not_quarantined(kit, plug, core_log, exc):
    busy = plug(kit.make_plugin("busy", matmul=kit.raising(exc)), "busy")
    with use("busy", "numpy"):
        results = [ops.matmul(FIRST, SECOND) for _ in range(3)]
        dispatch = spacr_accel_core.last_dispatch()
    for result in results:
        assert_right_answer("matmul", result)
    assert busy.calls["matmul"] == 3  # asked again every time: busy is not broken
    assert dispatch.backend == "numpy"
    assert dispatch.declined == (("busy", f"{type(exc).__name__}: {exc}"),)
    assert kit.records(core_log, logging.WARNING, "'busy'") == []
    assert kit.records(core_log, logging.INFO, "'busy'") == []
    assert len(kit.records(core_log, logging.DEBUG, "'busy' declined")) == 3
    row = next(p for p in spacr_accel_core.plugins() if p.name == "busy")
    assert row.faults == () and row.status == "ok"


def test_plain_runtime_error_falls_through_without_warning(kit, plug, core_log):
    flaky = plug(kit.make_plugin("flaky", matmul=kit.raising(RuntimeError("driver went away"))), "flaky")
    with use("flaky", "numpy"):
        assert_right_answer("matmul", ops.matmul(FIRST, SECOND))
        assert_right_answer("matmul", ops.matmul(FIRST, SECOND))
        dispatch = spacr_accel_core.last_dispatch()
    assert flaky.calls["matmul"] == 2
    assert dispatch.declined == (("flaky", "RuntimeError: driver went away"),)
    assert kit.records(core_log, logging.WARNING, "'flaky'") == []
    assert next(p for p in spacr_accel_core.plugins() if p.name == "flaky").faults == ()


def test_untranslated_memory_error_falls_through_without_quarantine(kit, plug, core_log):
    hungry = plug(kit.make_plugin("hungry", matmul=kit.raising(MemoryError("host is full"))), "hungry")
    with use("hungry", "numpy"):
        assert_right_answer("matmul", ops.matmul(FIRST, SECOND))
        assert_right_answer("matmul", ops.matmul(FIRST, SECOND))
        dispatch = spacr_accel_core.last_dispatch()
    assert hungry.calls["matmul"] == 2
    assert dispatch.backend == "numpy"
    assert dispatch.declined == (("hungry", "out of memory: MemoryError: host is full"),)
    assert len(kit.records(core_log, logging.WARNING, "'hungry'")) == 1  # once, then DEBUG
    assert len(kit.records(core_log, logging.DEBUG, "'hungry' ran out of memory")) == 1
    assert next(p for p in spacr_accel_core.plugins() if p.name == "hungry").faults == ()


def test_fault_falls_through_by_priority_alone(kit, plug, core_log):
    """No ``use``: priority 1000 puts the broken plugin first; gpu=False keeps devices out."""
    bad = plug(kit.make_plugin("bad", priority=1000.0, matmul=kit.returning(np.zeros(1))), "bad")
    assert ops.accelerated_backends(gpu=False)[0] == "bad"
    assert_right_answer("matmul", ops.matmul(FIRST, SECOND, gpu=False))
    dispatch = spacr_accel_core.last_dispatch()
    assert dispatch.backend == "numpy"
    assert dispatch.declined[0][0] == "bad"
    assert bad.calls["matmul"] == 1


# ---- plugins that fail to load ----------------------------------------------------------------


def _raise_import_error() -> BackendInfo:
    raise ImportError("No module named 'vendorlib'")


@pytest.mark.parametrize("operation", ["matmul", "maximum_filter", "nearest_neighbours"])
def test_plugin_that_fails_to_import_is_faulty_and_never_called(kit, plug, core_log, operation):
    broken = plug(kit.make_plugin("broken", info=_raise_import_error,
                                  **{operation: kit.raising(AssertionError("must never run"))}), "broken")
    row = next(p for p in spacr_accel_core.plugins() if p.name == "broken")
    assert row.status == "faulty"
    assert not row.usable
    assert "ImportError" in row.reason and "vendorlib" in row.reason
    with use("broken", "numpy"):
        assert_right_answer(operation, run_op(operation))
        dispatch = spacr_accel_core.last_dispatch()
    assert dispatch.backend == "numpy"
    assert broken.calls[operation] == 0
    assert "broken" not in ops.accelerated_backends()
    assert len(kit.records(core_log, logging.WARNING, "'broken'")) == 1
    with pytest.raises(BackendUnavailable, match=r"broken.*faulty.*ImportError"):
        run_op(operation, backend="broken")


def test_backend_info_of_the_wrong_type_is_a_fault(kit, plug):
    plug(kit.make_plugin("odd", info=lambda: {"name": "odd", "priority": 1}, matmul=kit.reference_matmul), "odd")
    row = next(p for p in spacr_accel_core.plugins() if p.name == "odd")
    assert row.status == "faulty"
    assert row.reason \
        == "backend_info returned {'name': 'odd', 'priority': 1}, not BackendInfo(usable=bool, note=str)"


@pytest.mark.parametrize("answer", [BackendInfo(usable="yes"), BackendInfo(note=3), None])  # type: ignore[arg-type]  # a wrong type on purpose: its refusal is the test
def test_backend_info_with_fields_of_the_wrong_type_is_a_fault(kit, plug, answer):
    odd = plug(kit.make_plugin("odd", info=lambda: answer, matmul=kit.reference_matmul), "odd")
    row = next(p for p in spacr_accel_core.plugins() if p.name == "odd")
    assert row.status == "faulty" and "not BackendInfo(usable=bool, note=str)" in row.reason
    with use("odd", "numpy"):
        assert_right_answer("matmul", ops.matmul(FIRST, SECOND))
    assert odd.calls["matmul"] == 0


def test_backend_info_runtime_error_means_unusable_but_forceable(kit, plug):
    def no_device() -> BackendInfo:
        raise BackendUnavailable("no card")

    late = plug(kit.make_plugin("late", info=no_device, matmul=kit.reference_matmul), "late")
    row = next(p for p in spacr_accel_core.plugins() if p.name == "late")
    assert (row.status, row.reason) == ("unusable", "BackendUnavailable: no card")
    assert "late" not in ops.accelerated_backends()
    with use("late", "numpy"):
        ops.matmul(FIRST, SECOND)
    assert spacr_accel_core.last_dispatch().backend == "numpy"
    assert late.calls["matmul"] == 0
    assert_right_answer("matmul", ops.matmul(FIRST, SECOND, backend="late"))
    assert spacr_accel_core.last_dispatch().backend == "late"


def test_primitives_without_a_declaration_are_incompatible(kit, plug):
    """What a plugin is comes from its declaration alone: without one it was written for another
    API (where backend_info said it), and is never asked or called."""
    module = plug(kit.make_plugin("headless", declaration=None, matmul=kit.reference_matmul), "headless")
    row = next(p for p in spacr_accel_core.plugins() if p.name == "headless")
    assert row.status == "incompatible"
    assert "declares no SPACR_ACCEL_PLUGIN record" in row.reason
    with use("headless", "numpy"):
        assert_right_answer("matmul", ops.matmul(FIRST, SECOND))
    assert module.calls == {}


def test_primitives_without_backend_info_always_run(kit, plug):
    """A declared plugin needs no backend_info: it is usable without being asked."""
    module = plug(kit.make_plugin("headless", describes=False, matmul=kit.reference_matmul), "headless")
    row = next(p for p in spacr_accel_core.plugins() if p.name == "headless")
    assert (row.status, row.reason) == ("ok", "")
    with use("headless", "numpy"):
        assert_right_answer("matmul", ops.matmul(FIRST, SECOND))
    assert module.calls == {"matmul": 1}


def test_unusable_plugin_reports_its_note(kit, plug):
    idle = plug(kit.make_plugin("idle", usable=False, note="driver too old", matmul=kit.reference_matmul), "idle")
    row = next(p for p in spacr_accel_core.plugins() if p.name == "idle")
    assert (row.status, row.reason, row.priority) == ("unusable", "driver too old", 1000.0)
    assert row.operations == ("matmul",)
    with use("idle", "numpy"):
        ops.matmul(FIRST, SECOND)
    assert idle.calls["matmul"] == 0


# ---- forcing a backend --------------------------------------------------------------------------


def test_forced_backend_runtime_error_propagates_unchanged(kit, plug):
    error = RuntimeError("driver went away")
    plug(kit.make_plugin("flaky", matmul=kit.raising(error)), "flaky")
    with pytest.raises(RuntimeError) as info:
        ops.matmul(FIRST, SECOND, backend="flaky")
    assert info.value is error


def test_forced_backend_expected_decline_propagates(kit, plug):
    plug(kit.make_plugin("full", matmul=kit.raising(BackendOutOfMemory("card is full"))), "full")
    with pytest.raises(BackendOutOfMemory, match="card is full"):
        ops.matmul(FIRST, SECOND, backend="full")


CONTRACT_BREAKS = [(i, f) for i, f in enumerate(FAULTS) if not isinstance(f[1], BaseException)]


@pytest.mark.parametrize(("operation", "behaviour", "reason"), [f for _, f in CONTRACT_BREAKS],
                         ids=[f"{f[0]}-{i}" for i, f in CONTRACT_BREAKS])
def test_forced_backend_breaking_the_contract_raises_plugin_fault(kit, plug, core_log, operation, behaviour,
                                                                  reason):
    bad = plug(kit.make_plugin("bad", **{operation: kit.returning(behaviour)}), "bad")
    with pytest.raises(PluginFault) as info:
        run_op(operation, backend="bad")
    message = str(info.value)
    assert "'bad'" in message and operation in message
    assert reason.removeprefix("faulty: ") in message
    # It is quarantined for automatic dispatch too.
    with use("bad", "numpy"):
        assert_right_answer(operation, run_op(operation))
    assert bad.calls[operation] == 1
    assert next(p for p in spacr_accel_core.plugins() if p.name == "bad").faults[0][0] == operation
    assert len(kit.records(core_log, logging.WARNING, "'bad'")) == 1


def test_forced_backend_raising_a_non_runtime_error_is_a_plugin_fault(kit, plug, core_log):
    bad = plug(kit.make_plugin("bad", matmul=kit.raising(TypeError("bad operand"))), "bad")
    with pytest.raises(PluginFault, match="TypeError: bad operand") as info:
        ops.matmul(FIRST, SECOND, backend="bad")
    assert isinstance(info.value.__cause__, TypeError)
    assert next(p for p in spacr_accel_core.plugins() if p.name == "bad").faults == (
        ("matmul", "raised TypeError: bad operand"),)
    with use("bad", "numpy"):
        assert_right_answer("matmul", ops.matmul(FIRST, SECOND))
    assert bad.calls["matmul"] == 1  # quarantined for automatic dispatch, as a fault there would be
    assert len(kit.records(core_log, logging.WARNING, "'bad'")) == 1


def test_forced_backend_memory_error_propagates_unchanged(kit, plug):
    plug(kit.make_plugin("hungry", matmul=kit.raising(MemoryError("host is full"))), "hungry")
    with pytest.raises(MemoryError, match="host is full"):
        ops.matmul(FIRST, SECOND, backend="hungry")
    assert next(p for p in spacr_accel_core.plugins() if p.name == "hungry").faults == ()


def test_forced_unknown_backend_names_what_is_installed():
    with pytest.raises(BackendUnavailable, match="no-such-backend") as info:
        ops.matmul(FIRST, SECOND, backend="no-such-backend")
    assert "numpy" in str(info.value)


def test_forced_backend_that_lacks_the_operation(kit, plug):
    plug(kit.make_plugin("partial", matmul=kit.reference_matmul), "partial")
    with pytest.raises(BackendUnavailable, match="does not implement maximum_filter"):
        ops.maximum_filter(FIELD, 3, backend="partial")


def test_forced_good_backend_serves_and_is_recorded(kit, plug):
    plug(kit.make_plugin("good", priority=1.0, matmul=kit.reference_matmul), "good")
    assert_right_answer("matmul", ops.matmul(FIRST, SECOND, backend="good"))
    dispatch = spacr_accel_core.last_dispatch()
    assert (dispatch.operation, dispatch.backend, dispatch.declined) == ("matmul", "good", ())


# ---- when every plugin declines ---------------------------------------------------------------


def test_no_backend_error_names_each_plugin_and_reason(kit, private, monkeypatch):
    monkeypatch.setenv("SPACR_ACCEL_DISABLE", "shunned")
    private.register(kit.make_plugin("alpha", priority=50, matmul=kit.raising(BackendUnavailable("no device"))),
                     "alpha")
    private.register(kit.make_plugin("beta", priority=40, matmul=kit.raising(RuntimeError("busy"))), "beta")
    private.register(kit.make_plugin("gamma", priority=30, matmul=kit.raising(TypeError("broken"))), "gamma")
    private.register(kit.make_plugin("delta", priority=20, usable=False, note="needs a card",
                                     matmul=kit.reference_matmul), "delta")
    private.register(kit.make_plugin("eps", priority=10, maximum_filter=kit.returning(None)), "eps")
    private.register(kit.make_plugin("shunned", matmul=kit.reference_matmul), "shunned")
    with pytest.raises(NoBackendError) as info:
        ops.matmul(FIRST, SECOND)
    error = info.value
    assert error.operation == "matmul"
    reasons = dict(error.reasons)
    assert reasons == {
        "alpha": "BackendUnavailable: no device",
        "beta": "RuntimeError: busy",
        "gamma": "faulty: raised TypeError: broken",
        "delta": "unusable: needs a card",
        "eps": "does not implement matmul",
        "shunned": "blocked: named in SPACR_ACCEL_DISABLE",
    }
    assert [name for name, _ in error.reasons[:3]] == ["alpha", "beta", "gamma"]  # tried, best first
    message = str(error)
    for name, reason in error.reasons:
        assert f"  - {name}: {reason}" in message
    assert "matmul" in message.splitlines()[0]
    # Asked again, the faulty one is now skipped and still says why.
    with pytest.raises(NoBackendError) as again:
        ops.matmul(FIRST, SECOND)
    assert dict(again.value.reasons)["gamma"] == "quarantined: raised TypeError: broken"
    assert len(again.value.reasons) == 6


def test_no_backend_error_with_no_plugins_at_all(private):
    with pytest.raises(NoBackendError, match="no plugins are installed"):
        ops.matmul(FIRST, SECOND)


def test_no_backend_error_for_nearest_neighbours_when_the_only_plugin_faults(kit, private):
    private.register(kit.make_plugin("only", nearest_neighbours=kit.returning((1, 2))), "only")
    with pytest.raises(NoBackendError) as info:
        ops.nearest_neighbours(SOURCE, TARGET)
    assert info.value.reasons == (("only", "faulty: indices are not int64 of shape (3,)"),)


def test_numpy_disabled_in_a_subprocess_names_every_plugin():
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import spacr_accel_core
        from spacr_accel_core import NoBackendError, ops

        rows = {p.name: p for p in spacr_accel_core.plugins()}
        assert rows["numpy"].status == "blocked", rows["numpy"]
        assert rows["numpy"].distribution == "spacr-accel-numpy", rows["numpy"]
        try:
            ops.matmul(np.ones((2, 2)), np.ones((2, 2)), gpu=False)
        except NoBackendError as exc:
            reasons = dict(exc.reasons)
            assert reasons["numpy"] == "blocked: named in SPACR_ACCEL_DISABLE", reasons
            for name, row in rows.items():
                if row.operations or row.status != "ok":  # every backend, not a prober
                    assert name in reasons, (name, reasons)
                    assert name + ": " in str(exc)
                else:
                    assert name not in reasons, (name, reasons)
        else:
            raise SystemExit("no NoBackendError")
        # Blocked means never imported.
        assert "spacr_accel_numpy" not in sys.modules, sorted(m for m in sys.modules if "numpy" in m)
        print("OK", len(rows))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPACR_ACCEL")}
    env["SPACR_ACCEL_DISABLE"] = "numpy"
    done = subprocess.run([sys.executable, "-c", script], check=False, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("OK")
