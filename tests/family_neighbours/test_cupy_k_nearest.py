"""The CuPy backend serves the neighbour calls' arguments itself: ``k``, ``max_distance`` and
``metric="hamming"``, its algorithms run on the NumPy-compatible kit and compared with the PLAIN
references of ``spacr_accel_core.reference``; wide rows and thousands of targets take the bound
from group minima and stay exact."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import reference
from spacr_accel_core.testing import packed_descriptors
from spacr_accel_cupy import _kit, _neighbours_kernels

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
