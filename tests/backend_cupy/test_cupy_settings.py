"""The CuPy backend against the process it runs in: ``CUPY_TF32`` and CuPy's compute types, the
kit and the error classes built once per process (and afresh in a forked child)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from spacr_accel_core import BackendUnavailable
from spacr_accel_core.testing import reference_nearest
from spacr_accel_cupy import _kit, _neighbours_kernels, _products_kernels

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
KIT = _kit.numpy_kit()


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    _kit._CACHE.reset()
    yield
    _kit._CACHE.reset()


# ---- CuPy's compute type: the unit roundoff its products really have ---------------------------------


class Linalg:
    """Stands in for ``cupy._core._routines_linalg``: compute types per dtype, and the constants."""

    COMPUTE_TYPE_TBD, COMPUTE_TYPE_DEFAULT, COMPUTE_TYPE_PEDANTIC = 0, 1, 2
    COMPUTE_TYPE_FP16, COMPUTE_TYPE_FP32, COMPUTE_TYPE_FP64 = 3, 4, 5
    COMPUTE_TYPE_BF16, COMPUTE_TYPE_TF32 = 6, 7

    def __init__(self, float32: int = 1, float64: int = 1, *, broken: bool = False) -> None:
        self.types = {F32: float32, F64: float64}
        self.broken = broken

    def get_compute_type(self, dtype: Any) -> int:
        if self.broken:
            raise RuntimeError("cudaErrorInsufficientDriver")  # what a machine without a card says
        return self.types[np.dtype(dtype)]

    def set_compute_type(self, dtype: Any, code: int) -> None:
        self.types[np.dtype(dtype)] = code


def test_the_gemm_unit_follows_the_compute_type(monkeypatch: pytest.MonkeyPatch) -> None:
    ieee32, ieee64 = _kit.ieee_unit(F32), _kit.ieee_unit(F64)
    assert (ieee32, ieee64) == (2.0 ** -24, 2.0 ** -53)
    assert _kit.cupy_gemm_unit(Linalg(), F32) == ieee32
    assert _kit.cupy_gemm_unit(Linalg(float32=2), F32) == ieee32  # pedantic
    assert _kit.cupy_gemm_unit(Linalg(float32=7), F32) == 2.0 ** -10  # TF32
    assert _kit.cupy_gemm_unit(Linalg(float32=6), F32) == 2.0 ** -7  # bfloat16
    assert _kit.cupy_gemm_unit(Linalg(float32=3), F32) == 2.0 ** -7  # float16
    assert _kit.cupy_gemm_unit(Linalg(float64=4), F64) == ieee32  # doubles computed in float32
    assert _kit.cupy_gemm_unit(Linalg(float64=5), F64) == ieee64
    assert _kit.cupy_gemm_unit(None, F32) == ieee32
    # Where CuPy cannot be asked (it reads the card's compute capability first), CUPY_TF32 decides.
    monkeypatch.setenv("CUPY_TF32", "1")
    assert _kit.cupy_gemm_unit(Linalg(broken=True), F32) == 2.0 ** -10
    assert _kit.cupy_gemm_unit(Linalg(broken=True), F64) == ieee64
    monkeypatch.setenv("CUPY_TF32", "0")
    assert _kit.cupy_gemm_unit(Linalg(broken=True), F32) == ieee32


def test_cupy_tf32_in_a_fresh_process_is_seen() -> None:
    """The real CuPy, imported with ``CUPY_TF32=1``: TF32 (on a card it has it from Ampere on)."""
    code = ("import importlib, numpy as np; from spacr_accel_cupy import _kit; "
            "linalg = importlib.import_module('cupy._core._routines_linalg'); "
            "print(_kit.cupy_gemm_unit(linalg, np.dtype(np.float32)))")
    environment = dict(os.environ, CUPY_TF32="1")
    done = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True,
                          timeout=300, check=True)
    assert float(done.stdout.strip()) in (2.0 ** -10, 2.0 ** -24)  # -24 only on a pre-Ampere card
    if _no_card():
        assert float(done.stdout.strip()) == 2.0 ** -10


def _no_card() -> bool:
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount()) < 1
    except Exception:
        return True


def test_the_search_product_moves_to_float64_when_float32_is_reduced() -> None:
    """The margin-selection logic: the unit roundoff the chosen product really has."""
    def kit(linalg: Linalg) -> _kit.Kit:
        return _kit.Kit("numpy", np, KIT.ndimage, np.asarray, np.asarray, lambda: None, lambda: None,
                        lambda dtype: _kit.cupy_gemm_unit(linalg, np.dtype(dtype)))

    assert _neighbours_kernels._gemm_plan(KIT, F32) == (F32, 2.0 ** -24)
    assert _neighbours_kernels._gemm_plan(KIT, F64) == (F64, 2.0 ** -53)
    assert _neighbours_kernels._gemm_plan(kit(Linalg(float32=7)), F32) == (F64, 2.0 ** -53)
    assert _neighbours_kernels._gemm_plan(kit(Linalg(float32=7, float64=4)), F32) == (F64, 2.0 ** -24)  # widened


class Tf32Numpy:
    """NumPy whose float32 matrix product truncates its inputs to TF32's 10 mantissa bits."""

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    @staticmethod
    def matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        if first.dtype == np.float32:
            first = (first.view(np.int32) & ~0x1FFF).view(np.float32)
            second = (np.ascontiguousarray(second).view(np.int32) & ~0x1FFF).view(np.float32)
        product: np.ndarray = np.matmul(first, second)
        return product


