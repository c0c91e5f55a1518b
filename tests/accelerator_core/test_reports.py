"""What the core says about the machine: the record, the shorthands, describe, capabilities,
neural engines and empty_cache, each telling the truth per vendor and none of them raising."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spacr_accel_core import accelerator, hookimpl
from spacr_accel_core.accelerator import KINDS, Accelerator
from spacr_accel_core.devices import _machine, _probers

Plug = Callable[[object, str], object]
Resolved = Callable[[Accelerator], Any]

accelerators = st.builds(
    Accelerator,
    kind=st.sampled_from(KINDS),
    device=st.sampled_from(["cpu", "cuda:0", "mps", "xpu:0", "privateuseone:0"]),
    label=st.text(max_size=20),
    name=st.text(max_size=10),
    detected=st.booleans(),
    usable=st.booleans(),
    note=st.text(max_size=20),
    float64=st.booleans(),
    autocast=st.booleans(),
    fallback=st.booleans(),
    bfloat16=st.booleans(),
)


def test_kinds_are_the_seeds_in_order_of_preference() -> None:
    assert KINDS == ("cuda", "rocm", "mps", "xpu", "directml", "cpu")


def test_the_record_is_frozen() -> None:
    found = Accelerator(kind="cpu", device="cpu", label="CPU")
    with pytest.raises(AttributeError):
        found.kind = "cuda"  # type: ignore[misc]  # the assignment a frozen record must refuse


@given(accelerators)
def test_the_two_gpu_questions_nest(found: Accelerator) -> None:
    assert found.is_gpu == (found.usable and found.kind != "cpu")
    assert found.is_cuda == (found.usable and found.kind == "cuda")
    assert not found.is_cuda or found.is_gpu


def test_rocm_is_a_gpu_and_not_cuda(kinds: dict[str, Accelerator]) -> None:
    assert kinds["rocm"].is_gpu and not kinds["rocm"].is_cuda
    assert kinds["cuda"].is_gpu and kinds["cuda"].is_cuda


def test_torch_device_builds_a_torch_device() -> None:
    torch = pytest.importorskip("torch")
    assert Accelerator(kind="mps", device="mps", label="x").torch_device == torch.device("mps")
    # A device string this torch cannot parse still answers the CPU rather than raising.
    assert Accelerator(kind="cuda", device="not a device", label="x").torch_device == torch.device("cpu")


def test_torch_device_is_the_cpu_string_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise
    assert Accelerator(kind="cuda", device="cuda:0", label="x").torch_device == "cpu"


@pytest.mark.parametrize(("kind", "device", "gpu", "cuda", "float64", "bf16", "autocast", "amp"), [
    ("cuda", "cuda:0", True, True, True, True, True, "cuda"),
    ("rocm", "cuda:0", True, False, True, True, True, "cuda"),
    ("mps", "mps", True, False, False, False, False, None),
    ("xpu", "xpu:0", True, False, False, True, True, "xpu"),
])
def test_the_shorthands_follow_the_resolved_accelerator(
        resolved: Resolved, kinds: dict[str, Accelerator], kind: str, device: str, gpu: bool, cuda: bool,
        float64: bool, bf16: bool, autocast: bool, amp: str | None) -> None:
    resolved(kinds[kind])
    assert accelerator.device_string() == device
    assert (accelerator.is_gpu(), accelerator.is_cuda()) == (gpu, cuda)
    assert (accelerator.supports_float64(), accelerator.supports_bfloat16()) == (float64, bf16)
    assert accelerator.supports_autocast() == autocast
    assert accelerator.autocast_device_type() == amp


def test_the_cpu_asks_for_no_mixed_precision(resolved: Resolved) -> None:
    resolved(Accelerator(kind="cpu", device="cpu", label="CPU"))
    assert accelerator.autocast_device_type() is None
    assert not accelerator.supports_autocast()
    assert accelerator.supports_float64()
    torch = pytest.importorskip("torch")
    assert accelerator.torch_device() == torch.device("cpu")


def test_describe_says_what_runs(resolved: Resolved, kinds: dict[str, Accelerator]) -> None:
    resolved(kinds["rocm"])
    assert accelerator.describe() == "AMD Instinct MI210 (AMD ROCm 6.0) (in use)"


def test_describe_says_found_not_used(resolved: Resolved, kinds: dict[str, Accelerator]) -> None:
    resolved(kinds["mps-unusable"])
    assert accelerator.describe() == (
        "Intel Iris Plus Graphics (Apple Metal): found, not used (Intel integrated graphics)")


def test_describe_the_cpu_with_its_note_and_the_idle_neural_engine(plug: Plug) -> None:
    class Engines:
        @hookimpl
        def spacr_accel_neural_engines(self) -> list[str]:
            return ["Apple Neural Engine (CoreML only)"]

    plug(Engines(), "engines")
    assert accelerator.describe() == (
        "CPU (no device prober is loaded: SPACR_ACCEL_DISABLE blocks cupy, numba, opencv, openvino, torch); "
        "found, not used: Apple Neural Engine (CoreML only)")


def test_neural_engines_gathers_every_plugin_and_survives_broken_ones(plug: Plug) -> None:
    def engines(answer: Any) -> object:
        class Engines:
            @hookimpl
            def spacr_accel_neural_engines(self) -> Any:
                if isinstance(answer, BaseException):
                    raise answer
                return answer

        return Engines()

    plug(engines(["Apple Neural Engine (CoreML only)", " "]), "a")
    plug(engines(RuntimeError("sysfs unreadable")), "b")
    plug(engines("Intel AI Boost (OpenVINO only)"), "c")
    plug(engines(42), "d")
    plug(engines(("Apple Neural Engine (CoreML only)", None)), "e")
    assert accelerator.neural_engines() == ("Apple Neural Engine (CoreML only)",
                                            "Intel AI Boost (OpenVINO only)")


def test_capabilities_on_cuda_are_all_green_where_they_should_be(resolved: Resolved,
                                                                 kinds: dict[str, Accelerator]) -> None:
    resolved(kinds["cuda"])
    rows = accelerator.capabilities()
    tasks = [task for task, _, _ in rows]
    assert tasks[:5] == ["Segmentation (Cellpose)", "Model training", "Model inference / classification",
                         "Live backdrop and spaceout", "UMAP / t-SNE / clustering"]
    by_task = {task: (flag, detail) for task, flag, detail in rows}
    assert by_task["Segmentation (Cellpose)"] == (True, "on NVIDIA A100")
    assert by_task["UMAP / t-SNE / clustering"][0] is True


def test_capabilities_on_metal_tell_the_truth_per_task(resolved: Resolved,
                                                       kinds: dict[str, Accelerator]) -> None:
    resolved(kinds["mps"])
    by_task = {task: (flag, detail) for task, flag, detail in accelerator.capabilities()}
    seg_flag, seg = by_task["Segmentation (Cellpose)"]
    assert seg_flag and "float32 weights" in seg and "flow-error pass runs on the CPU" in seg
    train_flag, train = by_task["Model training"]
    assert train_flag and "no mixed precision" in train and "float64 stays on the CPU" in train
    assert "fall back to the CPU" in by_task["Model inference / classification"][1]
    # The second half of the seed's point: Metal accelerates Cellpose, never cuML.
    assert by_task["UMAP / t-SNE / clustering"] == (False, "CPU: cuML is built for NVIDIA CUDA only")


def test_capabilities_on_rocm_keep_cuml_on_the_cpu(resolved: Resolved, kinds: dict[str, Accelerator]) -> None:
    resolved(kinds["rocm"])
    by_task = {task: flag for task, flag, _ in accelerator.capabilities()}
    assert by_task["Segmentation (Cellpose)"] and not by_task["UMAP / t-SNE / clustering"]


def test_capabilities_of_an_unusable_device_say_it_was_found(kinds: dict[str, Accelerator]) -> None:
    found = _probers._off_device(kinds["mps-unusable"])
    rows = accelerator.capabilities(found)
    assert rows[0][1] is False
    # Found, said once per row; the reason is the device note's, not repeated on every row.
    assert rows[0][2].endswith("; Intel Iris Plus Graphics is found, not used")
    assert found.note not in rows[0][2]


def test_capabilities_name_the_backend_for_each_primitive(kinds: dict[str, Accelerator]) -> None:
    by_task = {task: (flag, detail) for task, flag, detail in accelerator.capabilities(kinds["cuda"])}
    for task in ("Peak finding (maximum_filter)", "Spectral unmixing (matmul)",
                 "Cell matching (nearest_neighbours)"):
        flag, detail = by_task[task]
        # torch and cupy are blocked in these tests, so NumPy runs it, and the blocks are named.
        assert flag is False
        assert detail.startswith("numpy backend, on the CPU")
        assert "torch: blocked" in detail and "cupy: blocked" in detail


def test_capabilities_with_a_given_accelerator_neither_resolve_nor_probe(
        plug: Plug, prober_class: Any, kinds: dict[str, Accelerator]) -> None:
    prober = plug(prober_class(kinds["cuda"]), "fake")
    rows = accelerator.capabilities(kinds["xpu"])
    assert prober.calls == []  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record
    assert _machine._CACHE.accelerator is None
    assert rows[0] == ("Segmentation (Cellpose)", True, "on Intel Arc A770")


def test_plugins_append_capability_rows_and_broken_ones_are_skipped(
        plug: Plug, kinds: dict[str, Accelerator]) -> None:
    class Rows:
        def __init__(self, rows: Any) -> None:
            self.rows = rows
            self.seen: list[Accelerator] = []

        @hookimpl
        def spacr_accel_capabilities(self, found: Accelerator) -> Any:
            self.seen.append(found)
            if isinstance(self.rows, BaseException):
                raise self.rows
            return self.rows

    good = plug(Rows([("Live backdrop", True, "GPU shader"), ("bad", "yes", "x"), ("short",)]), "a")
    plug(Rows(ValueError("no GL")), "b")
    plug(Rows([("Stitching", False, "CPU")]), "c")
    rows = accelerator.capabilities(kinds["cuda"])
    assert rows[-2:] == (("Live backdrop", True, "GPU shader"), ("Stitching", False, "CPU"))
    assert good.seen == [kinds["cuda"]]  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record


@given(accelerators)
def test_capabilities_never_raise_and_keep_their_shape(found: Accelerator) -> None:
    rows = accelerator.capabilities(found)
    assert all(isinstance(t, str) and isinstance(a, bool) and isinstance(d, str) for t, a, d in rows)
    by_task = {task: flag for task, flag, _ in rows}
    assert by_task["UMAP / t-SNE / clustering"] == found.is_cuda
    assert by_task["Segmentation (Cellpose)"] == found.is_gpu


def test_empty_cache_on_the_cpu_does_nothing(plug: Plug) -> None:
    class Emptier:
        calls = 0

        @hookimpl
        def spacr_accel_empty_cache(self, torch: Any, found: Accelerator) -> str:
            Emptier.calls += 1
            return "should not run"

    plug(Emptier(), "emptier")
    assert accelerator.empty_cache() == ""
    assert Emptier.calls == 0


def test_empty_cache_returns_the_call_made_and_skips_broken_plugins(
        plug: Plug, prober_class: Any, kinds: dict[str, Accelerator]) -> None:
    class Emptier:
        def __init__(self, answer: Any) -> None:
            self.answer = answer
            self.seen: list[tuple[Any, Accelerator]] = []

        @hookimpl
        def spacr_accel_empty_cache(self, torch: Any, found: Accelerator) -> Any:
            self.seen.append((torch, found))
            if isinstance(self.answer, BaseException):
                raise self.answer
            return self.answer

    prober = plug(prober_class(kinds["rocm"]), "fake")
    plug(Emptier(OSError("driver gone")), "a")
    plug(Emptier(None), "b")
    last = plug(Emptier("torch.cuda.empty_cache()"), "c")
    assert accelerator.empty_cache() == "torch.cuda.empty_cache()"
    assert last.seen == [(None, kinds["rocm"])]  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record
    # With a handle of its own, the caller is answered about THAT torch, metadata only.
    stand_in = types.SimpleNamespace()
    assert accelerator.empty_cache(stand_in) == "torch.cuda.empty_cache()"
    assert prober.calls[-1] == (stand_in, False, True)  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record
    assert last.seen[-1] == (stand_in, kinds["rocm"])  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record


def test_empty_cache_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(refresh: bool = False) -> Accelerator:
        raise MemoryError("nothing left")

    monkeypatch.setattr(accelerator, "resolve", broken)
    monkeypatch.setattr(_machine, "resolve", broken)  # where the memory report reads it
    assert accelerator.empty_cache() == ""
