"""The torch backend's window maximum on its own paths, each driven directly and compared with the
PLAIN references of ``spacr_accel_core.testing`` (never only with another backend).

The conformance suite only sees what a forced call reaches on this machine (the CPU algorithm,
small inputs). Here the GPU algorithm (the max-pool tiles) runs on the CPU device, and
out-of-memory is injected to show a tile is retried smaller and a plate never fails."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import BackendOutOfMemory, last_dispatch, ops, use
from spacr_accel_core.testing import reference_maximum_filter
from spacr_accel_torch import _filters_kernels, _plugin, _runtime

CPU = _runtime.Device(torch.device("cpu"), True)


def on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run forced torch calls on the CPU device even on a GPU machine, so a failure injected into
    the CPU algorithm is the one the call meets."""
    monkeypatch.setattr(_runtime, "target", lambda: CPU)


def oom(message: str = "CUDA out of memory. Tried to allocate 2.00 GiB") -> torch.OutOfMemoryError:
    return torch.OutOfMemoryError(message)


# ---- maximum_filter ------------------------------------------------------------------------------


@st.composite
def fields(draw: st.DrawFn) -> np.ndarray:
    shape = draw(st.tuples(st.integers(1, 90), st.integers(1, 90)))
    elements = st.one_of(st.floats(-1e6, 1e6, width=32),
                         st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0]))
    return draw(hnp.arrays(np.float32, shape, elements=elements))


@settings(max_examples=40, deadline=None)
@given(field=fields(), size=st.sampled_from([3, 5, 9, 15, 31]), budget=st.sampled_from([None, 1 << 16]))
def test_the_gpu_filter_algorithm_equals_the_reference(field: np.ndarray, size: int,
                                                           budget: int | None) -> None:
    """The max-pool tiles the GPU runs, here on the CPU device, whole or in many small tiles."""
    with pytest.MonkeyPatch.context() as patch:
        if budget is not None:
            patch.setenv("SPACR_ACCEL_TORCH_PASS_BYTES", str(budget))
        got = _filters_kernels._filter_in_tiles(field, size, CPU)
    assert np.array_equal(got, reference_maximum_filter(field, size), equal_nan=True)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), thin_rows=st.booleans())
def test_thin_fields_under_wide_windows_cap_each_axis(data: st.DataObject, thin_rows: bool) -> None:
    """A window far wider than the short axis: each axis's radius capped by its own length, on the
    CPU stripes and on the GPU's max-pool tiles (run here on the CPU device), bit for bit."""
    short, long = data.draw(st.integers(1, 3)), data.draw(st.integers(2, 40))
    shape = (short, long) if thin_rows else (long, short)
    field = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(-1e6, 1e6, width=32)))
    size = data.draw(st.integers(1, long + 1).map(lambda k: 2 * k + 1))
    expected = reference_maximum_filter(field, size)
    assert np.array_equal(_filters_kernels._filter_in_stripes(field, size, CPU) + np.float32(0), expected)
    assert np.array_equal(_filters_kernels._filter_in_tiles(field, size, CPU) + np.float32(0), expected)


def test_a_thin_field_pads_only_its_own_length() -> None:
    """(1, 70000) with size 1001: the one row is not padded to 1001 rows (284 MB at full radius)."""
    field = np.random.default_rng(2).standard_normal((1, 70000)).astype(np.float32)
    seen: list[tuple[int, int]] = []
    stripe = _filters_kernels._cpu_stripe

    def recording(*args: object) -> None:
        seen.append(args[4])  # type: ignore[arg-type]  # the (rows, columns) window edges
        stripe(*args)  # type: ignore[arg-type]  # forwarded as received

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_filters_kernels, "_cpu_stripe", recording)
        got = _filters_kernels._filter_in_stripes(field, 1001, CPU)
    assert seen == [(1, 1001)]
    expected = np.lib.stride_tricks.sliding_window_view(np.pad(field[0], 500, mode="edge"), 1001).max(axis=1)
    assert np.array_equal(got[0], expected)


