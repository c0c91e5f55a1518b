"""How the core walks probers: best first, first usable wins, cached, bounded, never raising."""

from __future__ import annotations

import os
import sys
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import spacr_accel_core
from spacr_accel_core import BackendUnavailable, accelerator, hookimpl
from spacr_accel_core.accelerator import Accelerator
from spacr_accel_core.devices import _machine
from spacr_accel_core.dispatch._registry import REGISTRY

Plug = Callable[[object, str], object]


def test_no_prober_installed_answers_the_cpu_with_a_note() -> None:
    found = accelerator.resolve(refresh=True)
    assert (found.kind, found.device, found.usable) == ("cpu", "cpu", True)
    assert "no device prober" in found.note


def test_the_first_usable_answer_wins_and_later_probers_are_not_asked(
        plug: Plug, prober_class: Any, kinds: dict[str, Accelerator]) -> None:
    first = plug(prober_class(kinds["rocm"]), "a_first")
    second = plug(prober_class(kinds["cuda"]), "b_second")
    assert accelerator.resolve(refresh=True) == kinds["rocm"]
    assert len(first.calls) == 1  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record
    assert second.calls == []  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record


def test_resolve_passes_no_torch_and_asks_for_names_and_cuda(plug: Plug, prober_class: Any) -> None:
    prober = plug(prober_class(None), "fake")
    accelerator.resolve(refresh=True)
    assert prober.calls == [(None, True, True)]  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record


def test_a_detected_but_unusable_answer_is_kept_when_nothing_is_usable(
        plug: Plug, prober_class: Any, kinds: dict[str, Accelerator]) -> None:
    plug(prober_class(kinds["mps-unusable"]), "a_first")
    plug(prober_class(None), "b_second")
    found = accelerator.resolve(refresh=True)
    assert (found.kind, found.detected, found.usable) == ("mps", True, False)
    assert found.note == "Intel integrated graphics"
    # Found, and running on the CPU: the report must not promise the device's limits or its device.
    assert (found.device, found.float64, found.bfloat16, found.is_gpu) == ("cpu", True, True, False)


def test_a_usable_answer_from_a_later_prober_beats_an_earlier_unusable_one(
        plug: Plug, prober_class: Any, kinds: dict[str, Accelerator]) -> None:
    plug(prober_class(kinds["mps-unusable"]), "a_first")
    plug(prober_class(kinds["xpu"]), "b_second")
    assert accelerator.resolve(refresh=True) == kinds["xpu"]


@pytest.mark.parametrize("error", [
    ValueError("driver said no"),
    KeyError("hip"),
    BackendUnavailable("PyTorch is not installed"),
    SystemExit(3),
])
def test_a_prober_that_raises_is_a_note_and_the_next_is_asked(
        plug: Plug, prober_class: Any, kinds: dict[str, Accelerator], error: BaseException) -> None:
    plug(prober_class(raises=error), "a_broken")
    reason = str(error) if isinstance(error, RuntimeError) else f"a_broken: {_machine._describe(error)}"
    assert accelerator.resolve(refresh=True) == _machine._cpu(f"no accelerator found: {reason}")
    plug(prober_class(kinds["cuda"]), "b_working")
    assert accelerator.resolve(refresh=True) == kinds["cuda"]


@pytest.mark.parametrize(("answer", "words"), [
    ("cuda:0", "returned str"),
    (Accelerator(kind="npu", device="npu:0", label="NPU"), "is not one of"),
    (Accelerator(kind="cuda", device="cuda:0", label="GPU", detected=False), "did not detect"),
])
def test_a_malformed_answer_is_ignored_with_a_note(plug: Plug, prober_class: Any, answer: Any,
                                                   words: str) -> None:
    plug(prober_class(answer), "odd")
    found = accelerator.resolve(refresh=True)
    assert found.kind == "cpu"
    assert "odd:" in found.note and words in found.note


