"""Phase correlation on Dask equals the in-memory op for every chunking, pairs never split; the
Dask layer refuses what ``ops`` refuses (the window maxima's refusals beside it); two lazy records
compare by value, in one compute each."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import dask as sad
from spacr_accel_core import ops

QUICK = settings(max_examples=20, deadline=None)


@QUICK
@given(lead=st.sampled_from([(), (3,), (2, 2)]), seed=st.integers(0, 2 ** 32 - 1), data=st.data())
def test_phase_correlate_matches_ops_with_pairs_whole(lead: tuple[int, ...], seed: int, data: st.DataObject) -> None:
    rng = np.random.default_rng(seed)
    first = rng.random((*lead, 14, 18))
    second = np.roll(first, tuple(rng.integers(-6, 6, 2)), axis=(-2, -1)) + 0.05 * rng.random(first.shape)
    chunks = tuple(data.draw(st.integers(1, n)) for n in first.shape)
    with dask.config.set(scheduler="threads"):
        lazy = sad.phase_correlate(da.from_array(first, chunks=chunks), da.from_array(second, chunks=chunks),
                                   tolerance=(3, 30))
        got = {name: np.asarray(getattr(lazy, name).compute()) for name in ("dy", "dx", "peak_ratio", "accepted")}
    want = ops.phase_correlate(first, second, tolerance=(3, 30))
    for name, value in got.items():
        np.testing.assert_array_equal(value, np.asarray(getattr(want, name)))
    assert lazy.backend == "dask"


def test_the_dask_layer_refuses_what_ops_refuses() -> None:
    stack = da.zeros((2, 8, 8), chunks=4)
    with pytest.raises(ValueError, match="points holds 1 point"):
        sad.window_maxima(stack, [[8, 0]], 3)
    with pytest.raises(ValueError, match="one shape"):
        sad.phase_correlate(stack, stack[0])
    with pytest.raises(ValueError, match="tolerance must be one number"):
        sad.phase_correlate(stack, stack, tolerance=(1, 2, 3))


def test_two_lazy_records_compare_by_value_in_one_compute_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """Comparing two Dask registrations computed their four fields one by one: each field's
    compute ran the whole registration again (eight registrations for one ``==``)."""
    from spacr_accel_core.dask import _decode as _dask_decode

    rng = np.random.default_rng(3)
    first = rng.random((3, 14, 18))
    second = np.roll(first, (2, -5), axis=(-2, -1))
    calls = []
    real = _dask_decode.ops.phase_correlate

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]  # forwarding the caller's arguments

    monkeypatch.setattr(_dask_decode.ops, "phase_correlate", counted)
    with dask.config.set(scheduler="sync"):
        found = sad.phase_correlate(da.from_array(first), da.from_array(second), backend="numpy")
        again = sad.phase_correlate(da.from_array(first), da.from_array(second), backend="numpy")
        assert found == again
        assert len(calls) <= 2  # at most once a record (Dask merges the two graphs when they are one)
        moved = sad.phase_correlate(da.from_array(first), da.from_array(np.roll(second, 1, axis=-1)),
                                    backend="numpy")
        assert found != moved
    monkeypatch.undo()
    eager = ops.phase_correlate(first, second, backend="numpy")
    assert found != eager  # another backend field: "dask" against "numpy"