@settings(max_examples=40, deadline=None)
@given(field=fields(), size=st.sampled_from([3, 7, 15, 41]))
def test_the_cpu_filter_algorithm_equals_the_reference(field: np.ndarray, size: int) -> None:
    assert np.array_equal(_filters_kernels._filter_in_stripes(field, size, CPU), reference_maximum_filter(field, size),
                          equal_nan=True)


def test_a_field_of_many_stripes_is_exact() -> None:
    rng = np.random.default_rng(3)
    field = rng.standard_normal((700, 1500)).astype(np.float32)
    field[350, 700] = np.nan
    for size in (3, 15, 63):
        got = ops.maximum_filter(field, size, backend="torch")
        assert np.array_equal(got, reference_maximum_filter(field, size), equal_nan=True)


def test_nan_rule_holds_where_max_pool_ignores_nan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Metal's max-pool may drop NaN; the explicit mask still writes NaN where a window saw one."""
    pool = _filters_kernels._pool

    def nan_blind(tile: torch.Tensor, size: int) -> torch.Tensor:
        return pool(torch.nan_to_num(tile, nan=-float("inf")), size)

    monkeypatch.setattr(_filters_kernels, "_pool", nan_blind)
    field = np.arange(100, dtype=np.float32).reshape(10, 10)
    field[4, 4] = np.nan
    got = _filters_kernels._filter_in_tiles(field, 3, CPU)
    assert np.array_equal(got, reference_maximum_filter(field, 3), equal_nan=True)
    assert int(np.isnan(got).sum()) == 9


def test_filter_tiles_retry_smaller_after_out_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    tile = _filters_kernels._device_tile

    def flaky(field: np.ndarray, out: np.ndarray, start: int, stop: int, size: int,
              device: _runtime.Device) -> None:
        sizes.append(stop - start)
        if stop - start > 40:
            raise oom()
        tile(field, out, start, stop, size, device)

    monkeypatch.setattr(_filters_kernels, "_device_tile", flaky)
    field = np.random.default_rng(5).standard_normal((300, 200)).astype(np.float32)
    got = _filters_kernels._filter_in_tiles(field, 15, CPU)
    assert np.array_equal(got, reference_maximum_filter(field, 15))
    assert sizes[:4] == [300, 150, 75, 37]  # halved after each failure, resumed where it stopped
    assert sum(sizes[3:]) == 300


def test_filter_gives_up_with_backend_out_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*_: object) -> None:
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 9 GB")

    on_the_cpu(monkeypatch)
    monkeypatch.setattr(_filters_kernels, "_cpu_stripe", full)
    with pytest.raises(BackendOutOfMemory):
        ops.maximum_filter(np.ones((50, 50)), 3, backend="torch")


@pytest.fixture
def gpu_torch(usable_stand_in: Callable[..., str]) -> str:
    """The torch backend's primitives under a plugin that claims a usable GPU (the CPU here)."""
    return usable_stand_in(_plugin, "gputorch", "spacr_accel_maximum_filter", "spacr_accel_nearest_neighbours")


def test_a_card_filled_mid_plate_falls_through_to_numpy(gpu_torch: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    on_the_cpu(monkeypatch)
    field = np.random.default_rng(6).standard_normal((64, 64)).astype(np.float32)
    with use("gputorch", "numpy"):
        first = ops.maximum_filter(field, 5)
        assert last_dispatch().backend == "gputorch"  # type: ignore[union-attr]  # a call just ran

        def full(*_: object) -> None:
            raise oom()

        monkeypatch.setattr(_filters_kernels, "_cpu_stripe", full)  # another job took the card
        second = ops.maximum_filter(field, 5)
        dispatch = last_dispatch()
    assert dispatch is not None and dispatch.backend == "numpy"
    assert dispatch.declined[0][0] == "gputorch" and "BackendOutOfMemory" in dispatch.declined[0][1]
    assert np.array_equal(first, second)
