"""The torch backend against the process it runs in: precision settings someone else made (TF32,
bfloat16), read-only input arrays, an older torch without ``torch.OutOfMemoryError``, and the
per-call cost of finding the device.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

from spacr_accel_core import BackendOutOfMemory, accelerator, ops, toolkit
from spacr_accel_core.accelerator import Accelerator
from spacr_accel_core.testing import reference_matmul, reference_maximum_filter, reference_nearest
from spacr_accel_torch import _filters_kernels, _neighbours_kernels, _products_kernels, _runtime

CPU = _runtime.Device(torch.device("cpu"), True)
NO_DOUBLES = _runtime.Device(torch.device("cpu"), False)


@pytest.fixture
def precision() -> Iterator[None]:
    """Whatever a test does to torch's float32 matmul settings is undone after it."""
    saved = _runtime._precision_settings(torch)
    yield
    _runtime._apply(torch, saved)
    assert _runtime._precision_settings(torch) == saved


def set_precision(value: str) -> None:
    torch.set_float32_matmul_precision(value)


# ---- TF32 and bfloat16: the unit roundoff the product really has --------------------------------


def test_the_gemm_unit_follows_the_process_settings(precision: None) -> None:
    assert _runtime.float32_gemm_unit() == _runtime.IEEE_UNIT
    torch.backends.cuda.matmul.allow_tf32 = True
    assert _runtime.float32_gemm_unit() == _runtime.TF32_UNIT
    torch.backends.cuda.matmul.allow_tf32 = False
    assert _runtime.float32_gemm_unit() == _runtime.IEEE_UNIT
    set_precision("high")
    assert _runtime.float32_gemm_unit() == _runtime.TF32_UNIT
    set_precision("medium")
    assert _runtime.float32_gemm_unit() == _runtime.BF16_UNIT
    set_precision("highest")
    assert _runtime.float32_gemm_unit() == _runtime.IEEE_UNIT


def test_a_setting_torch_refuses_to_report_counts_as_the_worst(monkeypatch: pytest.MonkeyPatch) -> None:
    def mixed() -> str:
        raise RuntimeError("you have used mix of the legacy and new APIs to set the matmul precision")

    monkeypatch.setattr(torch, "get_float32_matmul_precision", mixed)
    assert _runtime.float32_gemm_unit() == _runtime.BF16_UNIT