def test_an_undetected_answer_contributes_only_its_note(plug: Plug, prober_class: Any) -> None:
    nothing = Accelerator(kind="cuda", device="cpu", label="CUDA", detected=False, usable=False,
                          note="the driver is too old")
    plug(prober_class(nothing), "old")
    found = accelerator.resolve(refresh=True)
    assert (found.kind, found.detected) == ("cpu", True)
    assert found.note == "no accelerator found: the driver is too old"


def test_a_prober_may_take_a_subset_of_the_arguments(plug: Plug, kinds: dict[str, Accelerator]) -> None:
    seen: list[Any] = []

    class Terse:
        @hookimpl
        def spacr_accel_probe(self, include_cuda: bool) -> Accelerator:
            seen.append(include_cuda)
            return kinds["xpu"]

    plug(Terse(), "terse")
    assert accelerator.resolve(refresh=True) == kinds["xpu"]
    assert seen == [True]


def test_the_answer_is_cached_until_refresh(plug: Plug, prober_class: Any,
                                            kinds: dict[str, Accelerator]) -> None:
    prober = plug(prober_class(kinds["cuda"]), "fake")
    first = accelerator.resolve()
    assert accelerator.resolve() is first
    assert len(prober.calls) == 1  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record
    accelerator.resolve(refresh=True)
    assert len(prober.calls) == 2  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record
    spacr_accel_core.refresh()
    accelerator.resolve()
    assert len(prober.calls) == 3  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record


def test_thirty_two_threads_at_once_probe_exactly_once(plug: Plug, prober_class: Any,
                                                       kinds: dict[str, Accelerator]) -> None:
    prober = plug(prober_class(kinds["cuda"], delay=0.05), "slow")
    spacr_accel_core.refresh()
    start = threading.Barrier(32)
    answers: list[Accelerator] = []
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            start.wait()
            answers.append(accelerator.resolve())
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(prober.calls) == 1  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record
    assert len(answers) == 32 and all(a is answers[0] for a in answers)
    assert answers[0] == kinds["cuda"]


