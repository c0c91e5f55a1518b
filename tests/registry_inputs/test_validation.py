"""Bad input gets a clear ValueError/TypeError naming the argument, before any backend runs."""

from __future__ import annotations

import types
from collections import Counter

import numpy as np
import pytest

import spacr_accel_core
from spacr_accel_core import BackendInfo, Declaration, PluginFault, hookimpl, ops


@pytest.fixture
def spy():
    """A plugin ranked first that counts every call it gets (validation must stop them all)."""
    module = types.ModuleType("spacr_accel_test_spy")
    calls: Counter[str] = Counter()
    module.calls = calls
    module.SPACR_ACCEL_PLUGIN = Declaration(name="spy", priority=1e9)

    @hookimpl
    def spacr_accel_backend_info() -> BackendInfo:
        return BackendInfo()

    @hookimpl
    def spacr_accel_maximum_filter(field, size):
        calls["maximum_filter"] += 1
        raise AssertionError("validation let bad input through")

    @hookimpl
    def spacr_accel_matmul(first, second):
        calls["matmul"] += 1
        raise AssertionError("validation let bad input through")

    @hookimpl
    def spacr_accel_nearest_neighbours(source, target, chunk):
        calls["nearest_neighbours"] += 1
        raise AssertionError("validation let bad input through")

    for hook in (spacr_accel_backend_info, spacr_accel_maximum_filter, spacr_accel_matmul,
                 spacr_accel_nearest_neighbours):
        setattr(module, hook.__name__, hook)
    spacr_accel_core.register(module, "spy")
    spacr_accel_core.refresh()
    try:
        yield module
    finally:
        spacr_accel_core.unregister("spy")
        spacr_accel_core.refresh()


GOOD_FIELD = np.ones((4, 5), np.float32)
GOOD_POINTS = np.ones((3, 2), np.float32)