def test_an_older_torch_with_only_the_legacy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch before 2.9 has no ``fp32_precision``: the legacy getters alone decide."""
    legacy = type("Torch", (), {
        "get_float32_matmul_precision": staticmethod(lambda: "high"),
        "backends": type("Backends", (), {"cuda": type("Cuda", (), {
            "matmul": type("Matmul", (), {"allow_tf32": True})})}),
    })
    assert _runtime._precision_settings(legacy) == {"legacy": "high", "allow_tf32": "True"}


def test_the_search_product_moves_to_float64_or_widens_its_margin(precision: None) -> None:
    """The margin-selection logic, on the CPU, with the flags a training script would set."""
    ieee64 = float(np.finfo(np.float64).eps) / 2
    assert _neighbours_kernels._gemm_plan(torch.float32, CPU) == (torch.float32, _runtime.IEEE_UNIT)
    assert _neighbours_kernels._gemm_plan(torch.float64, CPU) == (torch.float64, ieee64)
    torch.backends.cuda.matmul.allow_tf32 = True
    assert _neighbours_kernels._gemm_plan(torch.float32, CPU) == (torch.float64, ieee64)  # doubles: no TF32
    assert _neighbours_kernels._gemm_plan(torch.float32, NO_DOUBLES) == (torch.float32, _runtime.TF32_UNIT)
    set_precision("medium")
    assert _neighbours_kernels._gemm_plan(torch.float32, NO_DOUBLES) == (torch.float32, _runtime.BF16_UNIT)
    assert _neighbours_kernels._gemm_plan(torch.float64, NO_DOUBLES)[0] == torch.float64


def tf32_gemm(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """A float32 product as tensor cores run it under TF32: inputs truncated to 10 mantissa bits."""
    if left.dtype != torch.float32:
        return left @ right

    def truncate(values: torch.Tensor) -> torch.Tensor:
        return (values.contiguous().view(torch.int32) & ~0x1FFF).view(torch.float32)

    return truncate(left) @ truncate(right)


def wide_points() -> tuple[np.ndarray, np.ndarray]:
    """Spread-out sources, each with two targets close by: the product's rounding error (relative
    to the spread) is far larger than the gap between those two under TF32, not under IEEE."""
    rng = np.random.default_rng(31)
    source = rng.uniform(-100, 100, (400, 16)).astype(np.float32)
    near = np.concatenate([source[:150], source[:150]])
    target = (near + rng.standard_normal(near.shape) * 0.3).astype(np.float32)
    return source, target


def test_the_simulated_tf32_product_does_break_an_ieee_margin(monkeypatch: pytest.MonkeyPatch,
                                                              precision: None) -> None:
    """The check below can fail: a TF32-rounded product behind an IEEE-sized margin (the flags
    claiming IEEE, as an unpatched detection would) picks wrong neighbours on these points."""
    monkeypatch.setattr(_neighbours_kernels, "_gemm", tf32_gemm)
    source, target = wide_points()
    index, _ = _neighbours_kernels.nearest(source, target, 4096, CPU)
    assert not np.array_equal(index, reference_nearest(source, target)[0])


@pytest.mark.parametrize("device", [CPU, NO_DOUBLES], ids=["float64-device", "no-float64-device"])
def test_nearest_stays_exact_when_the_process_allowed_tf32(monkeypatch: pytest.MonkeyPatch,
                                                           precision: None, device: _runtime.Device) -> None:
    monkeypatch.setattr(_neighbours_kernels, "_gemm", tf32_gemm)
    torch.backends.cuda.matmul.allow_tf32 = True
    source, target = wide_points()
    index, distance = _neighbours_kernels.nearest(source, target, 4096, device)
    expected = reference_nearest(source, target)
    assert np.array_equal(index, expected[0]) and np.array_equal(distance, expected[1])


def test_matmul_runs_with_ieee_products_and_gives_the_setting_back(monkeypatch: pytest.MonkeyPatch,
                                                                   precision: None) -> None:
    seen: list[float] = []
    product = _products_kernels._product

    def spy(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        seen.append(_runtime.current_float32_gemm_unit())
        return product(first, second)

    monkeypatch.setattr(_products_kernels, "_product", spy)
    set_precision("high")
    first = np.random.default_rng(3).standard_normal((50, 20)).astype(np.float32)
    got = _products_kernels.matmul(first, first.T.copy(), CPU)
    assert seen and set(seen) == {_runtime.IEEE_UNIT}
    assert torch.get_float32_matmul_precision() == "high"  # the user's choice, given back
    assert np.allclose(got, first @ first.T, rtol=1e-5, atol=1e-5)


def test_overlapping_calls_restore_once_and_a_change_made_meanwhile_wins(precision: None) -> None:
    set_precision("high")
    with _runtime.ieee_float32():
        with _runtime.ieee_float32():  # a second thread's call, overlapping
            assert _runtime.current_float32_gemm_unit() == _runtime.IEEE_UNIT
        assert _runtime.current_float32_gemm_unit() == _runtime.IEEE_UNIT  # the first call still runs
    assert torch.get_float32_matmul_precision() == "high"
    with _runtime.ieee_float32():
        set_precision("medium")  # the user changes it while our call runs
    assert torch.get_float32_matmul_precision() == "medium"


def test_a_search_planned_inside_another_calls_window_still_sees_tf32(precision: None) -> None:
    """A matmul in another thread holds IEEE only until it ends: a search planned meanwhile must
    plan for the TF32 that comes back, or its later products break an IEEE-sized margin."""
    torch.backends.cuda.matmul.allow_tf32 = True
    with _runtime.ieee_float32():
        assert _runtime.current_float32_gemm_unit() == _runtime.IEEE_UNIT
        assert _runtime.float32_gemm_unit() == _runtime.TF32_UNIT
        assert _neighbours_kernels._gemm_plan(torch.float32, CPU)[0] == torch.float64
    assert _runtime.float32_gemm_unit() == _runtime.TF32_UNIT
    torch.backends.cuda.matmul.allow_tf32 = False
    assert _runtime.float32_gemm_unit() == _runtime.IEEE_UNIT


def test_threads_share_the_ieee_window(precision: None) -> None:
    set_precision("high")
    inside = threading.Barrier(4)
    seen: list[float] = []

    def call() -> None:
        with _runtime.ieee_float32():
            inside.wait(timeout=30)
            seen.append(_runtime.current_float32_gemm_unit())
            inside.wait(timeout=30)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [_runtime.IEEE_UNIT] * 4
    assert torch.get_float32_matmul_precision() == "high"


# ---- read-only inputs ----------------------------------------------------------------------------


def frozen(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array)
    array.setflags(write=False)
    return array


@pytest.mark.parametrize("device", [CPU, NO_DOUBLES], ids=["float64-device", "no-float64-device"])
def test_read_only_inputs_raise_no_warning(device: _runtime.Device, monkeypatch: pytest.MonkeyPatch) -> None:
    # torch warns only ONCE per process, so the warning filter alone would pass whenever another
    # test had already spent that warning: torch.from_numpy itself must never see such an array.
    from_numpy = torch.from_numpy

    def writeable_only(array: np.ndarray) -> torch.Tensor:
        assert array.flags.writeable, "torch.from_numpy was handed a read-only array"
        return from_numpy(array)

    monkeypatch.setattr(torch, "from_numpy", writeable_only)
    rng = np.random.default_rng(8)
    field = frozen(rng.standard_normal((60, 40)).astype(np.float32))
    square = frozen(rng.standard_normal((30, 30)).astype(np.float32))
    wide = frozen(rng.standard_normal((70, 64)).astype(np.float64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(_filters_kernels._filter_in_tiles(field, 5, device), reference_maximum_filter(field, 5))
        assert np.array_equal(_filters_kernels._filter_in_stripes(field, 5, device), reference_maximum_filter(field, 5))
        assert np.allclose(_products_kernels.matmul(square, square, device), square @ square, rtol=1e-5, atol=1e-5)
        assert np.allclose(_products_kernels.matmul(square[0], square, device), square[0] @ square,
                           rtol=1e-5, atol=1e-5)
        assert np.allclose(_products_kernels.matmul(wide, wide.T, device), wide @ wide.T, rtol=1e-5, atol=1e-4)
        for width in (2, 12):
            source = frozen(rng.uniform(0, 50, (200, width)).astype(np.float32))
            target = frozen(rng.uniform(0, 50, (150, width)).astype(np.float32))
            index, distance = _neighbours_kernels.nearest(source, target, 64, device)
            expected = reference_nearest(source, target)
            assert np.array_equal(index, expected[0]) and np.array_equal(distance, expected[1])
        assert np.array_equal(ops.maximum_filter(field, 3, backend="torch"), reference_maximum_filter(field, 3))
        ops.matmul(square, square, backend="torch")
        ops.nearest_neighbours(square, square, backend="torch")


def test_a_writeable_input_is_shared_not_copied() -> None:
    array = np.arange(6, dtype=np.float32)
    assert _runtime.tensor(array).data_ptr() == array.ctypes.data
    assert _runtime.tensor(frozen(array.copy())).data_ptr() != array.ctypes.data


# ---- an older torch: no torch.OutOfMemoryError -----------------------------------------------------


def test_out_of_memory_is_recognised_without_torch_out_of_memory_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(torch, "OutOfMemoryError")
    monkeypatch.delattr(torch.cuda, "OutOfMemoryError")
    assert _runtime.is_out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not _runtime.is_out_of_memory(ValueError("a bug"))  # an answer, not an AttributeError
    assert not _runtime.is_out_of_memory(RuntimeError("shape mismatch"))
    bug = TypeError("a bug")
    assert _runtime.translate(bug, "matmul") is bug
    assert isinstance(_runtime.translate(RuntimeError("HIP out of memory"), "x"), BackendOutOfMemory)


def test_torch_cuda_out_of_memory_error_alone_is_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    class CudaOutOfMemory(RuntimeError):
        """torch 1.13-2.4 had only ``torch.cuda.OutOfMemoryError``."""

    monkeypatch.delattr(torch, "OutOfMemoryError")
    monkeypatch.setattr(torch.cuda, "OutOfMemoryError", CudaOutOfMemory)
    assert _runtime.is_out_of_memory(CudaOutOfMemory("allocation refused"))  # by class, no words
    assert not _runtime.is_out_of_memory(KeyError("x"))


def test_tiles_retry_on_an_older_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(torch, "OutOfMemoryError")
    monkeypatch.delattr(torch.cuda, "OutOfMemoryError")
    sizes: list[int] = []
    tile = _filters_kernels._device_tile

    def flaky(*args: Any) -> None:
        sizes.append(args[3] - args[2])
        if args[3] - args[2] > 40:
            raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB")
        tile(*args)

    monkeypatch.setattr(_filters_kernels, "_device_tile", flaky)
    field = np.random.default_rng(5).standard_normal((100, 30)).astype(np.float32)
    assert np.array_equal(_filters_kernels._filter_in_tiles(field, 5, CPU), reference_maximum_filter(field, 5))
    assert sizes[:3] == [100, 50, 25]


# ---- the device, found once per resolved accelerator -----------------------------------------------


def test_target_is_built_once_per_resolved_accelerator(monkeypatch: pytest.MonkeyPatch) -> None:
    first = _runtime.target()
    assert _runtime.target() is first  # the same object: nothing rebuilt per call
    other = Accelerator(kind="cpu", device="cpu", label="CPU", note="a refreshed answer")
    monkeypatch.setattr(toolkit, "resolve", lambda refresh=False: other)
    second = _runtime.target()
    assert second is not first and second == _runtime.Device(torch.device("cpu"), True)
    assert _runtime.target() is second


# ---- on a card -------------------------------------------------------------------------------------


def _on_cuda() -> bool:
    return accelerator.resolve().kind in ("cuda", "rocm")


@pytest.mark.skipif(not _on_cuda(), reason="needs a CUDA or ROCm card torch can drive (none resolved here)")
def test_on_the_card_with_tf32_allowed_results_stay_exact_and_ieee(precision: None) -> None:
    torch.backends.cuda.matmul.allow_tf32 = True
    source, target = wide_points()
    index, distance = ops.nearest_neighbours(source, target, backend="torch")
    expected = reference_nearest(source, target)
    assert np.array_equal(index, expected[0]) and np.array_equal(distance, expected[1])
    first = np.random.default_rng(4).uniform(-1, 1, (256, 512)).astype(np.float32)
    second = np.random.default_rng(5).uniform(-1, 1, (512, 128)).astype(np.float32)
    product, tolerance = reference_matmul(first, second)
    assert np.all(np.abs(ops.matmul(first, second, backend="torch") - product) <= tolerance)
    assert torch.backends.cuda.matmul.allow_tf32  # the process's choice, given back