def test_a_probe_that_hangs_is_abandoned_and_named(plug: Plug, prober_class: Any,
                                                   kinds: dict[str, Accelerator],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(accelerator.ENV_PROBE_TIMEOUT, "0.2")
    release = threading.Event()
    plug(prober_class(kinds["cuda"], wait=release), "a_hanging")
    after = plug(prober_class(kinds["xpu"]), "b_after")
    try:
        found = accelerator.resolve(refresh=True)
    finally:
        release.set()  # let the abandoned thread finish
    assert found.kind == "cpu"
    assert "'a_hanging' device probe did not answer within 0.2 s" in found.note
    assert accelerator.ENV_PROBE_TIMEOUT in found.note
    assert after.calls == []  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record


def test_the_cpu_words_in_spacr_device_skip_every_prober(plug: Plug, prober_class: Any,
                                                         kinds: dict[str, Accelerator],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    prober = plug(prober_class(kinds["cuda"]), "fake")
    for word in ("cpu", "CPU", " off ", "0", "none"):
        monkeypatch.setenv("SPACR_DEVICE", word)
        found = accelerator.resolve(refresh=True)
        assert (found.kind, found.device) == ("cpu", "cpu")
        assert f"forced by SPACR_DEVICE={word.strip()}" == found.note
        assert accelerator.inspect_torch(types.SimpleNamespace()).kind == "cpu"
    assert prober.calls == []  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record
    monkeypatch.setenv("SPACR_DEVICE", "auto")
    assert accelerator.resolve(refresh=True) == kinds["cuda"]


def test_inspect_torch_passes_the_module_and_leaves_the_cache_alone(
        plug: Plug, prober_class: Any, kinds: dict[str, Accelerator]) -> None:
    prober = plug(prober_class(kinds["xpu"]), "fake")
    stand_in = types.SimpleNamespace(name="stand-in")
    assert accelerator.inspect_torch(stand_in, device_names=False, include_cuda=False) == kinds["xpu"]
    assert prober.calls == [(stand_in, False, False)]  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record
    assert _machine._CACHE.accelerator is None
    prober.answer = kinds["cuda"]  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record
    assert accelerator.resolve() == kinds["cuda"]
    assert accelerator.inspect_torch(stand_in) == kinds["cuda"]
    assert len(prober.calls) == 3  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record


def test_inspect_torch_without_a_module_answers_the_cpu(plug: Plug, prober_class: Any,
                                                         kinds: dict[str, Accelerator]) -> None:
    prober = plug(prober_class(kinds["cuda"]), "fake")
    found = accelerator.inspect_torch(None)
    assert found.kind == "cpu" and "no torch module" in found.note
    assert prober.calls == []  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record


def test_a_broken_registry_still_answers_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(hook: str) -> Any:
        raise OSError("entry points unreadable")

    monkeypatch.setattr(REGISTRY, "hookimpls", broken)
    found = accelerator.resolve(refresh=True)
    assert found.kind == "cpu"
    assert "plugin discovery failed: OSError: entry points unreadable" in found.note


@pytest.mark.parametrize(("raw", "expected"), [
    (None, 60.0), ("", 60.0), ("2.5", 2.5), (" 7 ", 7.0), ("inf", None),
    ("0", 60.0), ("-3", 60.0), ("nan", 60.0), ("soon", 60.0),
])
def test_the_probe_timeout_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                        raw: str | None, expected: float | None) -> None:
    if raw is not None:
        monkeypatch.setenv(accelerator.ENV_PROBE_TIMEOUT, raw)
    assert _machine._probe_timeout() == expected


@given(st.text(max_size=12))
def test_any_probe_timeout_text_gives_a_positive_bound_or_none(raw: str) -> None:
    saved = os.environ.get(accelerator.ENV_PROBE_TIMEOUT)
    try:
        if "\x00" in raw:
            return  # not representable in an environment
        os.environ[accelerator.ENV_PROBE_TIMEOUT] = raw
        bound = _machine._probe_timeout()
    finally:
        if saved is None:
            os.environ.pop(accelerator.ENV_PROBE_TIMEOUT, None)
        else:
            os.environ[accelerator.ENV_PROBE_TIMEOUT] = saved
    assert bound is None or (0 < bound < float("inf"))  # NaN fails both comparisons


def test_a_third_party_prober_is_found_through_its_entry_point(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "acme_accel_probe.py").write_text(
        "from spacr_accel_core import Declaration, hookimpl\n"
        "from spacr_accel_core.accelerator import Accelerator\n"
        "SPACR_ACCEL_PLUGIN = Declaration(name='acme')\n"
        "@hookimpl\n"
        "def spacr_accel_probe(torch, device_names, include_cuda):\n"
        "    return Accelerator(kind='xpu', device='xpu:0', label='Acme Xe (Acme)', name='Acme Xe')\n"
        "@hookimpl\n"
        "def spacr_accel_neural_engines():\n"
        "    return ['Acme NPU (not a torch device)']\n"
    )
    info = tmp_path / "acme_accel_probe-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-accel-probe\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[spacr_accel]\nacme = acme_accel_probe\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "acme_accel_probe", raising=False)
    try:
        spacr_accel_core.refresh()
        found = accelerator.resolve()
        assert (found.kind, found.label, found.name) == ("xpu", "Acme Xe (Acme)", "Acme Xe")
        assert accelerator.neural_engines() == ("Acme NPU (not a torch device)",)
        rows = {p.name: p for p in spacr_accel_core.plugins()}
        assert (rows["acme"].distribution, rows["acme"].version) == ("acme-accel-probe", "1.0")
    finally:
        sys.modules.pop("acme_accel_probe", None)  # sys.path is restored by monkeypatch
