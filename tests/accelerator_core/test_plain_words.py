"""``describe()`` is a line for a console: no exception class names, no nested parentheses;
and an unreadable ``SPACR_ACCEL_PROBE_TIMEOUT`` is warned about once per process."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import pytest

from spacr_accel_core import BackendUnavailable, accelerator
from spacr_accel_core.accelerator import Accelerator
from spacr_accel_core.devices import _machine

Plug = Callable[[object, str], object]


def _depth(text: str) -> int:
    """How deeply the parentheses of ``text`` nest."""
    depth = deepest = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        deepest = max(deepest, depth)
    return deepest


def test_no_torch_reads_plainly(plug: Plug, prober_class: Any) -> None:
    plug(prober_class(raises=BackendUnavailable("PyTorch is not installed")), "torch_like")
    accelerator.resolve(refresh=True)
    assert accelerator.describe() == "CPU (no accelerator found: PyTorch is not installed)"


def test_several_probers_are_named_without_their_exception_classes(plug: Plug, prober_class: Any) -> None:
    plug(prober_class(raises=BackendUnavailable("PyTorch is not installed")), "a_torch")
    plug(prober_class(raises=RuntimeError("no driver")), "b_other")
    accelerator.resolve(refresh=True)
    line = accelerator.describe()
    assert line == "CPU (no accelerator found: a_torch: PyTorch is not installed; b_other: no driver)"
    assert not re.search(r"\b\w+(Error|Unavailable|Exception)\b", line)


def test_a_note_with_its_own_parentheses_is_flattened(resolved: Callable[[Accelerator], Any]) -> None:
    resolved(Accelerator(kind="cpu", device="cpu", label="CPU",
                         note="abandoned (raise X (seconds) if this machine is slow)"))
    line = accelerator.describe()
    assert line == "CPU (abandoned, raise X, seconds if this machine is slow)"
    assert _depth(line) == 1


def test_a_found_but_unused_device_keeps_one_level(resolved: Callable[[Accelerator], Any]) -> None:
    resolved(Accelerator(kind="mps", device="cpu", label="Intel Iris (Apple Metal)", detected=True,
                         usable=False, note="Intel graphics (no backend)"))
    line = accelerator.describe()
    assert line == "Intel Iris (Apple Metal): found, not used (Intel graphics, no backend)"
    assert _depth(line) == 1


def test_an_unreadable_timeout_warns_once_per_process(monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    from spacr_accel_core.dispatch import _settings

    monkeypatch.setattr(_settings, "_warned_values", set())
    monkeypatch.setenv("SPACR_ACCEL_PROBE_TIMEOUT", "abc")
    with caplog.at_level(logging.WARNING, logger="spacr_accel_core.accelerator"):
        for _ in range(8):  # a doctor reads the bound seven or eight times
            assert _machine._probe_timeout() == accelerator.DEFAULT_PROBE_TIMEOUT
        monkeypatch.setenv("SPACR_ACCEL_PROBE_TIMEOUT", "-1")
        for _ in range(3):
            assert _machine._probe_timeout() == accelerator.DEFAULT_PROBE_TIMEOUT
    words = [record.getMessage() for record in caplog.records if "SPACR_ACCEL_PROBE_TIMEOUT" in record.getMessage()]
    assert words == ["SPACR_ACCEL_PROBE_TIMEOUT='abc' is not a number of seconds; using 60",
                     "SPACR_ACCEL_PROBE_TIMEOUT='-1' must be positive; using 60"]
