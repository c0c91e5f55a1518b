"""The promises under stress: nothing raises whatever a plugin answers, freeing memory imports
nothing, a time-out is not kept for ever, and a forked child does not inherit a held lock."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from spacr_accel_core import accelerator, hookimpl
from spacr_accel_core.accelerator import Accelerator
from spacr_accel_core.devices import _machine

Plug = Callable[[object, str], object]


class Engines:
    """A neural-engine plugin whose answer is built afresh on each call (a generator is single-use)."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make

    @hookimpl
    def spacr_accel_neural_engines(self) -> Any:
        return self.make()


class Rows:
    """A capability plugin whose rows are built afresh on each call."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make

    @hookimpl
    def spacr_accel_capabilities(self, found: Accelerator) -> Any:
        return self.make()


def fails_half_way(first: Any) -> Iterator[Any]:
    yield first
    raise OSError("sysfs went away half way")


def warnings_from(caplog: pytest.LogCaptureFixture, plugin: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and f"plugin {plugin!r}" in r.getMessage()]


# ---- 1. nothing raises, whatever a plugin answers -----------------------------------------


def test_neural_engines_and_describe_survive_arrays_and_failing_generators(
        plug: Plug, caplog: pytest.LogCaptureFixture) -> None:
    plug(Engines(lambda: np.array(["Acme NPU", "Acme DSP"])), "a_strings")  # truthiness raises
    plug(Engines(lambda: np.array([1, 2])), "b_numbers")
    plug(Engines(lambda: fails_half_way("Half NPU")), "c_generator")
    plug(Engines(lambda: ["Intel AI Boost (OpenVINO only)", 7, b"bytes"]), "d_mixed")
    with caplog.at_level(logging.WARNING, logger="spacr_accel_core.accelerator"):
        engines = accelerator.neural_engines()
        line = accelerator.describe()
    assert engines == ("Acme NPU", "Acme DSP", "Intel AI Boost (OpenVINO only)")
    assert all(type(name) is str for name in engines)
    assert "Half NPU" not in engines  # a contribution that failed half way is dropped whole
    assert line.endswith("found, not used: Acme NPU, Acme DSP, Intel AI Boost (OpenVINO only)")
    assert len(warnings_from(caplog, "b_numbers")) == 1
    assert len(warnings_from(caplog, "c_generator")) == 1
    assert len(warnings_from(caplog, "d_mixed")) == 1
    assert warnings_from(caplog, "a_strings") == []


def test_a_malformed_capability_row_is_dropped_alone_and_warned_once(
        plug: Plug, caplog: pytest.LogCaptureFixture) -> None:
    plug(Rows(lambda: [("Good task", True, "fine"), ("short", True), ("bad flag", 1, "x"), "abc",
                       ["Listed task", False, "also fine"]]), "a_rows")
    plug(Rows(lambda: fails_half_way(("Half task", True, "x"))), "b_generator")
    plug(Rows(lambda: np.array([["t", "x", "y"], ["u", "x", "y"]])), "c_array")
    with caplog.at_level(logging.WARNING, logger="spacr_accel_core.accelerator"):
        first = accelerator.capabilities()
        second = accelerator.capabilities()
    assert first == second
    tasks = {task: (accelerated, detail) for task, accelerated, detail in first}
    assert tasks["Good task"] == (True, "fine")
    assert tasks["Listed task"] == (False, "also fine")  # a bad row before it costs it nothing
    assert not {"short", "bad flag", "abc", "Half task", "t", "u"} & set(tasks)
    assert len(warnings_from(caplog, "a_rows")) == 3  # one per bad row, and only on the first call
    assert len(warnings_from(caplog, "b_generator")) == 1
    assert len(warnings_from(caplog, "c_array")) == 2  # its two rows are arrays, not triples


def test_a_failing_empty_cache_plugin_is_warned_once(plug: Plug, resolved: Callable[[Accelerator], Any],
                                                     kinds: dict[str, Accelerator],
                                                     caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        @hookimpl
        def spacr_accel_empty_cache(self, torch: Any, found: Accelerator) -> str:
            raise OSError("driver gone")

    resolved(kinds["cuda"])
    plug(Broken(), "broken")
    assert accelerator.resolve() == kinds["cuda"]  # resolved: there may be device memory to free
    with caplog.at_level(logging.WARNING, logger="spacr_accel_core.accelerator"):
        assert accelerator.empty_cache() == ""
        assert accelerator.empty_cache() == ""
    assert len(warnings_from(caplog, "broken")) == 1


# ---- 2. freeing memory imports nothing -----------------------------------------------------


def test_empty_cache_before_anything_resolved_imports_no_torch() -> None:
    pytest.importorskip("torch")
    script = textwrap.dedent("""
        import sys
        from spacr_accel_core import accelerator
        from spacr_accel_core.dispatch._registry import REGISTRY
        assert "torch" not in sys.modules, "importing the core imported torch"
        print(repr(accelerator.empty_cache()), "torch" in sys.modules, REGISTRY._snapshot is None)
        from spacr_accel_torch import _nodes
        _nodes._no_device_node = lambda: None  # as on a machine with a GPU node
        accelerator.resolve()  # the control: resolving does import torch there
        print("torch" in sys.modules)
    """)
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPACR_ACCEL_DISABLE", "SPACR_ACCEL_BACKENDS", "SPACR_DEVICE")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["'' False True", "True"]


# ---- 4. a time-out is kept until the abandoned work finishes, not for ever ------------------


def test_a_slow_probe_is_asked_again_once_it_has_finished(plug: Plug, prober_class: Any,
                                                           kinds: dict[str, Accelerator],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(accelerator.ENV_PROBE_TIMEOUT, "0.2")
    release = threading.Event()
    prober = plug(prober_class(kinds["cuda"], wait=release), "slow")
    try:
        first = accelerator.resolve()
        assert first.kind == "cpu" and "'slow' device probe did not answer within 0.2 s" in first.note
        assert accelerator.resolve() is first  # still running: the cached answer, no second probe
        assert len(prober.calls) == 1  # type: ignore[attr-defined]  # plug() is typed to return object
    finally:
        release.set()
    (pending,) = _machine._CACHE.pending
    assert pending.wait(30)
    assert accelerator.resolve() == kinds["cuda"]
    assert accelerator.resolve() == kinds["cuda"]
    # Asked once more after it finished, and then cached again.
    assert len(prober.calls) == 2  # type: ignore[attr-defined]  # plug() is typed to return object


def test_a_slow_discovery_is_walked_again_once_it_has_finished(plug: Plug, prober_class: Any,
                                                               kinds: dict[str, Accelerator],
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               slow_to_describe: type) -> None:
    monkeypatch.setenv(accelerator.ENV_PROBE_TIMEOUT, "0.2")
    release = threading.Event()
    prober = plug(prober_class(kinds["xpu"]), "a_prober")
    plug(Engines(lambda: ["Acme NPU"]), "b_engines")
    plug(slow_to_describe(release), "c_slow")
    try:
        first = accelerator.resolve()
        assert first.kind == "cpu" and "plugin discovery did not finish within 0.2 s" in first.note
        assert accelerator.neural_engines() == ()
        assert accelerator.resolve() is first
    finally:
        release.set()
    (pending,) = _machine._CACHE.pending
    assert pending.wait(30)
    assert accelerator.resolve() == kinds["xpu"]
    assert accelerator.neural_engines() == ("Acme NPU",)
    assert len(prober.calls) == 1  # type: ignore[attr-defined]  # plug() is typed to return object


def test_once_discovery_is_abandoned_later_queries_do_not_wait_again(
        plug: Plug, monkeypatch: pytest.MonkeyPatch, slow_to_describe: type) -> None:
    monkeypatch.setenv(accelerator.ENV_PROBE_TIMEOUT, "0.2")
    release = threading.Event()
    plug(slow_to_describe(release), "slow")
    try:
        assert "did not finish" in accelerator.resolve().note
        stuck = _machine._STUCK.done
        assert stuck is not None and not stuck.is_set()
        # The bound is not spent again: these answer from the abandoned discovery's record.
        monkeypatch.setenv(accelerator.ENV_PROBE_TIMEOUT, "inf")
        rows = {task: detail for task, _, detail in accelerator.capabilities()}
        assert rows["Spectral unmixing (matmul)"].startswith("unknown: plugin discovery did not finish")
        assert accelerator.neural_engines() == ()
    finally:
        release.set()
    assert stuck.wait(30)


# ---- 5. a forked child gets fresh locks ----------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_lock_held_at_fork_does_not_deadlock_the_child() -> None:
    script = textwrap.dedent("""
        import os, signal, threading
        from spacr_accel_core import accelerator
        from spacr_accel_core.devices import _machine

        held, release = threading.Event(), threading.Event()

        def hold():
            with _machine._LOCK:
                held.set()
                release.wait()

        threading.Thread(target=hold, daemon=True).start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)  # the guard: a deadlocked child is killed by SIGALRM, not waited for
            found = accelerator.resolve()
            os._exit(0 if found.kind == "cpu" else 3)
        release.set()
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """)
    env = {**os.environ, "SPACR_DEVICE": "cpu"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "child 0"  # "child -14" is the child killed by the alarm
