"""Fake probers for the accelerator core, isolated from the shipped backends' probers.

The shipped torch, cupy and numba plugins, and the example plugins under ``examples/`` where installed
(the OpenVINO prober, the OpenCV backend), are blocked (``SPACR_ACCEL_DISABLE``) so each test sees
only the probers it registers and the NumPy floor, on any machine, GPU or not. Everything
registered is removed afterwards.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import spacr_accel_core
from spacr_accel_core import Declaration, hookimpl
from spacr_accel_core.accelerator import Accelerator


class Prober:
    """A prober plugin whose answer, failure or delay the test chooses; ``calls`` records each ask."""

    SPACR_ACCEL_PLUGIN = Declaration(name="prober")

    def __init__(self, answer: Any = None, *, raises: BaseException | None = None,
                 wait: threading.Event | None = None, delay: float = 0.0) -> None:
        self.answer = answer
        self.raises = raises
        self.wait = wait
        self.delay = delay
        self.calls: list[tuple[Any, bool, bool]] = []
        self._lock = threading.Lock()

    @hookimpl
    def spacr_accel_probe(self, torch: Any, device_names: bool, include_cuda: bool) -> Any:
        with self._lock:
            self.calls.append((torch, device_names, include_cuda))
        if self.delay:
            time.sleep(self.delay)  # widens the window in which concurrent callers could race
        if self.wait is not None:
            self.wait.wait()
        if self.raises is not None:
            raise self.raises
        return self.answer


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("SPACR_DEVICE", "SPACR_ACCEL_PROBE_TIMEOUT", "SPACR_ACCEL_BACKENDS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPACR_ACCEL_DISABLE", "torch,cupy,numba,openvino,opencv")
    spacr_accel_core.refresh()
    yield
    spacr_accel_core.refresh()


@pytest.fixture
def plug(plug: Callable[[object, str], object]) -> Callable[[object, str], object]:
    """The shared ``plug``, declaring each test plugin (a prober, a row or engine source) by name.

    These plugins implement only the accelerator's hooks; what they are needs no more than a name.
    """

    def add(obj: object, name: str) -> object:
        if not hasattr(obj, "SPACR_ACCEL_PLUGIN"):
            obj.SPACR_ACCEL_PLUGIN = Declaration(name=name)  # type: ignore[attr-defined]  # any test object
        return plug(obj, name)

    return add


@pytest.fixture
def resolved(plug: Callable[[object, str], object]) -> Callable[[Accelerator], Prober]:
    """``resolved(acc)`` makes ``resolve()`` answer ``acc`` through a registered prober."""

    def make(answer: Accelerator) -> Prober:
        prober = Prober(answer)
        plug(prober, "fake")
        return prober

    return make


CUDA = Accelerator(kind="cuda", device="cuda:0", label="NVIDIA A100 (NVIDIA CUDA 12.1)", name="NVIDIA A100")
ROCM = Accelerator(kind="rocm", device="cuda:0", label="AMD Instinct MI210 (AMD ROCm 6.0)",
                   name="AMD Instinct MI210")
METAL = Accelerator(kind="mps", device="mps", label="AMD Radeon Pro 5300 (Apple Metal)",
                    name="AMD Radeon Pro 5300", float64=False, autocast=False, fallback=True,
                    bfloat16=False)
XPU = Accelerator(kind="xpu", device="xpu:0", label="Intel Arc A770 (Intel XPU)", name="Intel Arc A770",
                  float64=False, autocast=True, bfloat16=True)
METAL_UNUSABLE = Accelerator(kind="mps", device="mps", label="Intel Iris Plus Graphics (Apple Metal)",
                             name="Intel Iris Plus Graphics", usable=False, float64=False,
                             autocast=False, bfloat16=False, note="Intel integrated graphics")


@pytest.fixture
def kinds() -> dict[str, Accelerator]:
    """Ready-made answers, one per vendor."""
    return {"cuda": CUDA, "rocm": ROCM, "mps": METAL, "xpu": XPU, "mps-unusable": METAL_UNUSABLE}


@pytest.fixture
def prober_class() -> type[Prober]:
    return Prober
