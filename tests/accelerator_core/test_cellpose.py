"""The Cellpose helpers: three arguments that agree, and the Metal flow-error workaround."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from spacr_accel_core import accelerator
from spacr_accel_core.accelerator import Accelerator
from spacr_accel_core.devices import _cellpose

Resolved = Callable[[Accelerator], Any]
torch = pytest.importorskip("torch")
CPU = torch.device("cpu")


@pytest.fixture
def cellpose(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """A stand-in ``cellpose.dynamics`` whose ``remove_bad_flow_masks`` records what it was given."""
    monkeypatch.setattr(_cellpose._PATCH, "applied", False)
    package = types.ModuleType("cellpose")
    dynamics = types.ModuleType("cellpose.dynamics")
    dynamics.calls = []  # type: ignore[attr-defined]  # a stand-in module gains attributes at run time

    def remove_bad_flow_masks(masks: Any, flows: Any, threshold: float = 0.4, device: Any = CPU) -> Any:
        """Cellpose's own docstring."""
        dynamics.calls.append((masks, flows, threshold, device))
        return "filtered"

    dynamics.remove_bad_flow_masks = remove_bad_flow_masks  # type: ignore[attr-defined]  # a stand-in module gains attributes at run time
    package.dynamics = dynamics  # type: ignore[attr-defined]  # a stand-in module gains attributes at run time
    monkeypatch.setitem(sys.modules, "cellpose", package)
    monkeypatch.setitem(sys.modules, "cellpose.dynamics", dynamics)
    yield dynamics


@pytest.mark.parametrize(("kind", "gpu", "device", "bf16"), [
    ("cuda", True, "cuda:0", True),
    ("rocm", True, "cuda:0", True),
    ("mps", True, "mps", False),  # Metal on torch 2.2 refuses bfloat16: float32 weights
    ("xpu", True, "xpu:0", True),
])
def test_cellpose_kwargs_agree_on_each_device(resolved: Resolved, kinds: dict[str, Accelerator],
                                              cellpose: types.ModuleType, kind: str, gpu: bool,
                                              device: str, bf16: bool) -> None:
    resolved(kinds[kind])
    assert accelerator.cellpose_kwargs() == {"gpu": gpu, "device": torch.device(device), "use_bfloat16": bf16}
    assert accelerator.cellpose_gpu() is gpu


def test_cellpose_on_the_cpu_gets_float32_weights(resolved: Resolved) -> None:
    resolved(Accelerator(kind="cpu", device="cpu", label="CPU", bfloat16=True))
    assert accelerator.cellpose_kwargs() == {"gpu": False, "device": torch.device("cpu"), "use_bfloat16": False}
    assert accelerator.cellpose_gpu() is False


def test_an_unusable_metal_gets_the_cpu_and_no_patch(resolved: Resolved, kinds: dict[str, Accelerator],
                                                     cellpose: types.ModuleType) -> None:
    original = cellpose.remove_bad_flow_masks
    resolved(kinds["mps-unusable"])
    assert accelerator.cellpose_kwargs() == {"gpu": False, "device": torch.device("cpu"), "use_bfloat16": False}
    assert cellpose.remove_bad_flow_masks is original


def test_metal_pins_the_flow_error_pass_to_the_cpu(resolved: Resolved, kinds: dict[str, Accelerator],
                                                   cellpose: types.ModuleType) -> None:
    resolved(kinds["mps"])
    accelerator.cellpose_kwargs()
    patched = cellpose.remove_bad_flow_masks
    assert patched.__doc__ == "Cellpose's own docstring."
    assert patched("masks", "flows", threshold=0.7, device=torch.device("mps")) == "filtered"
    assert patched("m", "f") == "filtered"
    assert cellpose.calls == [
        ("masks", "flows", 0.7, torch.device("cpu")),
        ("m", "f", 0.4, torch.device("cpu")),
    ]


def test_the_workaround_is_idempotent(cellpose: types.ModuleType) -> None:
    _cellpose._keep_cellpose_flows_off_metal()
    once = cellpose.remove_bad_flow_masks
    _cellpose._keep_cellpose_flows_off_metal()
    _cellpose._PATCH.applied = False  # even a second attempt must not wrap twice
    _cellpose._keep_cellpose_flows_off_metal()
    assert cellpose.remove_bad_flow_masks is once
    once("m", "f", device="mps")
    assert len(cellpose.calls) == 1


def test_the_workaround_is_a_no_op_without_cellpose(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cellpose._PATCH, "applied", False)
    monkeypatch.setitem(sys.modules, "cellpose", None)  # `import cellpose` raises ImportError
    _cellpose._keep_cellpose_flows_off_metal()
    assert _cellpose._PATCH.applied


def test_the_workaround_survives_a_cellpose_whose_internals_moved(cellpose: types.ModuleType) -> None:
    del cellpose.remove_bad_flow_masks
    _cellpose._keep_cellpose_flows_off_metal()
    assert not hasattr(cellpose, "remove_bad_flow_masks")
