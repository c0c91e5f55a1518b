"""The plain local maxima against a per-pixel brute force, stacks and NaN included."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import ndimage

from spacr_accel_core import reference


def _python_peaks(field: np.ndarray, size: int, threshold: float | None) -> list[list[int]]:
    """Pixel by pixel: the window maximum with clamped indices, NaN anywhere making it NaN."""
    size += size % 2 == 0
    radius = size // 2
    values = field.astype(np.float32)
    peaks = []
    for lead in np.ndindex(*values.shape[:-2]):
        plane = values[lead].tolist()
        height, width = len(plane), len(plane[0])
        for y in range(height):
            for x in range(width):
                window = [plane[min(max(y + dy, 0), height - 1)][min(max(x + dx, 0), width - 1)]
                          for dy in range(-radius, radius + 1) for dx in range(-radius, radius + 1)]
                top = math.nan if any(math.isnan(v) for v in window) else max(window)
                pixel = plane[y][x]
                if pixel == top and (threshold is None or pixel > threshold):
                    peaks.append([*lead, y, x])
    return peaks


@st.composite
def _stacks(draw: st.DrawFn) -> np.ndarray:
    lead = draw(st.sampled_from([(), (2,), (2, 2)]))
    shape = (*lead, draw(st.integers(1, 7)), draw(st.integers(1, 7)))
    elements = st.sampled_from([0.0, 1.0, 2.0, 3.0, -1.0])  # plateaus: many equal maxima
    if draw(st.booleans()):
        elements = st.one_of(elements, st.just(math.nan), st.just(math.inf))
    return draw(hnp.arrays(np.float32, shape, elements=elements))


@settings(max_examples=80, deadline=None)
@given(_stacks(), st.integers(1, 6), st.sampled_from([None, 0.0, 1.5, -math.inf]))
def test_local_maxima_matches_brute_force(field: np.ndarray, size: int, threshold: float | None) -> None:
    got = reference.local_maxima(field, size, threshold)
    assert got.dtype == np.int64 and got.shape[1] == field.ndim
    assert got.tolist() == _python_peaks(field, size, threshold)


def test_windows_never_cross_fields() -> None:
    # Field 0 has a bright pixel on its last row; field 1's first row would lose its peak if the
    # window reached across.
    stack = np.zeros((2, 3, 3), np.float32)
    stack[0, 2, 1] = 9.0
    stack[1, 0, 1] = 1.0
    assert reference.local_maxima(stack, 3, threshold=0.5).tolist() == [[0, 2, 1], [1, 0, 1]]


def test_agrees_with_scipy_maximum_filter_per_field() -> None:
    rng = np.random.default_rng(5)
    stack = rng.integers(0, 6, (3, 17, 23)).astype(np.uint16)
    for size in (3, 4, 7):
        expected = np.concatenate([
            np.column_stack([np.full(len(p), number), p]) for number, p in enumerate(
                np.argwhere(plane.astype(np.float32) == ndimage.maximum_filter(
                    plane.astype(np.float32), size + (size % 2 == 0), mode="nearest"))
                for plane in stack)])
        assert reference.local_maxima(stack, size).tolist() == expected.tolist()


def test_nan_is_never_a_peak_and_poisons_its_window() -> None:
    field = np.array([[np.nan, 0.0, 0.0, 0.0, 5.0]], np.float32)
    assert reference.local_maxima(field, 3).tolist() == [[0, 2], [0, 4]]


def test_threshold_is_compared_exactly() -> None:
    # 0.1 rounds to a float32 above 0.1: it passes a float64 threshold of 0.1.
    field = np.array([[np.float32(0.1)]], np.float32)
    assert float(field[0, 0]) > 0.1
    assert reference.local_maxima(field, 3, threshold=0.1).tolist() == [[0, 0]]
    assert reference.local_maxima(field, 3, threshold=float(field[0, 0])).tolist() == []


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        reference.local_maxima(np.zeros(4), 3)
    with pytest.raises(ValueError, match="threshold"):
        reference.local_maxima(np.zeros((2, 2)), 3, threshold=math.nan)
    with pytest.raises(ValueError, match="size"):
        reference.local_maxima(np.zeros((2, 2)), 0)
    with pytest.raises(TypeError, match="size"):
        reference.local_maxima(np.zeros((2, 2)), 3.0)  # type: ignore[arg-type]  # a wrong type on purpose: its refusal is the test
