"""Drop-in fidelity with spaCR's own accelerator: its five capability rows first, in its words; the
public replacements for the private globals its code writes; Cellpose's arguments by version;
device memory."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap
import types
from collections.abc import Callable
from typing import Any

import pytest

from spacr_accel_core import accelerator
from spacr_accel_core.accelerator import Accelerator

SPACR_ROWS = ("Segmentation (Cellpose)", "Model training", "Model inference / classification",
              "Live backdrop and spaceout", "UMAP / t-SNE / clustering")


@pytest.mark.parametrize("kind", ["cuda", "rocm", "mps", "xpu", "mps-unusable"])
def test_capabilities_start_with_spacrs_five_rows_in_its_words(kinds: dict[str, Accelerator], kind: str) -> None:
    rows = accelerator.capabilities(kinds[kind])
    assert tuple(task for task, _, _ in rows[:5]) == SPACR_ROWS == accelerator.SPACR_TASKS
    assert [task for task, _, _ in rows[5:8]] == ["Peak finding (maximum_filter)", "Spectral unmixing (matmul)",
                                                  "Cell matching (nearest_neighbours)"]


@pytest.mark.parametrize(("system", "environ", "gpus", "accelerated", "words"), [
    ("Darwin", {}, 0, True, "OpenGL on the desktop's GPU"),
    ("Windows", {}, 1, True, "OpenGL on the desktop's GPU"),
    ("Linux", {"DISPLAY": ":0"}, 1, True, "OpenGL on the display's GPU"),
    ("Linux", {"WAYLAND_DISPLAY": "wayland-0"}, 0, False, "OpenGL in software"),
    ("Linux", {}, 2, False, "no display here"),
])
def test_the_live_backdrop_is_accelerated_where_a_gpu_draws_a_display(
        system: str, environ: dict[str, str], gpus: int, accelerated: bool, words: str) -> None:
    from spacr_accel_core.devices._tasks import _backdrop_row

    task, flag, detail = _backdrop_row(system, environ, gpus)
    assert (task, flag) == ("Live backdrop and spaceout", accelerated) and detail.startswith(words)


def test_override_replaces_a_fake_assigned_to_the_private_cache(kinds: dict[str, Accelerator]) -> None:
    before = accelerator.resolve()
    with accelerator.override(kinds["cuda"]) as found:
        assert found is kinds["cuda"]
        assert accelerator.resolve() is kinds["cuda"] and accelerator.is_cuda()
        assert accelerator.capabilities()[0] == ("Segmentation (Cellpose)", True, "on NVIDIA A100")
        assert accelerator.cellpose_gpu() is True
    assert accelerator.resolve() == before  # restored on leaving


def test_override_restores_even_when_the_block_raises(kinds: dict[str, Accelerator]) -> None:
    before = accelerator.resolve()
    with pytest.raises(KeyError), accelerator.override(kinds["rocm"]):
        raise KeyError("inside")
    assert accelerator.resolve() == before


def test_override_refuses_what_is_not_an_accelerator() -> None:
    with pytest.raises(TypeError, match="found must be an Accelerator"), accelerator.override("cuda:0"):  # type: ignore[arg-type]  # a wrong type on purpose: its refusal is the test
        pass


def test_forget_makes_a_worker_probe_again(resolved: Callable[[Accelerator], Any],
                                           kinds: dict[str, Accelerator]) -> None:
    prober = resolved(kinds["cuda"])
    accelerator.resolve()
    accelerator.resolve()
    assert len(prober.calls) == 1
    accelerator.forget()  # what spaCR's worker did with `_CACHED = None` after picking its GPU
    accelerator.resolve()
    assert len(prober.calls) == 2


# ---- Cellpose's arguments, by the installed Cellpose -----------------------------------------------


def installed(monkeypatch: pytest.MonkeyPatch, version: str | None) -> None:
    real = importlib.metadata.version

    def fake(name: str) -> str:
        if name == "cellpose":
            if version is None:
                raise importlib.metadata.PackageNotFoundError(name)
            return version
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", fake)


@pytest.mark.parametrize(("version", "has_bfloat16"), [
    ("3.1.1.2", False), ("2.3.2", False), ("4.0.1", True), ("4.0.6.dev3", True), (None, True),
])
def test_cellpose_kwargs_give_only_what_the_installed_cellpose_accepts(
        monkeypatch: pytest.MonkeyPatch, resolved: Callable[[Accelerator], Any],
        kinds: dict[str, Accelerator], version: str | None, has_bfloat16: bool) -> None:
    resolved(kinds["cuda"])
    installed(monkeypatch, version)
    kwargs = accelerator.cellpose_kwargs()
    assert ("use_bfloat16" in kwargs) is has_bfloat16
    assert kwargs["gpu"] is True
    if has_bfloat16:
        assert kwargs["use_bfloat16"] is True


def test_cellpose_3_constructor_accepts_the_kwargs(monkeypatch: pytest.MonkeyPatch) -> None:
    # Cellpose 3.1's CellposeModel signature, as published: no use_bfloat16.
    def cellpose_3(gpu: bool = False, pretrained_model: Any = False, model_type: Any = None,
                   diam_mean: float = 30.0, device: Any = None, nchan: int = 2,
                   backbone: str = "default") -> None:
        del gpu, pretrained_model, model_type, diam_mean, device, nchan, backbone

    installed(monkeypatch, "3.1.1.2")
    cellpose_3(**accelerator.cellpose_kwargs())  # raised TypeError before


def test_cellpose_is_never_imported_to_read_its_version() -> None:
    script = textwrap.dedent("""
        import sys
        from spacr_accel_core import accelerator
        accelerator.cellpose_kwargs()
        print("cellpose" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         check=True, env={"SPACR_DEVICE": "cpu", "PATH": ""})
    assert out.stdout.split()[-1] == "False"


