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
from spacr_accel_core import Declaration, HostDevice, hookimpl
from spacr_accel_core.devices import _host
from spacr_accel_torch import _arch, _nodes, _probe


class Cuda:
    """``torch.cuda`` (also ROCm's, which answers through the same namespace).

    ``arches``, ``capability`` and ``gcn`` model a real build and card (``get_arch_list``,
    ``get_device_capability``, ``gcnArchName``); without ``arches`` the build has no arch list to
    check against, as an old torch. ``warn`` is what ``is_available()`` warns before answering
    (torch's "driver too old" message), ``cu_init`` records every call that would initialise the
    CUDA runtime (``is_available`` does; the NVML-based ``device_count`` does not).
    """

    def __init__(self, available: bool = True, names: Sequence[str] = ("NVIDIA A100",), *,
                 forbid_names: bool = False, raises: BaseException | None = None,
                 arches: Sequence[str] | None = None, capability: tuple[int, int] = (8, 0),
                 gcn: str = "", warn: str = "", bf16: Any = None) -> None:
        self.available, self.names, self.forbid_names, self.raises = available, list(names), forbid_names, raises
        self.emptied = 0
        self.arches, self.capability, self.gcn, self.warn = arches, capability, gcn, warn
        self.cu_init: list[str] = []
        if bf16 is not None:
            self.is_bf16_supported = bf16

    def is_available(self) -> bool:
        self.cu_init.append("is_available")
        if self.raises is not None:
            raise self.raises
        if self.warn:
            import warnings

            warnings.warn(self.warn, UserWarning, stacklevel=2)
        return self.available

    def device_count(self) -> int:
        if self.raises is not None:
            raise self.raises
        return len(self.names) if self.available else 0

    def get_device_name(self, index: int = 0) -> str:
        if self.forbid_names:
            pytest.fail("get_device_name was called although device_names=False")
        return self.names[index]

    def get_arch_list(self) -> list[str]:
        if self.arches is None:
            raise AttributeError("get_arch_list")  # an old torch: no list to check against
        return list(self.arches)

    def get_device_capability(self, index: int = 0) -> tuple[int, int]:
        if self.forbid_names:
            pytest.fail("get_device_capability was called although device_names=False")
        return self.capability

    def get_device_properties(self, index: int = 0) -> Any:
        if self.forbid_names or not self.gcn:
            pytest.fail("get_device_properties must not be needed here")
        return types.SimpleNamespace(gcnArchName=self.gcn, name=self.names[index])

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


class Tensor:
    """Just enough of a tensor for the kernel check: ``(x * 2 + 1).sum().item()``."""

    def __init__(self, values: list[float], fail: BaseException | None = None) -> None:
        self.values, self.fail = values, fail

    def __mul__(self, other: float) -> Tensor:
        return Tensor([v * other for v in self.values], self.fail)

    def __add__(self, other: float) -> Tensor:
        return Tensor([v + other for v in self.values], self.fail)

    def sum(self) -> Tensor:
        return Tensor([sum(self.values)], self.fail)

    def item(self) -> float:
        if self.fail is not None:  # like CUDA: a launch failure surfaces when the result is read
            raise self.fail
        return self.values[0]


def make_torch(*, cuda: Cuda | None = None, hip: str | None = None, cuda_version: str | None = "12.1",
               mps: Mps | None = None, xpu: Xpu | None = None, version: bool = True,
               release: str = "2.5.1", autocast: Sequence[str] | None = ("cuda", "xpu", "cpu"),
               allocations: bool = False, kernel_error: BaseException | None = None) -> types.SimpleNamespace:
    """A torch with the named backends; nothing available unless given.

    ``autocast=None`` is a torch without ``torch.amp.is_autocast_available`` (before 2.4);
    ``kernel_error`` is what reading the kernel check's result raises on the device.
    """
    torch = types.SimpleNamespace(
        __version__=release,
        cuda=cuda if cuda is not None else Cuda(available=False),
        backends=types.SimpleNamespace(mps=mps if mps is not None else Mps(available=False, built=False)),
        mps=Metal(),
        amp=(types.SimpleNamespace(is_autocast_available=lambda device_type: device_type in autocast)
             if autocast is not None else types.SimpleNamespace()),
        float64="float64",
        bfloat16="bfloat16",
        float32="float32",
    )
    if version:
        torch.version = types.SimpleNamespace(cuda=None if hip else cuda_version, hip=hip)
    if xpu is not None:
        torch.xpu = xpu
    if not allocations:
        def zeros(*args: Any, **kwargs: Any) -> Any:
            pytest.fail("a dtype-probe tensor was allocated during an inspection")

        torch.zeros = zeros
        torch.arange = zeros
    else:
        torch.kernels = []

        def arange(size: int, *, dtype: Any, device: str) -> Tensor:
            torch.kernels.append((dtype, device))
            return Tensor([float(v) for v in range(size)], kernel_error)

        torch.arange = arange
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
    monkeypatch.setattr(_nodes, "_no_device_node", lambda: None)
    # Nor must the real machine's cards: a test adds host devices through the hook.
    monkeypatch.setattr(_host, "os_devices", list)
    monkeypatch.delenv(_arch.HSA_OVERRIDE, raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    spacr_accel_core.refresh()
    yield
    spacr_accel_core.refresh()


class Hosts:
    """A plugin listing host devices, as a third party (or the OS inventory) would."""

    SPACR_ACCEL_PLUGIN = Declaration(name="hosts")

    def __init__(self, *devices: HostDevice) -> None:
        self.devices = list(devices)

    @hookimpl
    def spacr_accel_host_devices(self) -> list[HostDevice]:
        return self.devices


@pytest.fixture
def host_cards() -> Iterator[Any]:
    """``host_cards(HostDevice(...), ...)`` makes the host inventory list those cards."""
    added: list[str] = []

    def add(*devices: HostDevice) -> None:
        name = f"hosts{len(added)}"
        spacr_accel_core.register(Hosts(*devices), name)
        added.append(name)
        spacr_accel_core.refresh()

    yield add
    for name in added:
        spacr_accel_core.unregister(name)
    spacr_accel_core.refresh()
