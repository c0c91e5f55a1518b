"""The decode chain's filters on dask: bit for bit with the in-memory ops on the whole array, for
every chunking (the threaded scheduler here; one check on a real LocalCluster of process workers)."""

from __future__ import annotations

import logging

import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import dask as sad
from spacr_accel_core import ops

QUICK = settings(max_examples=25, deadline=None)


def identical(got: np.ndarray, want: np.ndarray) -> bool:
    """The same bits, NaN in the same places (a NaN's sign and payload are free: ``inf - inf``
    gives the hardware's NaN, whose sign depends on the instruction that made it)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    nan = np.isnan(want)
    return np.array_equal(np.isnan(got), nan) and got.view(np.uint32)[~nan].tobytes() == \
        want.view(np.uint32)[~nan].tobytes()


@st.composite
def chunked(draw: st.DrawFn, leading: int = 0) -> tuple[np.ndarray, tuple[int, ...]]:
    """A small field or stack with NaN, infinities and signed zeros, and a chunking of it."""
    shape = (*(draw(st.integers(1, 3)) for _ in range(leading)), draw(st.integers(1, 23)), draw(st.integers(1, 23)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = (rng.standard_normal(shape) * 10).astype(np.float32)
    values[rng.random(shape) < 0.1] = np.float32(-0.0)
    values[rng.random(shape) < 0.03] = np.nan
    values[rng.random(shape) < 0.02] = np.inf
    if draw(st.booleans()):
        values = rng.integers(0, 4000, size=shape).astype(np.uint16)
    return values, tuple(draw(st.integers(1, n)) for n in shape)


@QUICK
@given(chunked(), st.sampled_from([0.5, 1.0, 2.0, (1.0, 3.0), (0.0, 1.5), 6.0]),
       st.sampled_from([4.0, 1.0]), st.sampled_from(["reflect", "nearest"]), st.booleans())
def test_gaussians_match_ops_for_every_chunking(case, sigma, truncate, mode, laplace):
    field, chunks = case
    name = "gaussian_laplace" if laplace else "gaussian_filter"
    lazy = getattr(sad, name)(da.from_array(field, chunks=chunks), sigma, truncate=truncate, mode=mode)
    want = getattr(ops, name)(field, sigma, truncate=truncate, mode=mode)
    assert identical(lazy.compute(scheduler="threads"), want)


@QUICK
@given(chunked(leading=1), st.sampled_from([1.0, (2.0, 0.5)]), st.sampled_from(["reflect", "nearest"]))
def test_a_stack_is_smoothed_field_by_field(case, sigma, mode):
    stack, chunks = case
    got = sad.gaussian_laplace(da.from_array(stack, chunks=chunks), sigma, mode=mode).compute(scheduler="threads")
    assert identical(got, ops.gaussian_laplace(stack, sigma, mode=mode))


@QUICK
@given(chunked(leading=1), st.integers(0, 30), st.sampled_from(["reflect", "nearest"]), st.booleans())
def test_window_extremes_match_ops_for_every_chunking(case, size, mode, minimum):
    field, chunks = case
    name = "minimum_filter" if minimum else "maximum_filter"
    got = getattr(sad, name)(da.from_array(field, chunks=chunks), size, mode=mode).compute(scheduler="threads")
    assert identical(got, getattr(ops, name)(field, size, mode=mode))


def test_the_halo_is_the_kernels_reach():
    """A mosaic in 4 x 4 blocks: sigma 2 reaches int(4 * 2 + 0.5) = 8 pixels, exchanged as the halo."""
    field = da.zeros((64, 64), chunks=16, dtype=np.float32)
    graph = sad.gaussian_filter(field, 2.0).__dask_graph__()
    assert any("overlap" in str(name) for name in graph.layers)
    assert sad.gaussian_filter(da.zeros((4, 64, 64), chunks=(1, 64, 64)), 2.0).__dask_graph__().layers.keys() \
        .isdisjoint(k for k in graph.layers if "overlap" in str(k)), "whole fields need no halo"


@pytest.mark.parametrize(("call", "error", "words"), [
    (lambda f: sad.gaussian_filter(f, -1.0), ValueError, "sigma must not be negative"),
    (lambda f: sad.gaussian_laplace(f, 1.0, mode="wrap"), ValueError, "mode must be one of"),
    (lambda f: sad.minimum_filter(f, 3, mode="mirror"), ValueError, "mode must be one of"),
    (lambda f: sad.gaussian_filter(f, 1.0, truncate="4"), TypeError, "truncate must be a real number"),
])
def test_bad_input_is_refused_before_any_graph(call, error, words):
    with pytest.raises(error, match=words):
        call(da.zeros((8, 8), chunks=4))


def test_the_gaussians_on_process_workers_match_ops():
    distributed = pytest.importorskip("distributed")
    rng = np.random.default_rng(5)
    field = (rng.standard_normal((2, 70, 90)) * 100).astype(np.float32)
    field[1, 35, 45] = np.nan
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.CRITICAL) as cluster, distributed.Client(cluster):
        lazy = da.from_array(field, chunks=(1, 25, 31))
        got = sad.gaussian_laplace(lazy, (1.0, 2.0)).compute()
        smooth = sad.gaussian_filter(lazy, 3.0, mode="nearest").compute()
        low = sad.minimum_filter(lazy, 7, mode="reflect").compute()
    assert identical(got, ops.gaussian_laplace(field, (1.0, 2.0)))
    assert identical(smooth, ops.gaussian_filter(field, 3.0, mode="nearest"))
    assert identical(low, ops.minimum_filter(field, 7, mode="reflect"))
