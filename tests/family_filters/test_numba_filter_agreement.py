"""numba's compiled window maximum against the plain reference and the NumPy floor, on the same
inputs, bitwise (the float32 bytes): the numba backend must be the floor's answer, faster, never a
near miss; large fields in threaded bands too."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import last_dispatch, ops
from spacr_accel_core.testing import assert_same_field, reference_maximum_filter

pytestmark = pytest.mark.usefixtures("numba_compiled")  # the kernels, not the floor, under test

_FLOATS = st.floats(-1e6, 1e6, width=32) | st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0])


@st.composite
def fields(draw: st.DrawFn) -> np.ndarray:
    shape = (draw(st.integers(1, 40)), draw(st.integers(1, 40)))
    dtype = draw(st.sampled_from(["float32", "uint8", "uint16"]))
    if dtype == "float32":
        return draw(hnp.arrays(np.float32, shape, elements=_FLOATS))
    info = np.iinfo(dtype)
    return draw(hnp.arrays(dtype, shape, elements=st.integers(int(info.min), int(info.max))))


@settings(max_examples=150, deadline=None)
@given(field=fields(), size=st.integers(3, 90))
def test_filter_is_the_reference_and_the_floor_bit_for_bit(field: np.ndarray, size: int) -> None:
    got = ops.maximum_filter(field, size, backend="numba")
    served = last_dispatch()
    floor = ops.maximum_filter(field, size, backend="numpy")
    assert_same_field(got, reference_maximum_filter(field, size))
    assert got.tobytes() == floor.tobytes()
    assert served is not None and served.backend in {"numba", "core"}  # the core answers full-cover windows


@pytest.mark.parametrize("shape", [(4096, 512), (777, 1500), (3, 70000)])
@pytest.mark.parametrize("size", [3, 15, 31])
def test_threaded_bands_on_large_fields(shape: tuple[int, int], size: int) -> None:
    rng = np.random.default_rng(size)
    field = rng.standard_normal(shape).astype(np.float32)
    field[rng.random(shape) < 1e-4] = np.nan
    got = ops.maximum_filter(field, size, backend="numba")
    assert last_dispatch().backend == "numba"  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record
    assert got.tobytes() == ops.maximum_filter(field, size, backend="numpy").tobytes()
