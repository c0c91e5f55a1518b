"""The decode chain's filters on every backend, compared with SciPy itself, bit for bit.

Each backend is forced by name (a silent fall-through would test another one) and its answer is
compared with ``scipy.ndimage`` on the same float32 input: NaN where SciPy has NaN, the same bits
(signed zeros included) everywhere else.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import ndimage

import spacr_accel_core
from spacr_accel_core import ops, reference
from spacr_accel_core.separable import gaussian_weights

BACKENDS = ("numpy", "numba", "torch")
"""Forced by name; CuPy's algorithms are checked on the host through its NumPy kit below."""

_SETTINGS = settings(max_examples=40, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    spacr_accel_core.warm_up("numba", timeout=600)


def same_bits(got: np.ndarray, expected: np.ndarray) -> None:
    """float32, NaN where ``expected`` has NaN, the same bits everywhere else."""
    assert got.dtype == np.float32 and got.shape == expected.shape, (got.dtype, got.shape, expected.shape)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan), "NaN in other places"
    differ = got.view(np.uint32)[~nan] != expected.view(np.uint32)[~nan]
    assert not differ.any(), f"{int(differ.sum())} pixels differ, e.g. {got[~nan][differ][:4]} vs " \
                             f"{expected[~nan][differ][:4]}"


def scipy_gaussian(field: np.ndarray, sigma: Any, truncate: float, mode: str, laplace: bool) -> np.ndarray:
    data = np.asarray(field).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        if not laplace:
            return ndimage.gaussian_filter(data, sigma, mode=mode, truncate=truncate, axes=(-2, -1))
        planes = data.reshape(-1, *data.shape[-2:])
        return np.stack([ndimage.gaussian_laplace(p, sigma, mode=mode, truncate=truncate)
                         for p in planes]).reshape(data.shape)


def scipy_extreme(field: np.ndarray, size: int, mode: str, minimum: bool) -> np.ndarray:
    """SciPy's filter with the contract's two rules: a window holding NaN is NaN, a zero is +0.0."""
    data = np.asarray(field).astype(np.float32)
    edge = size + 1 if size % 2 == 0 else max(size, 1)
    window = (1,) * (data.ndim - 2) + (edge, edge)
    run = ndimage.minimum_filter if minimum else ndimage.maximum_filter
    found = run(np.where(np.isnan(data), np.float32(0.0), data), size=window, mode=mode)
    seen = ndimage.maximum_filter(np.isnan(data).astype(np.uint8), size=window, mode=mode) > 0
    return np.where(seen, np.float32(np.nan), found).astype(np.float32) + np.float32(0.0)


@st.composite
def fields(draw: st.DrawFn, stacks: bool = True) -> np.ndarray:
    """Small fields and stacks, down to 1 x 1 (a kernel far wider than the field), with NaN, inf,
    signed zeros and plateaus."""
    lead = draw(st.sampled_from([(), (2,), (2, 1)])) if stacks else ()
    h, w = draw(st.integers(1, 14)), draw(st.integers(1, 14))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    data = (rng.standard_normal((*lead, h, w)) * 100).astype(np.float32)
    data[rng.random(data.shape) < 0.15] = np.float32(-0.0)
    data[rng.random(data.shape) < 0.15] = np.float32(3.0)
    if draw(st.booleans()):
        data.flat[int(rng.integers(data.size))] = np.nan
    if draw(st.booleans()):
        data.flat[int(rng.integers(data.size))] = np.float32(np.inf) * rng.choice([-1, 1])
    kind = draw(st.sampled_from(["float32", "float32", "uint16", "float64"]))
    if kind == "uint16":
        return rng.integers(0, 65535, size=data.shape).astype(np.uint16)
    return data.astype(np.float64) if kind == "float64" else data


sigmas = st.one_of(st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0]),
                   st.tuples(st.sampled_from([0.0, 0.4, 1.0, 2.3]), st.sampled_from([0.0, 0.7, 1.0, 3.0])))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("laplace", [False, True], ids=["gaussian_filter", "gaussian_laplace"])
@_SETTINGS
@given(field=fields(), sigma=sigmas, truncate=st.sampled_from([4.0, 2.0, 0.6, 0.0]),
       mode=st.sampled_from(["reflect", "nearest"]))
