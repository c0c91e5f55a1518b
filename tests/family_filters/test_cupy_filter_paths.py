"""The CuPy backend's window maximum, every line of its algorithm run on the NumPy-compatible kit
and checked against the PLAIN references of ``spacr_accel_core.testing`` (exactness, the NaN rule,
tiling, out-of-memory retries), never only against another backend."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core.testing import reference_maximum_filter
from spacr_accel_cupy import _filters_kernels, _kit

KIT = _kit.numpy_kit()


class CupyOutOfMemory(MemoryError):
    """Stands in for ``cupy.cuda.memory.OutOfMemoryError``, which is a MemoryError."""


# ---- the algorithms, on NumPy --------------------------------------------------------------------


@st.composite
def fields(draw: st.DrawFn) -> np.ndarray:
    shape = draw(st.tuples(st.integers(1, 70), st.integers(1, 70)))
    elements = st.one_of(st.floats(-1e6, 1e6, width=32),
                         st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0]))
    return draw(hnp.arrays(np.float32, shape, elements=elements))


@settings(max_examples=40, deadline=None)
@given(field=fields(), size=st.sampled_from([3, 5, 9, 15]), budget=st.sampled_from([None, "65536"]))
def test_filter_equals_the_reference(field: np.ndarray, size: int, budget: str | None) -> None:
    with pytest.MonkeyPatch.context() as patch:
        if budget is not None:
            patch.setenv("SPACR_ACCEL_CUPY_PASS_BYTES", budget)  # many small tiles
        got = _filters_kernels.maximum_filter(KIT, field, size)
    assert np.array_equal(got, reference_maximum_filter(field, size), equal_nan=True)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), thin_rows=st.booleans())
def test_thin_fields_under_wide_windows_cap_each_axis(data: st.DataObject, thin_rows: bool) -> None:
    """A window far wider than the short axis (each axis capped by its own length): bit for bit."""
    short, long = data.draw(st.integers(1, 3)), data.draw(st.integers(2, 40))
    shape = (short, long) if thin_rows else (long, short)
    field = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(-1e6, 1e6, width=32)))
    size = data.draw(st.integers(1, long + 1).map(lambda k: 2 * k + 1))
    got = _filters_kernels.maximum_filter(KIT, field, size) + np.float32(0)
    assert np.array_equal(got, reference_maximum_filter(field, size))


def test_filter_retries_smaller_tiles_after_out_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    filter_tile = _filters_kernels._filter_tile

    def flaky(kit: _kit.Kit, tile: np.ndarray, size: int) -> np.ndarray:
        sizes.append(tile.shape[0])
        if tile.shape[0] > 60:
            raise CupyOutOfMemory("Out of memory allocating 1,073,741,824 bytes")
        return filter_tile(kit, tile, size)  # type: ignore[no-any-return]  # an ndarray on NumPy

    monkeypatch.setattr(_filters_kernels, "_filter_tile", flaky)
    field = np.random.default_rng(1).standard_normal((400, 50)).astype(np.float32)
    got = _filters_kernels.maximum_filter(KIT, field, 9)
    assert np.array_equal(got, reference_maximum_filter(field, 9))
    assert sizes[0] == 400 and min(sizes) <= 60
