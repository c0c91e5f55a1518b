"""``spacr_accel_core.warm_up``: each plugin implementing ``spacr_accel_warm_up`` is asked, bounded,
by name; a broken or hung one is reported not ready, and nothing raises."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import spacr_accel_core
from spacr_accel_core import BackendInfo, Declaration, hookimpl

Plug = Callable[[object, str], object]


class Warming:
    def __init__(self, name: str, answer: Callable[[float], object]) -> None:
        self.name = name
        self.SPACR_ACCEL_PLUGIN = Declaration(name=name, priority=1.0)
        self.answer = answer
        self.asked: list[float] = []

    @hookimpl
    def spacr_accel_backend_info(self) -> BackendInfo:
        return BackendInfo()

    @hookimpl
    def spacr_accel_warm_up(self, timeout: float) -> object:
        self.asked.append(timeout)
        return self.answer(timeout)


def _raise(timeout: float) -> object:
    raise RuntimeError("no compiler here")


def test_each_plugin_is_asked_and_judged(plug: Plug) -> None:
    ready = plug(Warming("ready", lambda t: True), "ready")
    plug(Warming("broken", _raise), "broken")
    plug(Warming("unsure", lambda t: "yes"), "unsure")  # only True is ready
    answers = spacr_accel_core.warm_up(timeout=3.0)
    assert {k: answers[k] for k in ("ready", "broken", "unsure")} == {"ready": True, "broken": False, "unsure": False}
    assert ready.asked == [3.0]  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record
    assert spacr_accel_core.warm_up("ready", timeout=1.0) == {"ready": True}


def test_a_plugin_that_never_answers_costs_its_bound_only(plug: Plug, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    plug(Warming("hung", lambda t: release.wait()), "hung")
    import spacr_accel_core.dispatch._bounded as bounded_module

    real = bounded_module.bounded
    monkeypatch.setattr(bounded_module, "bounded", lambda work, timeout, what: real(work, 0.2, what))
    try:
        assert spacr_accel_core.warm_up("hung", timeout=0.1) == {"hung": False}
    finally:
        release.set()


def test_the_shipped_numba_backend_gets_ready() -> None:
    pytest.importorskip("spacr_accel_numba")
    spacr_accel_core.refresh()
    assert spacr_accel_core.warm_up("numba") == {"numba": True}