def test_gaussian_matches_scipy(backend: str, laplace: bool, field: np.ndarray, sigma: Any, truncate: float,
                                mode: str) -> None:
    run = ops.gaussian_laplace if laplace else ops.gaussian_filter
    before = field.copy()
    got = run(field, sigma, truncate=truncate, mode=mode, backend=backend)
    same_bits(got, scipy_gaussian(field, sigma, truncate, mode, laplace))
    assert np.array_equal(field, before, equal_nan=True), "the input was modified"
    served = spacr_accel_core.last_dispatch()
    assert served is not None and served.backend in (backend, "core"), served


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("minimum", [True, False], ids=["minimum_filter", "maximum_filter"])
@_SETTINGS
@given(field=fields(), size=st.integers(0, 9), mode=st.sampled_from(["reflect", "nearest"]))
def test_window_extremes_match_scipy(backend: str, minimum: bool, field: np.ndarray, size: int, mode: str) -> None:
    run = ops.minimum_filter if minimum else ops.maximum_filter
    got = run(field, size, mode=mode, backend=backend)
    same_bits(got, scipy_extreme(field, size, mode, minimum))
    served = spacr_accel_core.last_dispatch()
    assert served is not None and served.backend in (backend, "core"), served


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_large_stack_into_out(backend: str) -> None:
    """Fields larger than a thread's share, a stack, ``out=``: the paths tiny fields never take."""
    rng = np.random.default_rng(7)
    stack = (rng.standard_normal((3, 300, 517)) * 50).astype(np.float32)
    stack[1, 100, 200] = np.nan
    for laplace in (False, True):
        out = np.full(stack.shape, 7.0, np.float32)
        run = ops.gaussian_laplace if laplace else ops.gaussian_filter
        assert run(stack, (1.0, 2.5), backend=backend, out=out) is out
        same_bits(out, scipy_gaussian(stack, (1.0, 2.5), 4.0, "reflect", laplace))
    for minimum in (True, False):
        run = ops.minimum_filter if minimum else ops.maximum_filter
        same_bits(run(stack, 5, mode="reflect", backend=backend), scipy_extreme(stack, 5, "reflect", minimum))


def test_the_reference_is_scipy() -> None:
    """The plain definitions of :mod:`spacr_accel_core.reference` give SciPy's bits too."""
    rng = np.random.default_rng(3)
    for h, w in ((1, 1), (2, 1), (1, 2), (2, 2), (5, 17), (30, 9)):
        field = (rng.standard_normal((2, h, w)) * 10).astype(np.float32)
        for mode in ("reflect", "nearest"):
            same_bits(reference.gaussian_filter(field, (1.0, 2.0), 4.0, mode),
                      scipy_gaussian(field, (1.0, 2.0), 4.0, mode, False))
            same_bits(reference.gaussian_laplace(field, 1.5, 4.0, mode),
                      scipy_gaussian(field, 1.5, 4.0, mode, True))
            same_bits(reference.minimum_filter(field, 3, mode), scipy_extreme(field, 3, mode, True))


@pytest.mark.parametrize("sigma", [0.3, 1.0, 2.5, 7.7])
@pytest.mark.parametrize("order", [0, 2])
def test_the_weights_are_scipys(sigma: float, order: int) -> None:
    from scipy.ndimage import _filters

    radius = int(4.0 * sigma + 0.5)
    expected = _filters._gaussian_kernel1d(sigma, order, radius)[::-1]
    assert gaussian_weights(sigma, order, radius).tobytes() == np.ascontiguousarray(expected).tobytes()