# (call, exception type, words the message must contain)
BAD_CALLS = [
    # maximum_filter: the seed's "2-D" wording, the argument named
    (lambda **k: ops.maximum_filter(np.ones(5), 3, **k), ValueError, ["field", "2-D"]),
    (lambda **k: ops.maximum_filter(GOOD_FIELD, 3, out=np.empty((5, 4), np.float32), **k), ValueError,
     ["out", "shape"]),
    (lambda **k: ops.maximum_filter(np.float32(1), 3, **k), ValueError, ["field", "2-D"]),
    (lambda **k: ops.maximum_filter(np.array([["a", "b"]]), 3, **k), TypeError, ["field"]),
    (lambda **k: ops.maximum_filter(np.ones((2, 2), complex), 3, **k), TypeError, ["field"]),
    (lambda **k: ops.maximum_filter(np.ones((2, 2), object), 3, **k), TypeError, ["field"]),
    (lambda **k: ops.maximum_filter(np.ones((2, 2), "datetime64[s]"), 3, **k), TypeError, ["field"]),
    (lambda **k: ops.maximum_filter(GOOD_FIELD, -1, **k), ValueError, ["size", "-1"]),
    (lambda **k: ops.maximum_filter(GOOD_FIELD, -4, **k), ValueError, ["size"]),
    (lambda **k: ops.maximum_filter(GOOD_FIELD, 2.5, **k), ValueError, ["size", "whole number"]),
    (lambda **k: ops.maximum_filter(GOOD_FIELD, float("nan"), **k), ValueError, ["size"]),
    (lambda **k: ops.maximum_filter(GOOD_FIELD, float("inf"), **k), ValueError, ["size"]),
    (lambda **k: ops.maximum_filter([[1, 2], [3]], 3, **k), ValueError, ["field"]),
    (lambda **k: ops.maximum_filter(np.ma.masked_array(GOOD_FIELD), 3, **k), TypeError, ["field", "masked"]),
    (lambda **k: ops.matmul([[1, 2], [3]], np.ones((2, 2)), **k), ValueError, ["first"]),
    (lambda **k: ops.nearest_neighbours(GOOD_POINTS, np.ma.masked_array(GOOD_POINTS), **k), TypeError,
     ["target", "masked"]),
    (lambda **k: ops.maximum_filter(GOOD_FIELD, "3", **k), TypeError, ["size"]),
    (lambda **k: ops.maximum_filter(GOOD_FIELD, None, **k), TypeError, ["size"]),
    (lambda **k: ops.maximum_filter(GOOD_FIELD, True, **k), TypeError, ["size"]),
    # matmul
    (lambda **k: ops.matmul(np.float32(2), np.ones(3), **k), ValueError, ["first", "second"]),
    (lambda **k: ops.matmul(np.ones(3), 2.0, **k), ValueError, ["second"]),
    (lambda **k: ops.matmul(np.ones((2, 3)), np.ones((4, 2)), **k), ValueError, ["first", "second"]),
    (lambda **k: ops.matmul(np.ones(3), np.ones(4), **k), ValueError, ["first", "second"]),
    (lambda **k: ops.matmul(np.ones((2, 2, 3)), np.ones((3, 3, 2)), **k), ValueError, ["batch"]),
    (lambda **k: ops.matmul(np.array([["x"]]), np.ones((1, 1)), **k), TypeError, ["first"]),
    (lambda **k: ops.matmul(np.ones((1, 1)), np.ones((1, 1), complex), **k), TypeError, ["second"]),
    # nearest_neighbours: the seed's "2-D" and "same width" wording
    (lambda **k: ops.nearest_neighbours(np.ones(3), GOOD_POINTS, **k), ValueError, ["source", "2-D"]),
    (lambda **k: ops.nearest_neighbours(GOOD_POINTS, np.ones((2, 2, 2)), **k), ValueError, ["target", "2-D"]),
    (lambda **k: ops.nearest_neighbours(GOOD_POINTS, np.ones((3, 3)), **k), ValueError, ["same width"]),
    (lambda **k: ops.nearest_neighbours(np.ones((0, 2)), np.ones((0, 3)), **k), ValueError, ["same width"]),
    (lambda **k: ops.nearest_neighbours(np.ones((3, 0)), np.ones((2, 0)), **k), ValueError, ["coordinate"]),
    (lambda **k: ops.nearest_neighbours(np.array([["a", "b"]]), GOOD_POINTS, **k), TypeError, ["source"]),
    (lambda **k: ops.nearest_neighbours(GOOD_POINTS, np.ones((2, 2), complex), **k), TypeError, ["target"]),
    (lambda **k: ops.nearest_neighbours(GOOD_POINTS, GOOD_POINTS, chunk=0, **k), ValueError, ["chunk"]),
    (lambda **k: ops.nearest_neighbours(GOOD_POINTS, GOOD_POINTS, chunk=-5, **k), ValueError, ["chunk"]),
    (lambda **k: ops.nearest_neighbours(GOOD_POINTS, GOOD_POINTS, chunk=2.5, **k), ValueError, ["chunk"]),
    (lambda **k: ops.nearest_neighbours(GOOD_POINTS, GOOD_POINTS, chunk=None, **k), TypeError, ["chunk"]),
    (lambda **k: ops.nearest_neighbours(GOOD_POINTS, GOOD_POINTS, chunk=False, **k), TypeError, ["chunk"]),
    (lambda **k: ops.nearest_neighbours(np.array([[0.0, np.nan]]), GOOD_POINTS, **k), ValueError,
     ["source", "NaN"]),
    (lambda **k: ops.nearest_neighbours(GOOD_POINTS, np.array([[np.inf, 0.0]]), **k), ValueError,
     ["target", "infinite"]),
    (lambda **k: ops.nearest_neighbours(GOOD_POINTS, np.array([[-np.inf, 0.0]]), **k), ValueError, ["target"]),
    # finite in float64, infinite once taken as float32
    (lambda **k: ops.nearest_neighbours(np.array([[1e39, 0.0]]), GOOD_POINTS, **k), ValueError, ["source"]),
    # NaN in an otherwise empty-target call is still refused
    (lambda **k: ops.nearest_neighbours(np.array([[np.nan, 0.0]]), np.empty((0, 2)), **k), ValueError,
     ["source"]),
]


# 1e39 is finite in float64: taking it as float32 overflows (numpy warns) and is then refused.
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@pytest.mark.parametrize(("bad_call", "error", "words"), BAD_CALLS, ids=[str(i) for i in range(len(BAD_CALLS))])
@pytest.mark.parametrize("how", ["auto", "forced", "gpu_false"])
def test_bad_input_is_refused_before_any_backend(spy, bad_call, error, words, how):
    kwargs = {"auto": {}, "forced": {"backend": "spy"}, "gpu_false": {"gpu": False}}[how]
    with pytest.raises(error) as info:
        bad_call(**kwargs)
    assert type(info.value) is error  # a plain ValueError/TypeError, not a backend error subclass
    for word in words:
        assert word in str(info.value), (word, str(info.value))
    assert spy.calls == {}


def test_validation_precedes_an_unknown_backend_name():
    with pytest.raises(ValueError, match="2-D"):
        ops.maximum_filter(np.ones(4), 3, backend="no-such-backend")
    with pytest.raises(ValueError, match="same width"):
        ops.nearest_neighbours(GOOD_POINTS, np.ones((2, 5)), backend="no-such-backend")