def tf32_kit(honest: bool) -> _kit.Kit:
    def unit(dtype: np.dtype) -> float:
        return 2.0 ** -10 if honest and np.dtype(dtype) == F32 else _kit.ieee_unit(np.dtype(dtype))

    return _kit.Kit("numpy", Tf32Numpy(), KIT.ndimage, np.asarray, np.asarray,  # type: ignore[arg-type]  # a module stand-in
                    lambda: None, lambda: None, unit)


def wide_points() -> tuple[np.ndarray, np.ndarray]:
    """Spread-out sources, each with two targets close by: TF32's rounding error (relative to the
    spread) is far larger than the gap between the two."""
    rng = np.random.default_rng(31)
    source = rng.uniform(-100, 100, (400, 16)).astype(np.float32)
    near = np.concatenate([source[:150], source[:150]])
    return source, (near + rng.standard_normal(near.shape) * 0.3).astype(np.float32)


def test_the_simulated_tf32_product_does_break_an_ieee_margin() -> None:
    """The check below can fail: a TF32 product behind an IEEE-sized margin picks wrong neighbours."""
    source, target = wide_points()
    index, _ = _neighbours_kernels.nearest(tf32_kit(honest=False), source, target, 4096)
    assert not np.array_equal(index, reference_nearest(source, target)[0])


def test_nearest_stays_exact_under_tf32() -> None:
    source, target = wide_points()
    for chunk in (64, 4096):
        index, distance = _neighbours_kernels.nearest(tf32_kit(honest=True), source, target, chunk)
        expected = reference_nearest(source, target)
        assert np.array_equal(index, expected[0]) and np.array_equal(distance, expected[1])


def test_the_ieee_context_sets_the_default_and_gives_the_setting_back() -> None:
    linalg = Linalg(float32=Linalg.COMPUTE_TYPE_TF32)
    state = _kit._IeeeState()
    with _kit.cupy_ieee(linalg, state):
        assert linalg.types[F32] == Linalg.COMPUTE_TYPE_DEFAULT
        with _kit.cupy_ieee(linalg, state):  # an overlapping call
            pass
        assert linalg.types[F32] == Linalg.COMPUTE_TYPE_DEFAULT  # the first call still runs
    assert linalg.types[F32] == Linalg.COMPUTE_TYPE_TF32
    with _kit.cupy_ieee(linalg, state):
        linalg.set_compute_type(F32, Linalg.COMPUTE_TYPE_BF16)  # someone changes it meanwhile
    assert linalg.types[F32] == Linalg.COMPUTE_TYPE_BF16  # their change wins
    untouched = Linalg()
    with _kit.cupy_ieee(untouched, state):
        assert untouched.types == {F32: 1, F64: 1}


def test_a_search_planned_inside_another_calls_window_still_sees_tf32() -> None:
    """A matmul in another thread holds the default only until it ends: a search planned meanwhile
    must plan for the TF32 that comes back."""
    linalg = Linalg(float32=Linalg.COMPUTE_TYPE_TF32)
    state = _kit._IeeeState()
    kit = _kit.Kit("numpy", np, KIT.ndimage, np.asarray, np.asarray, lambda: None, lambda: None,
                   lambda dtype: _kit.cupy_gemm_unit(linalg, np.dtype(dtype), state))
    with _kit.cupy_ieee(linalg, state):
        assert _kit.cupy_gemm_unit(linalg, F32) == 2.0 ** -24  # the product now
        assert kit.gemm_unit(F32) == 2.0 ** -10  # what may come back mid-search
        assert _neighbours_kernels._gemm_plan(kit, F32)[0] == F64
    assert kit.gemm_unit(F32) == 2.0 ** -10
    linalg.set_compute_type(F32, Linalg.COMPUTE_TYPE_DEFAULT)
    assert _neighbours_kernels._gemm_plan(kit, F32) == (F32, 2.0 ** -24)


def test_matmul_runs_inside_the_kits_ieee_context() -> None:
    inside: list[bool] = []
    active = [False]

    class Ieee:
        def __enter__(self) -> None:
            active[0] = True

        def __exit__(self, *exc: object) -> None:
            active[0] = False

    class Spy:
        def __getattr__(self, name: str) -> Any:
            return getattr(np, name)

        @staticmethod
        def matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
            inside.append(active[0])
            product: np.ndarray = np.matmul(first, second)
            return product

    kit = _kit.Kit("numpy", Spy(), KIT.ndimage, np.asarray, np.asarray,  # type: ignore[arg-type]  # a module stand-in
                   lambda: None, lambda: None, _kit.ieee_unit, Ieee)
    first = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert np.array_equal(_products_kernels.matmul(kit, first, first.T), first @ first.T)
    assert inside and all(inside) and not active[0]