@pytest.mark.parametrize(("call", "words"), [
    (lambda: ops.gaussian_filter(np.zeros((4, 4)), -1.0), "sigma must not be negative"),
    (lambda: ops.gaussian_filter(np.zeros((4, 4)), np.nan), "sigma must be finite"),
    (lambda: ops.gaussian_filter(np.zeros((4, 4)), (1.0, 2.0, 3.0)), "sigma must be a number or a pair"),
    (lambda: ops.gaussian_laplace(np.zeros((4, 4)), 1.0, truncate=-1), "truncate must not be negative"),
    (lambda: ops.gaussian_laplace(np.zeros((4, 4)), 1.0, truncate=np.inf), "truncate must be finite"),
    (lambda: ops.gaussian_filter(np.zeros((4, 4)), 1.0, mode="wrap"), "mode must be one of"),
    (lambda: ops.minimum_filter(np.zeros((4, 4)), 3, mode="constant"), "mode must be one of"),
    (lambda: ops.maximum_filter(np.zeros((4, 4)), 3, mode="mirror"), "mode must be one of"),
    (lambda: ops.gaussian_filter(np.zeros(4), 1.0), "field must be a 2-D array"),
    (lambda: ops.minimum_filter(np.zeros((4, 4)), -3), "size must be a non-negative"),
])
def test_bad_input_is_named(call: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        call()


@pytest.mark.parametrize(("call", "words"), [
    (lambda: ops.gaussian_filter(np.zeros((4, 4)), "1"), "sigma must be a real number"),
    (lambda: ops.gaussian_filter(np.zeros((4, 4)), True), "sigma must be a real number"),
    (lambda: ops.gaussian_filter(np.zeros((4, 4)), 1.0, mode=3), "mode must be a string"),
    (lambda: ops.gaussian_laplace(np.zeros((4, 4)), 1.0, truncate=None), "truncate must be a real number"),
    (lambda: ops.gaussian_filter(np.zeros((4, 4)), 1.0, out=np.zeros((4, 4))), "out must be float32"),
])
def test_bad_types_are_named(call: Any, words: str) -> None:
    with pytest.raises(TypeError, match=words):
        call()


def test_sigma_zero_is_scipys_copy() -> None:
    """SciPy smooths no axis whose sigma is 0: the filter is a copy and the Laplacian twice the
    field; the core answers those itself, with SciPy's bits."""
    field = np.array([[1.5, -0.0], [np.inf, 2.0]], np.float32)
    same_bits(ops.gaussian_filter(field, 0), scipy_gaussian(field, 0, 4.0, "reflect", False))
    same_bits(ops.gaussian_laplace(field, 0.0), scipy_gaussian(field, 0, 4.0, "reflect", True))
    assert spacr_accel_core.last_dispatch().backend == "core"  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record


# ---- CuPy's algorithms, on the host through its NumPy kit -----------------------------------------


@pytest.mark.parametrize("laplace", [False, True], ids=["gaussian_filter", "gaussian_laplace"])
@_SETTINGS
@given(field=fields(), sigma=sigmas, truncate=st.sampled_from([4.0, 1.3]),
       mode=st.sampled_from(["reflect", "nearest"]))
def test_cupy_kit_gaussian_matches_scipy(laplace: bool, field: np.ndarray, sigma: Any, truncate: float,
                                         mode: str) -> None:
    from spacr_accel_core.kit._separable import SIGMA_SKIPPED
    from spacr_accel_core.operations._checks import sigma_pair
    from spacr_accel_cupy import _filters_kernels, _kit

    pair = sigma_pair(sigma)
    if max(pair) <= SIGMA_SKIPPED:
        return  # the core answers a filter that smooths nothing; no backend is asked
    got = _filters_kernels.gaussian(_kit.numpy_kit(), field.astype(np.float32), pair, truncate, mode, laplace)
    same_bits(got, scipy_gaussian(field, sigma, truncate, mode, laplace))


@_SETTINGS
@given(field=fields(), size=st.integers(3, 9).map(lambda s: s | 1))
def test_cupy_kit_minimum_matches_scipy(field: np.ndarray, size: int) -> None:
    from spacr_accel_cupy import _filters_kernels, _kit

    got = _filters_kernels.minimum_filter(_kit.numpy_kit(), field.astype(np.float32), size)
    for mode in ("reflect", "nearest"):
        same_bits(got, scipy_extreme(field, size, mode, minimum=True))


# ---- a device without float64 -------------------------------------------------------------------


def test_torch_declines_the_gaussian_without_float64() -> None:
    import torch

    from spacr_accel_core import BackendDeclined
    from spacr_accel_torch import _filters_kernels, _runtime

    no_double = _runtime.Device(torch.device("cpu"), float64=False)
    with pytest.raises(BackendDeclined, match="no float64"):
        _filters_kernels.gaussian(np.zeros((4, 4), np.float32), (1.0, 1.0), 4.0, "reflect", False, no_double)


# ---- memory: a stack costs its input, its output and about one field ------------------------------


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("name", ["gaussian_filter", "gaussian_laplace", "minimum_filter"])
def test_a_stack_holds_about_one_field_of_working_memory(backend: str, name: str) -> None:
    """A camera stack filtered into ``out``: what NumPy allocates on the way peaks at a few fields'
    float32 worth (each field cast on its own), never a copy of the stack (sixteen fields)."""
    import tracemalloc

    stack = np.random.default_rng(9).integers(0, 4000, size=(16, 256, 256)).astype(np.uint16)
    out = np.empty(stack.shape, np.float32)
    field_bytes = 256 * 256 * 4
    run = getattr(ops, name)
    argument = 5 if name == "minimum_filter" else 1.5
    run(stack, argument, backend=backend, out=out)  # the first call's lazy imports and kernels
    tracemalloc.start()
    try:
        run(stack, argument, backend=backend, out=out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * field_bytes, f"{peak / field_bytes:.1f} fields of working memory"
