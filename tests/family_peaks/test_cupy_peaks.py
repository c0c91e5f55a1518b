"""The CuPy backend's local maxima and stacks, its algorithms run on the NumPy-compatible kit and
compared with the PLAIN references of ``spacr_accel_core.reference``; a stack is one call with one
transfer each way."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import ops, reference
from spacr_accel_core.testing import reference_maximum_filter
from spacr_accel_cupy import _filters_kernels, _kit, _peaks_kernels, _runtime

KIT = _kit.numpy_kit()


@st.composite
def fields(draw: st.DrawFn) -> np.ndarray:
    shape = draw(st.sampled_from([(1, 1), (5, 7), (12, 9), (3, 9, 11), (2, 2, 6, 8), (3, 1, 10), (4, 40, 7)]))
    values = st.one_of(st.integers(0, 3).map(float), st.sampled_from([np.nan, -0.0, 2.5]))
    return draw(hnp.arrays(np.float32, shape, elements=values))


@settings(max_examples=40, deadline=None)
@given(field=fields(), size=st.sampled_from([3, 5, 7, 31]), threshold=st.sampled_from([None, 0.5, 2.0, -1.0]),
       budget=st.sampled_from([None, 1 << 12]))
def test_peaks_and_stacks_equal_the_reference(field: np.ndarray, size: int, threshold: float | None,
                                              budget: int | None) -> None:
    with pytest.MonkeyPatch.context() as patch:
        if budget is not None:
            patch.setenv("SPACR_ACCEL_CUPY_PASS_BYTES", str(budget))
        below = None if threshold is None else np.float32(threshold)
        peaks = _peaks_kernels.local_maxima(KIT, field, size, below)
        filtered = _filters_kernels.maximum_filter_stack(KIT, field, size)
    np.testing.assert_array_equal(peaks, reference.local_maxima(field, size, threshold))
    flat = field.reshape(-1, *field.shape[-2:])
    for number, plane in enumerate(filtered.reshape(flat.shape)):
        assert np.array_equal(plane, reference_maximum_filter(flat[number], size), equal_nan=True)


def test_a_stack_is_one_call_with_one_transfer_each_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole (11, 4, H, W) stack goes to the device once and its peaks come back once."""
    moved: list[tuple[str, tuple[int, ...]]] = []

    def to_device(array: np.ndarray) -> np.ndarray:
        moved.append(("in", array.shape))
        return np.asarray(array)

    def to_host(array: np.ndarray) -> np.ndarray:
        moved.append(("out", array.shape))
        return np.asarray(array)

    kit = replace(KIT, to_device=to_device, to_host=to_host)
    monkeypatch.setattr(_runtime, "cupy_kit", lambda: kit)
    ops.local_maxima(np.zeros((11, 4, 30, 30), np.float32), 5, threshold=-1.0, backend="cupy")
    assert [direction for direction, _shape in moved] == ["in", "out"]
    assert moved[0][1] == (44, 30, 30)
