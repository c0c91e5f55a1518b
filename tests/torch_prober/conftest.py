"""Stand-in torch modules for the torch prober, and a clean slate around every test.

A stand-in is a SimpleNamespace holding only what a path asks for, so a probe that reaches for
anything else fails loudly; ``forbid_names`` makes any device-property query fail the test.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

import spacr_accel_core
from spacr_accel_torch import _plugin, _probe


class Cuda:
    """``torch.cuda`` (also ROCm's, which answers through the same namespace)."""

    def __init__(self, available: bool = True, names: Sequence[str] = ("NVIDIA A100",), *,
                 forbid_names: bool = False, raises: BaseException | None = None) -> None:
        self.available, self.names, self.forbid_names, self.raises = available, list(names), forbid_names, raises
        self.emptied = 0

    def is_available(self) -> bool:
        if self.raises is not None:
            raise self.raises
        return self.available

    def device_count(self) -> int:
        return len(self.names)

    def get_device_name(self, index: int = 0) -> str:
        if self.forbid_names:
            pytest.fail("get_device_name was called although device_names=False")
        return self.names[index]

    def get_device_properties(self, index: int = 0) -> Any:
        pytest.fail("get_device_properties must never be needed")

    def empty_cache(self) -> None:
        self.emptied += 1


class Xpu(Cuda):
    """``torch.xpu``: the same shape as ``torch.cuda``."""


class Mps:
    """``torch.backends.mps``."""

    def __init__(self, available: bool = True, built: bool = True) -> None:
        self.available, self.built = available, built

    def is_available(self) -> bool:
        return self.available

    def is_built(self) -> bool:
        return self.built


class Metal:
    """``torch.mps`` (only its cache)."""

    def __init__(self) -> None:
        self.emptied = 0

    def empty_cache(self) -> None:
        self.emptied += 1


def make_torch(*, cuda: Cuda | None = None, hip: str | None = None, cuda_version: str | None = "12.1",
               mps: Mps | None = None, xpu: Xpu | None = None, version: bool = True,
               release: str = "2.5.1", autocast: Sequence[str] = ("cuda", "xpu", "cpu"),
               allocations: bool = False) -> types.SimpleNamespace:
    """A torch with the named backends; nothing available unless given."""
    torch = types.SimpleNamespace(
        __version__=release,
        cuda=cuda if cuda is not None else Cuda(available=False),
        backends=types.SimpleNamespace(mps=mps if mps is not None else Mps(available=False, built=False)),
        mps=Metal(),
        amp=types.SimpleNamespace(is_autocast_available=lambda device_type: device_type in autocast),
        float64="float64",
        bfloat16="bfloat16",
    )
    if version:
        torch.version = types.SimpleNamespace(cuda=None if hip else cuda_version, hip=hip)
    if xpu is not None:
        torch.xpu = xpu
    if not allocations:
        def zeros(*args: Any, **kwargs: Any) -> Any:
            pytest.fail("a dtype-probe tensor was allocated during an inspection")

        torch.zeros = zeros
    return torch


@pytest.fixture
def stand_in() -> types.SimpleNamespace:
    return types.SimpleNamespace(torch=make_torch, Cuda=Cuda, Xpu=Xpu, Mps=Mps)


def host(system: str = "Linux", machine: str = "x86_64", mac_release: str = "") -> _probe._Host:
    return _probe._Host(system, machine, mac_release)


@pytest.fixture
def on_host(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``on_host("Darwin", "arm64", "14.4", gpu="Apple M2")`` fakes the operating system."""

    def fake(system: str, machine: str = "arm64", mac_release: str = "14.4", gpu: str = "Apple M2") -> None:
        monkeypatch.setattr(_probe, "_host", lambda: host(system, machine, mac_release))
        monkeypatch.setattr(_probe, "_metal_gpu_name", lambda machine: gpu)

    return fake


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("SPACR_DEVICE", "SPACR_ACCEL_DISABLE", "SPACR_ACCEL_BACKENDS", "SPACR_ACCEL_PROBE_TIMEOUT",
                 _probe.FALLBACK_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_probe, "_host", host)
    monkeypatch.setattr(_probe, "_IMPORT", _probe._ImportState())
    monkeypatch.setitem(sys.modules, "torch_directml", None)  # no DirectML unless a test adds it
    # The stand-in torch is the machine here: the OS's device nodes (none on CI) must not
    # answer for it before it is asked.
    monkeypatch.setattr(_plugin, "_no_device_node", lambda: None)
    spacr_accel_core.refresh()
    yield
    spacr_accel_core.refresh()
