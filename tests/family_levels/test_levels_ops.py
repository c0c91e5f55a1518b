"""ops.percentiles and its level sets: NumPy's answers to the bit on every dtype served, the checks
before any backend, the core's sign-of-zero rule, the Dask forms, and CuPy's code on NumPy's kit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core import last_dispatch, ops, reference
from spacr_accel_core.operations._levels import agree_levels


def _same(got: Any, expected: Any) -> None:
    agrees, detail = agree_levels(expected, got)
    assert agrees, detail


@settings(max_examples=80, deadline=None)
@given(dtype=st.sampled_from([np.uint8, np.int8, np.uint16, np.int16, np.int32, np.uint32, np.float16]),
       shape=st.sampled_from([(1, 1), (3, 5), (2, 4, 3), (2, 1, 7, 2)]), data=st.data(),
       q=st.one_of(st.floats(0, 100), st.lists(st.floats(0, 100), min_size=1, max_size=3), st.just(100)))
def test_integer_and_half_fields_are_numpys(dtype: Any, shape: tuple[int, ...], data: st.DataObject, q: Any) -> None:
    """Selected exactly in float32 or float64, interpolated in the field's own dtype, as NumPy does
    (a wrapped ``b - a`` of a signed integer field included)."""
    stack = data.draw(hnp.arrays(dtype, shape))
    with np.errstate(all="ignore"):
        expected = reference.percentiles(stack, q)
        got = ops.percentiles(stack, q)
    _same(got, expected)


def test_the_result_types_are_numpys() -> None:
    field = np.arange(12, dtype=np.float32).reshape(3, 4)
    for q in (70.0, 70, np.float64(70.0), np.float32(70.0), [70.0], np.array([10, 90])):
        got, expected = ops.percentiles(field, q), np.percentile(field, q)
        assert type(got) is type(expected) and np.asarray(got).dtype == np.asarray(expected).dtype, q
        _same(got, expected)
    field[1, 1] = np.nan
    got, expected = ops.percentiles(field, np.float64(30.0)), np.percentile(field, np.float64(30.0))
    assert type(got) is type(expected) is np.float32 and np.isnan(got)  # NumPy's NaN keeps the field's dtype


@pytest.mark.parametrize("backend", ["numpy", "numba", "torch", None])
@pytest.mark.parametrize("q", [np.float64(70.0), np.array(70.0), np.float32(0.0), 100.0, [70.0]])
def test_a_stack_of_fields_that_all_hold_nan_is_numpys_field_by_field(backend: str | None, q: Any) -> None:
    """NumPy answers a field holding NaN with that NaN in the field's dtype, even for a float64 ``q``
    whose finite answers are float64: every field NaN, the stack's answers are float32; one finite
    field among them, float64 (what the fields' answers stacked give)."""
    if backend == "torch":
        pytest.importorskip("torch")
    every = np.full((3, 2, 2), np.nan, np.float32)
    some = every.copy()
    some[1] = 1.0
    for stack in (every, some, every[:1]):
        _same(ops.percentiles(stack, q, backend=backend), reference.percentiles(stack, q))


def test_a_zero_whose_sign_follows_numpys_partition_is_numpys() -> None:
    """Both zeros in a field, read from the t >= 0.5 branch: the core asks NumPy for that field."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        stack = rng.choice(np.float32([-0.0, 0.0]), size=(3, 4, 5))
        for q in ([75.0, 87.5], 60.0):
            for backend in ("numpy", "numba"):
                _same(ops.percentiles(stack, q, backend=backend), reference.percentiles(stack, q))


@pytest.mark.parametrize(("stack", "q", "error", "words"), [
    (np.ones((3,)), 50, ValueError, "stack must be a 2-D"),
    (np.ones((2, 0)), 50, ValueError, "hold no pixels"),
    (np.ones((2, 2), np.int64), 50, TypeError, "at most 32 bits"),
    (np.array([["a"]]), 50, TypeError, "stack must hold real numbers"),
    (np.ones((2, 2)), 101, ValueError, "q must be percentiles from 0 to 100"),
    (np.ones((2, 2)), float("nan"), ValueError, "q must be percentiles"),
    (np.ones((2, 2)), [[1, 2]], ValueError, "1-D sequence"),
    (np.ones((2, 2)), True, TypeError, "q must be a percentile"),
    (np.ones((2, 2)), "50", TypeError, "q must hold real numbers"),
])
def test_bad_input_is_refused_naming_the_argument(stack: Any, q: Any, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        ops.percentiles(stack, q)


def test_the_level_sets_refuse_bad_input() -> None:
    with pytest.raises(ValueError, match="low must be one percentile"):
        ops.clip_to_percentiles(np.ones((2, 2)), [0, 1], 90)
    with pytest.raises(ValueError, match="high must be percentiles"):
        ops.clip_to_percentiles(np.ones((2, 2)), 0, 190)
    with pytest.raises(TypeError, match="cutoff must be a real number"):
        ops.normalise_to_percentile(np.ones((2, 2)), 70.0, cutoff="1")
    with pytest.raises(ValueError, match="scale must broadcast"):
        ops.rescale_fields(np.ones((3, 2, 2)), np.ones(2), 0.0, 1.0)


def test_no_fields_and_no_percentiles_are_the_cores_answers() -> None:
    assert ops.percentiles(np.ones((0, 3, 3)), [10.0, 20.0]).shape == (0, 2)
    assert last_dispatch() is not None and last_dispatch().backend == "core"  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record
    _same(ops.percentiles(np.ones((2, 3, 3)), []), reference.percentiles(np.ones((2, 3, 3)), []))
    assert ops.rescale_fields(np.ones((0, 2, 2), np.float32), 1.0, 0.0, 1.0).shape == (0, 2, 2)


def test_a_python_number_is_weak_in_a_level_set() -> None:
    stack = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
    assert ops.rescale_fields(stack, 2.0, 0.0, 2.5).dtype == np.float32
    assert ops.rescale_fields(stack, np.float64(2.0), 0.0, 2.5).dtype == np.float64
    _same(ops.rescale_fields(stack, np.float32(3), np.float32([1, 2]), 2.0),
          reference.rescale_fields(stack, np.float32(3), np.float32([1, 2]), 2.0))


def test_cupys_code_on_numpys_kit_matches_the_floor() -> None:
    """CuPy raises on a machine without a card, so its primitives run here on the kit's NumPy face."""
    pytest.importorskip("spacr_accel_cupy")
    from spacr_accel_cupy import _levels_kernels
    from spacr_accel_cupy._kit import numpy_kit
    from spacr_accel_numpy._levels_kernels import order_statistics, rescale_fields

    rng = np.random.default_rng(4)
    stack = rng.choice(np.float32([-1.0, 0.0, 2.0, 3.5, np.inf]), size=(5, 6, 7))
    stack[2, 1, 1] = np.nan
    ranks = np.array([0, 3, 20, 41], dtype=np.int64)
    np.testing.assert_array_equal(_levels_kernels.order_statistics(numpy_kit(), stack, ranks),
                                  order_statistics(stack, ranks))
    bounds = [rng.choice(np.array([1.0, 0.5, -2.0, np.nan]), 5) for _ in range(3)]
    _same(_levels_kernels.rescale_fields(numpy_kit(), stack, *bounds), rescale_fields(stack, *bounds))


def test_cupy_here_falls_through_for_real() -> None:
    pytest.importorskip("spacr_accel_cupy")
    stack = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    with pytest.raises(RuntimeError):
        ops.percentiles(stack, [0.0, 90.0], backend="cupy")
    _same(ops.percentiles(stack, [0.0, 90.0]), reference.percentiles(stack, [0.0, 90.0]))
    assert last_dispatch().backend != "cupy"  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record


def test_dask_is_bit_identical_for_every_chunking() -> None:
    da = pytest.importorskip("dask.array")
    from spacr_accel_core import dask as sad

    rng = np.random.default_rng(8)
    stack = rng.standard_normal((3, 4, 17, 23)).astype(np.float32)
    stack[2, 1, 4, 4] = np.nan
    for chunks in ((1, 2, 17, 23), (3, 4, 5, 6), (2, 3, 17, 7)):
        lazy = da.from_array(stack, chunks=chunks)
        for q in ([0.0, 90.0], 70.0):
            _same(sad.percentiles(lazy, q).compute(), ops.percentiles(stack, q))
        bounds = ops.percentiles(stack, [0.0, 90.0])
        _same(sad.rescale_fields(lazy, 1.0, bounds[..., 0], bounds[..., 1]).compute(),
              ops.rescale_fields(stack, 1.0, bounds[..., 0], bounds[..., 1]))
    with pytest.raises(TypeError, match="stack must hold real numbers"):
        sad.percentiles(da.from_array(np.array([["a"]])), 50)


def test_dask_declares_the_finite_fields_dtype_for_a_stack_of_nan_fields() -> None:
    """The one dtype that depends on the data (every field NaN, a float64 ``q``): a lazy array must
    declare its dtype before reading the data, so it is the finite fields' float64, with the NaN."""
    import dask.array as da

    from spacr_accel_core import dask as accel_dask

    every = np.full((4, 3, 3), np.nan, np.float32)
    some = every.copy()
    some[2] = 5.0
    for stack in (every, some):
        lazy = accel_dask.percentiles(da.from_array(stack, chunks=(1, 3, 3)), np.float64(70.0), gpu=False)
        got = lazy.compute()
        assert lazy.dtype == got.dtype == np.float64
        assert np.array_equal(got, ops.percentiles(stack, np.float64(70.0)).astype(np.float64), equal_nan=True)