def test_the_spy_does_see_good_input(spy):
    """The control for the test above: well-formed input does reach the plugin ranked first."""
    with pytest.raises(PluginFault, match="validation let") as info:
        ops.matmul(np.ones((2, 2)), np.ones((2, 2)), backend="spy")
    assert isinstance(info.value.__cause__, AssertionError)
    assert spy.calls["matmul"] == 1


def test_a_stack_of_fields_is_filtered_field_by_field():
    """A 3-D array is a stack ``(..., H, W)``: each field filtered on its own, the window never crossing fields."""
    stack = np.random.default_rng(2).standard_normal((3, 6, 7)).astype(np.float32)
    got = ops.maximum_filter(stack, 3)
    for field, filtered in zip(stack, got, strict=True):
        np.testing.assert_array_equal(filtered, ops.maximum_filter(field, 3))


@pytest.mark.parametrize(("size", "corner"), [(3, 6.0), (np.int8(3), 6.0), (np.uint64(3), 6.0),
                                             (np.int64(4), 12.0), (5, 12.0), (3.0, 6.0), (np.float32(3), 6.0),
                                             (np.float64(5), 12.0)])
def test_integer_like_sizes_are_accepted(size, corner):
    field = np.arange(20, dtype=np.float32).reshape(4, 5)
    result = ops.maximum_filter(field, size)
    assert result[0, 0] == corner  # the corner window reaches field[1, 1] (3x3) or field[2, 2] (5x5)
    assert result.shape == field.shape


def test_sequences_and_bools_are_numeric_input():
    np.testing.assert_array_equal(ops.maximum_filter([[0, 1], [2, 3]], 3), np.full((2, 2), 3, np.float32))
    np.testing.assert_array_equal(ops.maximum_filter(np.eye(3, dtype=bool), 3)[0], [1, 1, 1])
    np.testing.assert_array_equal(ops.matmul([[1, 2]], [[3], [4]]), [[11.0]])
    index, distance = ops.nearest_neighbours([[0, 0]], [[3, 4], [1, 0]], chunk=np.int32(1))
    assert index.tolist() == [1] and distance.tolist() == [1.0]


def test_input_arrays_are_not_modified():
    source = np.array([[0.5, 1.5], [2.0, 3.0]], dtype=np.float64)
    target = np.array([[0.0, 0.0], [2.0, 2.0]], dtype=np.float64)
    field = np.arange(12.0).reshape(3, 4)
    copies = [a.copy() for a in (source, target, field)]
    ops.nearest_neighbours(source, target)
    ops.maximum_filter(field, 3)
    ops.matmul(source, target)
    for before, after in zip(copies, (source, target, field), strict=True):
        np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize(("call", "words"), [
    (lambda: ops.matmul(np.ones((2, 2)), np.ones((2, 2)), gpu="False"), ["gpu", "True or False"]),
    (lambda: ops.maximum_filter(np.ones((2, 2)), 3, gpu=None), ["gpu"]),
    (lambda: ops.nearest_neighbours(GOOD_POINTS, GOOD_POINTS, gpu=2), ["gpu", "1 or 0"]),
    (lambda: ops.matmul(np.ones((2, 2)), np.ones((2, 2)), backend=["numpy"]), ["backend", "name"]),
    (lambda: ops.maximum_filter(np.ones((2, 2)), 3, backend=""), ["backend"]),
    (lambda: ops.accelerated_backends(gpu="no"), ["gpu"]),
])
def test_keywords_are_checked(call, words):
    with pytest.raises(TypeError) as info:
        call()
    for word in words:
        assert word in str(info.value)


def test_numpy_bools_are_bools():
    assert ops.matmul(np.ones((1, 1)), np.ones((1, 1)), gpu=np.False_).tolist() == [[1.0]]


@pytest.mark.parametrize("make", [
    lambda torch: torch.ones((2, 2), requires_grad=True),
    lambda torch: torch.ones((2, 2), dtype=torch.complex64).conj(),
])
def test_a_torch_tensor_numpy_cannot_read_is_a_type_error_naming_the_argument(make):
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="second cannot be read as a NumPy array"):
        ops.matmul(np.ones((2, 2)), make(torch))
    with pytest.raises(TypeError, match="field"):
        ops.maximum_filter(make(torch), 3)


def test_a_whole_float_chunk_is_taken_as_rows():
    index, distance = ops.nearest_neighbours(GOOD_POINTS, GOOD_POINTS, chunk=np.float32(1.0))
    want_index, want_distance = ops.nearest_neighbours(GOOD_POINTS, GOOD_POINTS, chunk=1)
    assert index.tolist() == want_index.tolist() and distance.tolist() == want_distance.tolist()
