"""The CuPy backend serves every argument of the science calls itself: ``k``, ``max_distance``,
``metric="hamming"``, ``local_maxima`` and stacks. Its algorithms run here on the NumPy-compatible
kit and are compared with the PLAIN references of ``spacr_accel_core.reference``; forced calls with
the kit standing in for the card show the backend serves each argument with no decline; tiles are
sized from a stand-in memory report where CuPy's own query cannot say.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import last_dispatch, ops, reference
from spacr_accel_core.accelerator import DeviceMemory
from spacr_accel_core.testing import packed_descriptors, reference_maximum_filter
from spacr_accel_cupy import _filters_kernels, _kit, _neighbours_kernels, _room, _runtime

KIT = _kit.numpy_kit()


@st.composite
def point_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Lattices full of ties and copies, continuous points, a tight cluster beside far outliers."""
    width = draw(st.sampled_from([1, 2, 3, 8]))
    n, m = draw(st.integers(1, 80)), draw(st.integers(1, 150))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["grid", "uniform", "cluster"]))
    if kind == "grid":
        return (rng.integers(-3, 4, (n, width)).astype(np.float32),
                rng.integers(-3, 4, (m, width)).astype(np.float32))
    if kind == "uniform":
        return (rng.uniform(-100, 100, (n, width)).astype(np.float32),
                rng.uniform(-100, 100, (m, width)).astype(np.float32))
    target = (rng.standard_normal((m, width)) * 1e-3).astype(np.float32)
    target[: max(1, m // 10)] = 1e6
    return (rng.standard_normal((n, width)) * 1e-3).astype(np.float32), target


@settings(max_examples=40, deadline=None)
@given(points=point_sets(), k=st.integers(1, 6), bound=st.sampled_from([None, 0.0, 1.0, 2.5, 40.0]),
       chunk=st.sampled_from([1, 7, 4096]), budget=st.sampled_from([None, 1 << 12]))
def test_k_nearest_within_a_distance_equals_the_reference(points: tuple[np.ndarray, np.ndarray], k: int,
                                                          bound: float | None, chunk: int,
                                                          budget: int | None) -> None:
    source, target = points
    with pytest.MonkeyPatch.context() as patch:
        if budget is not None:
            patch.setenv("SPACR_ACCEL_CUPY_PASS_BYTES", str(budget))
        index, found = _neighbours_kernels.k_nearest(KIT, source, target, chunk, k, bound)
    expected_index, expected_found = reference.k_nearest(source, target, k, bound)
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(found, expected_found)


def test_copies_of_one_point_go_to_the_exact_brute_force() -> None:
    target = np.zeros((3000, 2), np.float32)
    target[::7] = 1.0
    source = np.array([[0.0, 0.0], [1.0, 1.0], [0.4, 0.4]], np.float32)
    index, found = _neighbours_kernels.k_nearest(KIT, source, target, 4096, 5, None)
    expected_index, expected_found = reference.k_nearest(source, target, 5)
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(found, expected_found)


DESCRIPTORS = packed_descriptors(widths=(1, 3, 32, 61))
"""Widths either side of a 32-byte piece, ties everywhere or random rows."""


@settings(max_examples=40, deadline=None)
@given(bits=DESCRIPTORS, k=st.integers(1, 8), bound=st.sampled_from([None, 0, 3, 12, 100.5]),
       chunk=st.sampled_from([1, 5, 4096]))
def test_hamming_equals_the_reference(bits: tuple[np.ndarray, np.ndarray], k: int, bound: float | None,
                                      chunk: int) -> None:
    source, target = bits
    index, found = _neighbours_kernels.hamming(KIT, source, target, chunk, k, bound)
    expected_index, expected_found = reference.hamming_nearest(source, target, k, bound)
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(found, expected_found)


def test_every_argument_is_served_by_cupy_with_no_decline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kit standing in for the card: each forced call reaches CuPy's code and is served there."""
    monkeypatch.setattr(_runtime, "cupy_kit", _kit.numpy_kit)
    rng = np.random.default_rng(4)
    points = rng.integers(0, 20, (300, 2)).astype(np.float32)
    bits = rng.integers(0, 256, (200, 32), dtype=np.uint8)
    stack = rng.integers(0, 4, (2, 3, 24, 20)).astype(np.float32)
    calls = [
        (lambda: ops.nearest_neighbours(points, points[::-1], k=4, backend="cupy"),
         reference.k_nearest(points, points[::-1], 4)),
        (lambda: ops.nearest_neighbours(points, points[::3], max_distance=1.5, backend="cupy"),
         tuple(part[:, 0] for part in reference.k_nearest(points, points[::3], 1, 1.5))),
        (lambda: ops.nearest_neighbours(bits, bits[::-1], k=2, metric="hamming", max_distance=120, backend="cupy"),
         reference.hamming_nearest(bits, bits[::-1], 2, 120)),
        (lambda: ops.mutual_nearest_neighbours(bits, bits[::2], metric="hamming", backend="cupy"),
         reference.mutual_nearest(bits, bits[::2], metric="hamming")),
        (lambda: ops.local_maxima(stack, 5, threshold=1.0, backend="cupy"),
         reference.local_maxima(stack, 5, 1.0)),
    ]
    for run, expected in calls:
        got = run()
        dispatch = last_dispatch()
        assert dispatch is not None and dispatch.backend == "cupy" and dispatch.declined == (), dispatch
        for part, want in zip(got if isinstance(got, tuple) else (got,),
                              expected if isinstance(expected, tuple) else (expected,), strict=True):
            np.testing.assert_array_equal(part, want)
    filtered = ops.maximum_filter(stack, 5, backend="cupy")
    dispatch = last_dispatch()
    assert dispatch is not None and dispatch.backend == "cupy" and dispatch.declined == ()
    flat = stack.reshape(-1, 24, 20)
    for number, plane in enumerate(filtered.reshape(flat.shape)):
        assert np.array_equal(plane, reference_maximum_filter(flat[number], 5))


# ---- tiles sized from the device's reported memory -----------------------------------------------


def test_the_report_is_read_for_the_current_device(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = (DeviceMemory("cuda:0", "card A", 8 << 30, 16 << 30), DeviceMemory("cuda:1", "card B", 2 << 30, None))
    monkeypatch.setattr("spacr_accel_core.toolkit.memory", lambda: rows)
    assert _room.reported_free(0) == 8 << 30
    assert _room.reported_free(1) == 2 << 30
    assert _room.reported_free(2) is None


def test_passes_take_a_fraction_of_the_reported_free_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """CuPy's query failing, the accelerator's report sizes the pass: 0.4 of the free memory, and a
    stack that does not fit that runs in pieces, exactly."""
    monkeypatch.delenv("SPACR_ACCEL_CUPY_PASS_BYTES", raising=False)
    monkeypatch.setattr("spacr_accel_core.toolkit.memory",
                        lambda: (DeviceMemory("cuda:0", "stand-in card", 3 << 20, 3 << 20),))
    moved: list[tuple[int, ...]] = []

    def to_device(array: np.ndarray) -> np.ndarray:
        moved.append(array.shape)
        return np.asarray(array)

    kit = replace(KIT, free_bytes=lambda: None, reported_free=lambda: _room.reported_free(0), to_device=to_device)
    assert kit.budget() == int(0.4 * (3 << 20))
    assert replace(kit, reported_free=lambda: None).budget() == 64 << 20  # nobody can say: the host's size
    field = np.random.default_rng(5).standard_normal((11, 4, 96, 96)).astype(np.float32)
    got = _filters_kernels.maximum_filter_stack(kit, field, 5)
    assert len(moved) > 1 and max(shape[1] for shape in moved) < 96
    flat = field.reshape(-1, 96, 96)
    for number, plane in enumerate(got.reshape(flat.shape)):
        assert np.array_equal(plane, reference_maximum_filter(flat[number], 5))


@pytest.mark.parametrize("k", [1, 2, 4, 7])
def test_wide_rows_take_the_bound_from_group_minima_and_stay_exact(k: int) -> None:
    """Thousands of targets: the ``k``-th place bounded by the minima of column groups (one pass)."""
    rng = np.random.default_rng(k)
    source = rng.uniform(0, 100, (300, 2)).astype(np.float32)
    target = np.vstack([rng.integers(0, 100, (2000, 2)), rng.uniform(0, 100, (1500, 2))]).astype(np.float32)
    index, found = _neighbours_kernels.k_nearest(KIT, source, target, 128, k, 3.0 if k == 7 else None)
    expected_index, expected_found = reference.k_nearest(source, target, k, 3.0 if k == 7 else None)
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(found, expected_found)


@pytest.mark.parametrize("k", [1, 2, 5])
def test_hamming_over_thousands_of_targets_takes_the_bound_from_group_minima(k: int) -> None:
    rng = np.random.default_rng(10 + k)
    pool = rng.integers(0, 256, (40, 32), dtype=np.uint8)  # few distinct rows: ties at every place
    source = pool[rng.integers(0, 40, 200)]
    target = np.vstack([pool[rng.integers(0, 40, 1500)], rng.integers(0, 256, (1500, 32), dtype=np.uint8)])
    index, found = _neighbours_kernels.hamming(KIT, source, target, 64, k, 100 if k == 5 else None)
    expected_index, expected_found = reference.hamming_nearest(source, target, k, 100 if k == 5 else None)
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(found, expected_found)
