"""Edges an adversarial review of the window maxima's inputs found: points of the wrong shape or
kind (masked, float16, unsigned or integers past int64, integers in an object array), no points,
and the ``stack`` argument named as itself. Each is checked on the backends forced by name and on
automatic dispatch, so the rule is the core's, not one backend's luck."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from spacr_accel_core import ops

BACKENDS = ["numpy", "numba", None]
STACK = np.random.default_rng(4).random((2, 3, 6, 7)).astype(np.float32)


# ---- window_maxima: the stack and the points ---------------------------------------------------


def test_window_maxima_names_its_stack() -> None:
    """The argument is ``stack``; the messages said ``field``."""
    with pytest.raises(ValueError, match=r"stack must be a 2-D array \(or a stack"):
        ops.window_maxima(np.ones(5), [[0, 0]], 3)
    with pytest.raises(TypeError, match="stack must hold real numbers"):
        ops.window_maxima(STACK.astype(complex), [[0, 0]], 3)
    with pytest.raises(TypeError, match="stack is a masked array"):
        ops.window_maxima(np.ma.array(STACK), [[0, 0]], 3)


@pytest.mark.parametrize("points", [np.zeros((2, 0)), np.zeros((0, 3)), [[]], np.zeros((0, 2, 1))])
def test_points_not_n_by_2_are_refused_even_when_empty(points: object) -> None:
    """``(2, 0)`` (two points without coordinates) was reshaped to ``(0, 2)`` and answered with no
    rows; ``(0, 3)`` and ``[[]]`` were taken as no points."""
    with pytest.raises(ValueError, match=r"points must be an \(N, 2\) array"):
        ops.window_maxima(STACK, points, 3)


def test_no_points_are_an_empty_list_or_zero_rows() -> None:
    for points in ([], np.zeros((0, 2), np.int64), np.zeros(0)):
        got = ops.window_maxima(STACK, points, 3)
        assert got.shape == (0, 2, 3) and got.dtype == np.float32


def test_masked_points_are_refused() -> None:
    """The mask was silently ignored: a read under it was measured as real."""
    points = np.ma.array([[1, 2], [3, 4]], mask=[[0, 0], [1, 1]])
    with pytest.raises(TypeError, match="points is a masked array"):
        ops.window_maxima(STACK, points, 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float16_points_warn_nothing(backend: str | None) -> None:
    """The range check compared float16 coordinates with ``2.0 ** 62``, which overflows float16:
    a RuntimeWarning for valid points (an exception under ``-W error``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ops.window_maxima(STACK, np.array([[1, 2], [5, 6]], np.float16), 3, backend=backend)
    assert got.tobytes() == ops.window_maxima(STACK, [[1, 2], [5, 6]], 3).tobytes()


def test_unsigned_points_beyond_int64_are_not_reported_wrapped() -> None:
    """A uint64 coordinate of 2**63 was cast to int64 first and reported as -9223372036854775808."""
    with pytest.raises(ValueError, match="points holds a coordinate outside the field") as raised:
        ops.window_maxima(STACK, np.array([[2**63, 0]], np.uint64), 3)
    assert "-9223372036854775808" not in str(raised.value)
    np.testing.assert_array_equal(ops.window_maxima(STACK, np.array([[5, 6]], np.uint64), 3),
                                  ops.window_maxima(STACK, [[5, 6]], 3))


@pytest.mark.parametrize("points", [[[2**70, 0]], [[1, -(2**64)]]])
def test_integer_points_past_int64_are_outside_not_non_integers(points: object) -> None:
    """Python integers past int64 make an object array: they were refused as "must hold integer
    pixel coordinates", which they do."""
    with pytest.raises(ValueError, match="points holds a coordinate outside the field"):
        ops.window_maxima(STACK, points, 3)
    with pytest.raises(ValueError, match="points must hold integer pixel coordinates, got dtype object"):
        ops.window_maxima(STACK, np.array([[1, 2.5]], dtype=object), 3)
    with pytest.raises(ValueError, match="points must hold integer pixel coordinates, got dtype object"):
        ops.window_maxima(STACK, np.array([[1, True]], dtype=object), 3)


@pytest.mark.parametrize("points", [np.array([[1, 2], [0, 3]], dtype=object),
                                    np.array([[np.int64(1), 2], [np.uint8(0), 3]], dtype=object)])
def test_integer_points_in_an_object_array_are_read_as_integers(points: np.ndarray) -> None:
    """An object array of integers (a table's mixed column) was refused as "must hold integer pixel
    coordinates", which it does, while the same integers past int64 were read as integers."""
    want = ops.window_maxima(STACK, np.array([[1, 2], [0, 3]]), 3)
    assert ops.window_maxima(STACK, points, 3).tobytes() == want.tobytes()