# ---- memory ------------------------------------------------------------------------------------------


def fake_torch(monkeypatch: pytest.MonkeyPatch, **namespaces: Any) -> None:
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(**namespaces))


def test_memory_of_the_device_in_use_through_torch_accelerator(
        monkeypatch: pytest.MonkeyPatch, kinds: dict[str, Accelerator]) -> None:
    asked: list[int] = []
    fake_torch(monkeypatch, accelerator=types.SimpleNamespace(
        get_memory_info=lambda index: asked.append(index) or (3 * 2**30, 40 * 2**30)))
    with accelerator.override(kinds["cuda"]):
        (row, *_) = accelerator.memory()
    assert (row.device, row.name, row.free, row.total, row.source) == (
        "cuda:0", "NVIDIA A100", 3 * 2**30, 40 * 2**30, "torch.accelerator")
    assert asked == [0]


def test_memory_falls_back_to_torch_cuda_on_an_older_torch(
        monkeypatch: pytest.MonkeyPatch, kinds: dict[str, Accelerator]) -> None:
    fake_torch(monkeypatch, cuda=types.SimpleNamespace(mem_get_info=lambda index: (1, 2)))
    with accelerator.override(kinds["rocm"]):
        row = accelerator.memory()[0]
    assert (row.free, row.total, row.source) == (1, 2, "torch.cuda")


def test_metal_memory_has_a_total_and_no_free(monkeypatch: pytest.MonkeyPatch,
                                              kinds: dict[str, Accelerator]) -> None:
    fake_torch(monkeypatch, mps=types.SimpleNamespace(recommended_max_memory=lambda: 21 * 2**30))
    with accelerator.override(kinds["mps"]):
        row = accelerator.memory()[0]
    assert (row.device, row.free, row.total) == ("mps", None, 21 * 2**30)


def test_memory_of_an_unused_card_never_asks_torch(monkeypatch: pytest.MonkeyPatch,
                                                   kinds: dict[str, Accelerator]) -> None:
    def refuse(index: int) -> Any:
        raise AssertionError("a device spaCR does not use was asked for its memory")

    fake_torch(monkeypatch, accelerator=types.SimpleNamespace(get_memory_info=refuse),
               cuda=types.SimpleNamespace(mem_get_info=refuse))
    with accelerator.override(kinds["mps-unusable"]):
        assert all(row.free is None for row in accelerator.memory())


def test_memory_without_torch_imported_imports_nothing() -> None:
    script = textwrap.dedent("""
        import sys
        from spacr_accel_core import accelerator
        rows = accelerator.memory()
        print("torch" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         check=True, env={"SPACR_DEVICE": "cpu", "PATH": ""})
    assert out.stdout.split()[-1] == "False"
