"""The plain references against brute force written with Python scalars, on tiny inputs full of ties."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import reference


def _python_k_nearest(source: np.ndarray, target: np.ndarray, k: int,
                      limit: float = math.inf) -> tuple[list[list[int]], list[list[float]]]:
    """Every pair with Python floats (float64), coordinates in order; sorted by (distance, index)."""
    indices, found = [], []
    for s in source.astype(np.float32).tolist():
        pairs = []
        for j, t in enumerate(target.astype(np.float32).tolist()):
            total = 0.0
            for a, b in zip(s, t, strict=True):
                total += (a - b) * (a - b)
            pairs.append((total, j))
        pairs.sort()
        row_i, row_d = [], []
        for total, j in pairs[:k]:
            distance = float(np.float32(math.sqrt(total)))
            if distance > limit:
                break
            row_i.append(j)
            row_d.append(distance)
        row_i += [-1] * (k - len(row_i))
        row_d += [math.inf] * (k - len(row_d))
        indices.append(row_i)
        found.append(row_d)
    return indices, found


def _python_hamming(source: np.ndarray, target: np.ndarray, k: int,
                    limit: float = math.inf) -> tuple[list[list[int]], list[list[float]]]:
    indices, found = [], []
    for s in source.tolist():
        pairs = sorted((sum(bin(a ^ b).count("1") for a, b in zip(s, t, strict=True)), j)
                       for j, t in enumerate(target.tolist()))
        kept = [(d, j) for d, j in pairs[:k] if d <= limit]
        indices.append([j for _, j in kept] + [-1] * (k - len(kept)))
        found.append([float(d) for d, _ in kept] + [math.inf] * (k - len(kept)))
    return indices, found


_LATTICE = st.integers(-2, 2)


@st.composite
def _point_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    width = draw(st.integers(1, 3))
    n, m = draw(st.integers(0, 12)), draw(st.integers(0, 12))
    if draw(st.booleans()):  # a small lattice: ties and duplicates everywhere
        return (draw(hnp.arrays(np.int32, (n, width), elements=_LATTICE)).astype(np.float32),
                draw(hnp.arrays(np.int32, (m, width), elements=_LATTICE)).astype(np.float32))
    values = st.floats(-100, 100, width=32)
    return (draw(hnp.arrays(np.float32, (n, width), elements=values)),
            draw(hnp.arrays(np.float32, (m, width), elements=values)))


@settings(max_examples=60, deadline=None)
@given(_point_sets(), st.integers(1, 5), st.sampled_from([None, 0.0, 1.0, 1.5, 30.0]))
def test_k_nearest_matches_python_brute_force(points: tuple[np.ndarray, np.ndarray], k: int,
                                             limit: float | None) -> None:
    source, target = points
    index, found = reference.k_nearest(source, target, k, limit)
    expected_i, expected_d = _python_k_nearest(source, target, k, math.inf if limit is None else limit)
    assert index.dtype == np.int64 and found.dtype == np.float32
    assert index.shape == found.shape == (source.shape[0], k)
    assert index.tolist() == expected_i
    assert found.tolist() == expected_d


def test_k_nearest_ties_go_in_index_order() -> None:
    # The four lattice neighbours of the origin are all at distance 1; the far one comes last.
    target = np.array([[0, 1], [5, 5], [1, 0], [0, -1], [-1, 0]], dtype=np.float32)
    index, found = reference.k_nearest(np.zeros((1, 2), np.float32), target, 5)
    assert index.tolist() == [[0, 2, 3, 4, 1]]
    assert found[0, :4].tolist() == [1.0] * 4


def test_k_nearest_duplicates_and_more_neighbours_than_targets() -> None:
    target = np.array([[1.0], [1.0], [0.0]], dtype=np.float32)
    index, found = reference.k_nearest(np.array([[0.9]], np.float32), target, 5)
    assert index.tolist() == [[0, 1, 2, -1, -1]]
    assert np.isinf(found[0, 3:]).all()
    empty_i, empty_d = reference.k_nearest(np.zeros((2, 1)), np.zeros((0, 1)), 2)
    assert empty_i.tolist() == [[-1, -1]] * 2 and np.isinf(empty_d).all()


def test_max_distance_compares_the_returned_float32_distance() -> None:
    # sqrt(1 + 1e-9) rounds to float32 1.0: within a limit of 1.0, though its float64 distance is not.
    source = np.zeros((1, 2), np.float32)
    target = np.array([[1.0, 3e-5]], np.float32)
    assert math.sqrt(1.0 + float(np.float32(3e-5)) ** 2) > 1.0
    index, found = reference.k_nearest(source, target, 1, 1.0)
    assert index.tolist() == [[0]] and found.tolist() == [[1.0]]
    index, _ = reference.k_nearest(source, target, 1, np.nextafter(np.float32(1.0), np.float32(0)))
    assert index.tolist() == [[-1]]


def test_the_float64_sum_decides_not_the_float32_distance() -> None:
    # Two targets whose float32 distances are equal but whose float64 squared sums differ: the
    # nearer by float64 wins even though it has the higher index.
    source = np.zeros((1, 2), np.float32)
    target = np.array([[1.0, 3e-5], [1.0, 0.0]], np.float32)
    index, found = reference.k_nearest(source, target, 2)
    assert found.tolist() == [[1.0, 1.0]]
    assert index.tolist() == [[1, 0]]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10), st.integers(0, 10), st.integers(1, 4), st.integers(1, 4),
       st.sampled_from([None, 0, 3, 7.5]), st.data())
def test_hamming_matches_python_brute_force(n: int, m: int, width: int, k: int, limit: float | None,
                                            data: st.DataObject) -> None:
    # Few distinct byte values: many equal counts, so the index order of ties is exercised.
    bytes_ = st.sampled_from([0, 1, 3, 255, 128])
    source = data.draw(hnp.arrays(np.uint8, (n, width), elements=bytes_))
    target = data.draw(hnp.arrays(np.uint8, (m, width), elements=bytes_))
    index, found = reference.hamming_nearest(source, target, k, limit)
    expected_i, expected_d = _python_hamming(source, target, k, math.inf if limit is None else limit)
    assert index.tolist() == expected_i and found.tolist() == expected_d
    assert found.dtype == np.float32


def test_hamming_refuses_other_dtypes() -> None:
    with pytest.raises(TypeError, match="uint8"):
        reference.hamming_nearest(np.zeros((2, 4), np.int8), np.zeros((2, 4), np.uint8), 1)
    with pytest.raises(ValueError, match="bytes per row"):
        reference.hamming_nearest(np.zeros((2, 4), np.uint8), np.zeros((2, 3), np.uint8), 1)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: reference.k_nearest(np.zeros((1, 2)), np.zeros((1, 3)), 1), "same number of coordinates"),
    (lambda: reference.k_nearest(np.zeros((1, 2)), np.zeros((1, 2)), 0), "k must be at least 1"),
    (lambda: reference.k_nearest(np.zeros((1, 2)), np.zeros((1, 2)), 1, -1.0), "max_distance"),
    (lambda: reference.k_nearest(np.zeros((1, 2)), np.zeros((1, 2)), 1, math.nan), "max_distance"),
    (lambda: reference.k_nearest(np.full((1, 2), np.nan), np.zeros((1, 2)), 1), "source holds a NaN"),
    (lambda: reference.k_nearest(np.zeros(2), np.zeros((1, 2)), 1), "source must be 2-D"),
    (lambda: reference.mutual_nearest(np.zeros((1, 2)), np.zeros((1, 2)), metric="cosine"), "metric"),
])
def test_bad_input_is_a_value_error_naming_the_argument(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_k_must_be_an_integer() -> None:
    with pytest.raises(TypeError, match="k must be an integer"):
        reference.k_nearest(np.zeros((1, 2)), np.zeros((1, 2)), 1.0)  # type: ignore[arg-type]  # a wrong type on purpose: its refusal is the test


@settings(max_examples=60, deadline=None)
@given(_point_sets(), st.sampled_from([None, 0.0, 1.0, 2.5]))
def test_mutual_pairs_are_the_two_one_way_answers(points: tuple[np.ndarray, np.ndarray],
                                                  limit: float | None) -> None:
    first, second = points
    pairs = reference.mutual_nearest(first, second, limit)
    forward, _ = _python_k_nearest(first, second, 1, math.inf if limit is None else limit)
    backward, _ = _python_k_nearest(second, first, 1, math.inf if limit is None else limit)
    expected = [[i, row[0]] for i, row in enumerate(forward) if row[0] >= 0 and backward[row[0]][0] == i]
    assert pairs.dtype == np.int64 and pairs.shape == (len(expected), 2)
    assert pairs.tolist() == expected


def test_mutual_drops_a_cell_that_left_the_field() -> None:
    first = np.array([[0.0, 0.0], [20.0, 0.0]], np.float32)
    second = np.array([[0.5, 0.0], [26.0, 0.0]], np.float32)  # the second cell moved 6 away
    assert reference.mutual_nearest(first, second).tolist() == [[0, 0], [1, 1]]
    assert reference.mutual_nearest(first, second, max_distance=2.0).tolist() == [[0, 0]]


def test_mutual_hamming() -> None:
    first = np.array([[0b1111, 0], [0, 0b1]], np.uint8)
    second = np.array([[0, 0b11], [0b0111, 0]], np.uint8)
    assert reference.mutual_nearest(first, second, metric="hamming").tolist() == [[0, 1], [1, 0]]
    assert reference.mutual_nearest(first, second, 0.5, metric="hamming").tolist() == []
