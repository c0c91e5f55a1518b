"""The torch backend serves the neighbour calls' arguments itself: ``k``, ``max_distance`` and
``metric="hamming"``, each path compared with the PLAIN references of
``spacr_accel_core.reference`` (never only with another backend), on the CPU device and on the CPU
posing as a device without float64; what a device cannot do exactly is declined with its reason,
and the CPU multiplies in what it runs natively."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import BackendDeclined, last_dispatch, ops, reference, use
from spacr_accel_core.testing import packed_descriptors
from spacr_accel_torch import _neighbours_kernels, _plugin, _runtime

CPU = _runtime.Device(torch.device("cpu"), True)
NO_DOUBLES = _runtime.Device(torch.device("cpu"), False)
"""The CPU posing as a device that refuses float64 (Metal): the verdict runs on the host."""


@st.composite
def point_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Sets of several blocks: lattices full of ties and copies, clusters beside outliers, extremes."""
    width = draw(st.sampled_from([1, 2, 3, 5]))
    n, m = draw(st.integers(1, 150)), draw(st.integers(1, 250))
    kind = draw(st.sampled_from(["grid", "uniform", "clusters", "huge"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "grid":
        source, target = rng.integers(-3, 4, (n, width)), rng.integers(-3, 4, (m, width))
    elif kind == "uniform":
        source, target = rng.uniform(-50, 50, (n, width)), rng.uniform(-50, 50, (m, width))
    elif kind == "clusters":
        centres = rng.uniform(-100, 100, (3, width))
        source = centres[rng.integers(0, 3, n)] + rng.standard_normal((n, width))
        target = centres[rng.integers(0, 3, m)] + rng.standard_normal((m, width))
        target[: max(1, m // 20)] *= 50
    else:  # float32 squares would overflow: the float64 search
        source, target = rng.uniform(-3e37, 3e37, (n, width)), rng.uniform(-3e37, 3e37, (m, width))
    return source.astype(np.float32), target.astype(np.float32)


@settings(max_examples=40, deadline=None)
@given(points=point_sets(), k=st.integers(1, 6), bound=st.sampled_from([None, 0.0, 1.0, 2.5, 40.0, 1e38]),
       chunk=st.sampled_from([1, 7, 64, 4096]), device=st.sampled_from([CPU, NO_DOUBLES]))
def test_k_nearest_within_a_distance_equals_the_reference(points: tuple[np.ndarray, np.ndarray], k: int,
                                                          bound: float | None, chunk: int,
                                                          device: _runtime.Device) -> None:
    source, target = points
    index, found = _neighbours_kernels.k_nearest(source, target, chunk, k, bound, device)
    expected_index, expected_found = reference.k_nearest(source, target, k, bound)
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(found, expected_found)


@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(["uniform", "lattice", "elongated", "far"]), width=st.integers(1, 3),
       k=st.integers(1, 9), bound=st.sampled_from([None, 0.0, 0.5, 3.0]), seed=st.integers(0, 2**32 - 1))
def test_the_cpu_grid_is_exact_where_it_settles_and_the_rest_goes_to_the_blocks(
        kind: str, width: int, k: int, bound: float | None, seed: int) -> None:
    """Sources near sparse regions, outside the targets' box, on lattices full of equal distances:
    the grid settles what it can prove, the block search the rest, together equal to the reference."""
    rng = np.random.default_rng(seed)
    scale = {"uniform": 40.0, "lattice": 1.0, "elongated": 1.0, "far": 40.0}[kind]
    source = rng.uniform(-10, 10, (300, width)) * scale
    target = rng.uniform(-10, 10, (900, width)) * scale
    if kind == "lattice":
        source, target = np.round(source), np.round(target)
    if kind == "elongated":
        target[:, 0] *= 1000.0
    if kind == "far":
        source[:20] += 1e4  # far beyond every target, outside the grid
    source, target = source.astype(np.float32), target.astype(np.float32)
    index, found = _neighbours_kernels.k_nearest(source, target, 4096, k, bound, CPU)
    expected_index, expected_found = reference.k_nearest(source, target, k, bound)
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(found, expected_found)


def test_the_grid_settles_uniform_points_and_refuses_clusters() -> None:
    rng = np.random.default_rng(12)
    target = rng.uniform(0, 1000, (5000, 2)).astype(np.float32)
    source = rng.uniform(0, 1000, (2000, 2)).astype(np.float32)
    settled = _neighbours_kernels.grid_search(source, target, 4096, 4, np.inf)
    assert settled is not None and settled[2].mean() > 0.95
    clustered = np.vstack([rng.standard_normal((4000, 2)) * 1e-3, rng.uniform(0, 1000, (1000, 2))])
    assert _neighbours_kernels.grid_search(source, clustered.astype(np.float32), 4096, 4, np.inf) is None


def test_copies_of_one_point_give_their_first_k_copies() -> None:
    target = np.zeros((3000, 2), np.float32)
    target[::7] = 1.0
    source = np.array([[0.0, 0.0], [1.0, 1.0], [0.4, 0.4]], np.float32)
    index, found = _neighbours_kernels.k_nearest(source, target, 4096, 5, None, CPU)
    expected_index, expected_found = reference.k_nearest(source, target, 5)
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(found, expected_found)


@settings(max_examples=40, deadline=None)
@given(bits=packed_descriptors(), k=st.integers(1, 12), bound=st.sampled_from([None, 0, 3, 12, 100.5]),
       half=st.sampled_from(["bfloat16", "float16", "uint8", "float32"]), chunk=st.sampled_from([1, 5, 4096]))
def test_hamming_equals_the_reference(bits: tuple[np.ndarray, np.ndarray], k: int, bound: float | None,
                                      half: str, chunk: int) -> None:
    """Every plan (bfloat16 pieces of 32 bytes on AMX and CUDA, other devices' float16 pieces of
    256, the quantized uint8 x int8 product of a CPU with VNNI, whole float32 descriptors on any
    other CPU), ties beyond the ``topk`` slack included (k up to 12, few distinct rows)."""
    source, target = bits
    plans = {"bfloat16": (torch.bfloat16, 32), "float16": (torch.float16, 256), "uint8": (torch.uint8, 32),
             "float32": (torch.float32, _neighbours_kernels._WHOLE)}
    if half == "uint8" and not _neighbours_kernels._quantized_product_works():
        return  # this torch has no oneDNN quantized linear: the CPU never takes that plan here
    plan = plans[half]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_neighbours_kernels, "_plan", lambda device: plan)
        index, found = _neighbours_kernels.hamming(source, target, chunk, k, bound, CPU)
    expected_index, expected_found = reference.hamming_nearest(source, target, k, bound)
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(found, expected_found)


def test_more_ties_than_the_slack_are_ranked_by_index() -> None:
    source = np.zeros((3, 32), np.uint8)
    target = np.zeros((200, 32), np.uint8)
    target[::3, 0] = 1  # 67 targets at distance 1, the rest at 0: far more ties than the slack
    index, found = _neighbours_kernels.hamming(source, target, 64, 4, None, CPU)
    np.testing.assert_array_equal(index, np.tile([1, 2, 4, 5], (3, 1)))
    np.testing.assert_array_equal(found, np.zeros((3, 4), np.float32))


# ---- what a device cannot do exactly is declined, with its reason --------------------------------


@pytest.fixture
def gpu_torch(usable_stand_in: Callable[..., str]) -> str:
    """The torch backend's nearest neighbours under a plugin that claims a usable GPU (the CPU here)."""
    return usable_stand_in(_plugin, "gputorch", "spacr_accel_nearest_neighbours")


def test_descriptors_beyond_the_exact_range_are_declined_with_the_reason(gpu_torch: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_runtime, "target", lambda: NO_DOUBLES)
    bits = np.random.default_rng(8).integers(0, 256, (3, 1 << 17), dtype=np.uint8)
    with pytest.raises(BackendDeclined, match="exact range"):
        _neighbours_kernels.hamming(bits, bits, 8, 1, None, NO_DOUBLES)
    with use("gputorch", "numpy"):
        index, _found = ops.nearest_neighbours(bits, bits[::-1], metric="hamming")
        dispatch = last_dispatch()
    assert dispatch is not None and dispatch.backend == "numpy"
    assert dispatch.declined[0][0] == "gputorch" and "exact range" in dispatch.declined[0][1]
    np.testing.assert_array_equal(index, [2, 1, 0])


def test_a_device_without_doubles_still_serves_k_and_the_bound_exactly(gpu_torch: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_runtime, "target", lambda: NO_DOUBLES)
    points = np.random.default_rng(9).integers(0, 9, (200, 2)).astype(np.float32)
    with use("gputorch", "numpy"):
        index, found = ops.nearest_neighbours(points, points[::2], k=3, max_distance=2.0)
        dispatch = last_dispatch()
    assert dispatch is not None and dispatch.backend == "gputorch" and dispatch.declined == ()
    expected_index, expected_found = reference.k_nearest(points, points[::2], 3, 2.0)
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(found, expected_found)


@pytest.mark.parametrize(("features", "quantized", "expected"), [
    ({"_is_amx_tile_supported", "_is_vnni_supported", "_is_avx512_bf16_supported"}, True, torch.bfloat16),
    ({"_is_vnni_supported", "_is_avx512_bf16_supported"}, True, torch.uint8),
    ({"_is_vnni_supported", "_is_avx512_bf16_supported"}, False, torch.bfloat16),
    ({"_is_vnni_supported"}, False, torch.float32),
    (set(), True, torch.float32),
])
def test_the_cpu_multiplies_in_what_it_runs_natively(features: set[str], quantized: bool,
                                                     expected: torch.dtype) -> None:
    """bfloat16 only where the CPU has it (emulated it is slower than float32), the int8 product
    where the CPU has VNNI and this torch the operator, else float32."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_neighbours_kernels, "_cpu_feature", lambda name: name in features)
        patch.setattr(_neighbours_kernels, "_quantized_product_works", lambda: quantized)
        _neighbours_kernels._cpu_plan.cache_clear()
        try:
            dtype, piece = _neighbours_kernels._plan(CPU)
        finally:
            _neighbours_kernels._cpu_plan.cache_clear()
    assert dtype == expected and piece == (_neighbours_kernels._WHOLE if expected == torch.float32 else 32)
