"""Malformed plugin descriptions, out-of-range answers, the floor's place, the success log, forks."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from spacr_accel_core import BackendInfo, Declaration, cpu_requested, ops

FIRST = np.arange(6, dtype=np.float32).reshape(2, 3)
SECOND = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
PRODUCT = (FIRST.astype(np.float64) @ SECOND.astype(np.float64)).astype(np.float32)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"priority": "high"}, "SPACR_ACCEL_PLUGIN.priority is 'high', not a finite number"),
        ({"priority": float("nan")}, "SPACR_ACCEL_PLUGIN.priority is nan, not a finite number"),
        ({"priority": True}, "SPACR_ACCEL_PLUGIN.priority is True, not a finite number"),
        ({"accelerated": "yes"}, "SPACR_ACCEL_PLUGIN.accelerated is 'yes', not True or False"),
        ({"declaration": Declaration(name=7)}, "SPACR_ACCEL_PLUGIN.name is 7, not a non-empty string"),  # type: ignore[arg-type]  # a wrong type on purpose: its refusal is the test
        ({"declaration": BackendInfo()}, "SPACR_ACCEL_PLUGIN is BackendInfo(usable=True, note=''), not a "),
        ({"info": lambda: {"name": "bad", "priority": 5.0}}, "not BackendInfo(usable=bool, note=str)"),
    ],
)
def test_a_malformed_description_is_faulty_and_breaks_no_call(kit, private, numpy_plugin, fields, reason):
    """One bad field used to make the ranking sort raise on every call in the process."""
    bad = kit.make_plugin("bad", matmul=kit.reference_matmul, **fields)
    private.register(bad, "bad")
    private.register(numpy_plugin, "numpy")
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
    assert private.last_dispatch().backend == "numpy"
    row = next(p for p in private.plugins() if p.name == "bad")
    assert row.status == "faulty" and reason in row.reason
    assert bad.calls["matmul"] == 0
    if "info" not in fields:
        assert bad.calls["backend_info"] == 0  # a bad declaration is refused at load, before any question


def test_sys_exit_in_backend_info_does_not_end_the_process(kit, private, numpy_plugin):
    def leave() -> BackendInfo:
        raise SystemExit(3)

    private.register(kit.make_plugin("quitter", info=leave, matmul=kit.reference_matmul), "quitter")
    private.register(numpy_plugin, "numpy")
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
    row = next(p for p in private.plugins() if p.name == "quitter")
    assert row.status == "faulty" and "SystemExit" in row.reason


def test_an_unusable_accelerated_plugin_forced_with_gpu_false_is_asked_for_the_cpu(kit, private, numpy_plugin):
    """``backend=`` with ``gpu=False`` runs an accelerated backend on the CPU (it reads
    ``cpu_requested()``), unusable or not; automatic dispatch under ``gpu=False`` still never calls it."""
    asked: list[bool] = []

    def no_driver() -> BackendInfo:
        raise RuntimeError("driver gone")

    def matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        asked.append(cpu_requested())
        return kit.reference_matmul(first, second)

    mystery = kit.make_plugin("mystery", accelerated=True, info=no_driver, matmul=matmul)
    private.register(mystery, "mystery")
    private.register(numpy_plugin, "numpy")
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND, gpu=False), PRODUCT)
    assert private.last_dispatch().backend == "numpy" and asked == []
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND, backend="mystery", gpu=False), PRODUCT)
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND, backend="mystery"), PRODUCT)
    assert asked == [True, False]
    assert not cpu_requested()  # only inside the forced call


def test_indices_outside_the_target_set_are_a_fault(kit, private, numpy_plugin, core_log):
    def out_of_range(source, target, chunk):
        return np.full(source.shape[0], target.shape[0], np.int64), np.zeros(source.shape[0], np.float32)

    private.register(kit.make_plugin("wild", nearest_neighbours=out_of_range), "wild")
    private.register(numpy_plugin, "numpy")
    index, _ = ops.nearest_neighbours(np.zeros((3, 2)), np.ones((2, 2)))
    assert index.tolist() == [0, 0, 0]
    dispatch = private.last_dispatch()
    assert dispatch.backend == "numpy"
    assert dispatch.declined == (("wild", "faulty: indices fall outside the 2 target points"),)


@pytest.mark.parametrize("names", [("numpy", "fast"), ("fast", "numpy"), ("numpy",), ("fast",)])
def test_the_floor_is_last_whatever_the_restriction_says(kit, private, numpy_plugin, names):
    private.register(kit.make_plugin("fast", priority=500.0, matmul=kit.reference_matmul), "fast")
    private.register(numpy_plugin, "numpy")
    private.refresh()
    from spacr_accel_core import use

    with use(*names):
        order = ops.accelerated_backends()
        assert order[-1] == "numpy"
        assert order == (("fast", "numpy") if "fast" in names else ("numpy",))


def test_the_debug_log_names_the_backend_that_served(kit, private, numpy_plugin, core_log):
    private.register(kit.make_plugin("shy", matmul=kit.raising(RuntimeError("busy"))), "shy")
    private.register(numpy_plugin, "numpy")
    ops.matmul(FIRST, SECOND)
    served = kit.records(core_log, logging.DEBUG, "matmul served by 'numpy'")
    assert served and "['shy'] declined" in served[0].getMessage()


def test_a_forked_child_filters_and_dispatches():
    """A child forked after the parent used the thread pool and the registry must not hang."""
    code = textwrap.dedent(
        """
        import os, signal, sys, threading
        import numpy as np
        from spacr_accel_core import ops, REGISTRY
        field = np.random.default_rng(0).random((700, 700), dtype=np.float32)
        ops.maximum_filter(field, 5)                 # the parent's pool now has threads
        held = threading.Event()
        def hold():
            with REGISTRY._lock:                     # a thread holds the lock across the fork
                held.set()
                threading.Event().wait(5)
        threading.Thread(target=hold, daemon=True).start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)                         # a hang ends the child with SIGALRM
            REGISTRY.refresh()
            out = ops.maximum_filter(field, 5)
            os._exit(0 if out.shape == field.shape else 1)
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, timeout=120)
    assert done.returncode == 0
