"""The torch backend's local maxima on stacks: the card's algorithms (the filter's tiles of rows and
the peaks found in them), run on the CPU device, equal the PLAIN references of
``spacr_accel_core.reference`` whole or in many tiles; and a declared ``stacks`` backend is handed
the whole stack in one call."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import ops, reference
from spacr_accel_core.testing import reference_maximum_filter
from spacr_accel_torch import _filters_kernels, _peaks_kernels, _runtime

CPU = _runtime.Device(torch.device("cpu"), True)


@st.composite
def stacks(draw: st.DrawFn) -> np.ndarray:
    shape = draw(st.sampled_from([(3, 9, 11), (2, 2, 6, 8), (1, 1, 5), (4, 40, 7)]))
    values = st.one_of(st.integers(0, 3).map(float), st.sampled_from([np.nan, -0.0, 2.5]))
    return draw(hnp.arrays(np.float32, shape, elements=values))


@settings(max_examples=30, deadline=None)
@given(field=stacks(), size=st.sampled_from([3, 5, 7, 31]), threshold=st.sampled_from([None, 0.5, 2.0]),
       budget=st.sampled_from([None, 1 << 16]))
def test_the_card_algorithms_of_a_stack_equal_the_reference(field: np.ndarray, size: int,
                                                            threshold: float | None, budget: int | None) -> None:
    """Every field of the stack in each tile of rows, whole or in many tiles."""
    fields = field.reshape(-1, *field.shape[-2:])
    out = np.empty(fields.shape, np.float32)
    with pytest.MonkeyPatch.context() as patch:
        if budget is not None:
            patch.setenv("SPACR_ACCEL_TORCH_PASS_BYTES", str(budget))
        _filters_kernels.filter_in_tiles(fields, size, CPU, out)
        below = None if threshold is None else np.float32(threshold)
        peaks = _peaks_kernels.peaks_in_tiles(fields, size, below, CPU, field.shape[:-2])
    for number, plane in enumerate(out):
        assert np.array_equal(plane, reference_maximum_filter(fields[number], size), equal_nan=True)
    np.testing.assert_array_equal(peaks, reference.local_maxima(field, size, threshold))


def test_a_stack_is_one_call_to_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """Declared ``stacks``: the core hands the whole stack over once, not field by field."""
    seen: list[tuple[int, ...]] = []
    original = _peaks_kernels.local_maxima_stack

    def spy(field: np.ndarray, *rest: object) -> np.ndarray:
        seen.append(field.shape)
        return original(field, *rest)  # type: ignore[arg-type]  # the plugin's own arguments

    monkeypatch.setattr(_peaks_kernels, "local_maxima_stack", spy)
    ops.local_maxima(np.zeros((11, 4, 30, 30), np.float32), 5, backend="torch", gpu=False)
    assert seen == [(11, 4, 30, 30)]