# ---- built once per process ------------------------------------------------------------------------


def stand_in_cupy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A CuPy with one card, in sys.modules; returns the list its device count appends to."""
    asked: list[int] = []

    def count() -> int:
        asked.append(1)
        return 1

    cupy = types.ModuleType("cupy")
    runtime = types.SimpleNamespace(getDeviceCount=count, memGetInfo=lambda: (1 << 30, 2 << 30))
    cupy.cuda = types.SimpleNamespace(runtime=runtime)  # type: ignore[attr-defined]  # a stand-in CuPy module: the test gives it its attributes
    cupy.get_default_memory_pool = lambda: types.SimpleNamespace(  # type: ignore[attr-defined]  # a stand-in CuPy module: the test gives it its attributes
        free_bytes=lambda: 0, free_all_blocks=lambda: None)
    cupy.asarray = np.asarray  # type: ignore[attr-defined]  # a stand-in CuPy module: the test gives it its attributes
    cupy.asnumpy = np.asarray  # type: ignore[attr-defined]  # a stand-in CuPy module: the test gives it its attributes
    cupyx = types.ModuleType("cupyx")
    scipy = types.ModuleType("cupyx.scipy")
    ndimage = types.ModuleType("cupyx.scipy.ndimage")
    cupyx.scipy = scipy  # type: ignore[attr-defined]  # a stand-in CuPy module: the test gives it its attributes
    scipy.ndimage = ndimage  # type: ignore[attr-defined]  # a stand-in CuPy module: the test gives it its attributes
    for name, module in (("cupy", cupy), ("cupyx", cupyx), ("cupyx.scipy", scipy),
                         ("cupyx.scipy.ndimage", ndimage), ("cupy._core", None),
                         ("cupy._core._routines_linalg", None)):
        monkeypatch.setitem(sys.modules, name, module)
    return asked


def test_the_kit_is_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = stand_in_cupy(monkeypatch)
    first = _kit.cupy_kit()
    assert _kit.cupy_kit() is first and asked == [1]
    barrier = threading.Barrier(8)
    kits: list[_kit.Kit] = []

    def call() -> None:
        barrier.wait(timeout=30)
        kits.append(_kit.cupy_kit())

    _kit._CACHE.reset()
    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(kits) == 8 and all(kit is kits[0] for kit in kits)
    assert asked == [1, 1]  # once before the reset, once for all eight threads after it


def test_a_failure_is_not_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(BackendUnavailable):
        _kit.cupy_kit()
    asked = stand_in_cupy(monkeypatch)
    assert _kit.cupy_kit().name == "cupy" and asked == [1]


def test_vendor_errors_are_looked_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    imported: list[str] = []
    real = importlib.import_module

    def counting(name: str) -> Any:
        imported.append(name)
        return real(name)

    monkeypatch.setattr(_kit, "importlib", types.SimpleNamespace(import_module=counting))
    first = _kit._vendor_errors()
    assert imported
    count = len(imported)
    bug = IndexError("a bug")
    for _ in range(3):
        assert _kit._vendor_errors() is first
        assert _kit.translate(bug, "matmul") is bug
        assert not _kit.is_out_of_memory(bug)
    assert len(imported) == count


def cached() -> bool:
    return _kit._CACHE.vendor is not None or _kit._CACHE.kit is not None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_afresh() -> None:
    _kit._vendor_errors()
    assert cached()
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only, and leave at once
        os._exit(1 if cached() else 0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert cached()  # the parent keeps its cache


# ---- on the card -----------------------------------------------------------------------------------


@pytest.mark.skipif(_no_card(), reason="needs a CUDA device that CuPy can reach")
def test_on_the_card_with_tf32_results_stay_exact_and_ieee() -> None:
    from spacr_accel_core import ops
    from spacr_accel_core.testing import reference_matmul

    linalg: Any = importlib.import_module("cupy._core._routines_linalg")
    saved = int(linalg.get_compute_type(np.float32))
    linalg.set_compute_type(np.float32, linalg.COMPUTE_TYPE_TF32)
    try:
        tf32 = int(linalg.get_compute_type(np.float32)) == linalg.COMPUTE_TYPE_TF32  # Ampere on
        assert _kit.cupy_kit().gemm_unit(F32) == (2.0 ** -10 if tf32 else 2.0 ** -24)
        source, target = wide_points()
        index, distance = ops.nearest_neighbours(source, target, backend="cupy")
        expected = reference_nearest(source, target)
        assert np.array_equal(index, expected[0]) and np.array_equal(distance, expected[1])
        first = np.random.default_rng(4).uniform(-1, 1, (256, 512)).astype(np.float32)
        second = np.random.default_rng(5).uniform(-1, 1, (512, 128)).astype(np.float32)
        product, tolerance = reference_matmul(first, second)
        assert np.all(np.abs(ops.matmul(first, second, backend="cupy") - product) <= tolerance)
        assert int(linalg.get_compute_type(np.float32)) == (linalg.COMPUTE_TYPE_TF32 if tf32 else
                                                            linalg.COMPUTE_TYPE_DEFAULT)
    finally:
        linalg.set_compute_type(np.float32, saved)
