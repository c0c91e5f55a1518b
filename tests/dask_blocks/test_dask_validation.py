"""Bad input fails with the words of `spacr_accel_core.ops`: shapes and dtypes before any graph is
built (the call itself raises; nothing is computed), values (NaN coordinates) from the compute."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from spacr_accel_core import dask as sad
from spacr_accel_core import ops


def same_error(kind, dask_call, ops_call):
    with pytest.raises(kind) as from_dask:
        dask_call()
    with pytest.raises(kind) as from_ops:
        ops_call()
    assert str(from_dask.value) == str(from_ops.value)
    return str(from_dask.value)


class Untouchable:
    """A dask array whose blocks fail loudly if anything ever computes them."""

    @staticmethod
    def array(shape, chunks, dtype=np.float64):
        def refuse(block_info=None):
            raise AssertionError("a block was computed before the input was checked")

        return da.map_blocks(refuse, chunks=da.core.normalize_chunks(chunks, shape), dtype=dtype,
                             meta=np.empty((0,) * len(shape), dtype=dtype))


def test_field_of_one_dimension_is_refused_with_the_words_2_D():
    with pytest.raises(ValueError, match="2-D") as caught:
        sad.maximum_filter(Untouchable.array((10,), 5), 3)
    assert "field" in str(caught.value)


def test_a_stack_of_fields_is_accepted_not_refused():
    out = sad.maximum_filter(da.zeros((2, 3, 4, 5), chunks=2), 3)
    assert out.shape == (2, 3, 4, 5) and out.dtype == np.float32


@pytest.mark.parametrize("size, kind", [(-1, ValueError), (2.5, ValueError), (True, TypeError), ("3", TypeError)])
def test_size_errors_are_the_ops_errors(size, kind):
    field = np.zeros((4, 4))
    same_error(kind, lambda: sad.maximum_filter(Untouchable.array((4, 4), 2), size),
               lambda: ops.maximum_filter(field, size))


def test_non_numeric_field_is_refused_like_ops():
    strings = np.array([["a", "b"], ["c", "d"]])
    same_error(TypeError, lambda: sad.maximum_filter(da.from_array(strings, chunks=1), 3),
               lambda: ops.maximum_filter(strings, 3))


def test_points_of_three_dimensions_are_refused_like_ops():
    cube = np.zeros((4, 2, 2))
    message = same_error(ValueError, lambda: sad.nearest_neighbours(Untouchable.array((4, 2, 2), 2), cube[0]),
                         lambda: ops.nearest_neighbours(cube, cube[0]))
    assert "2-D" in message
    same_error(ValueError, lambda: sad.nearest_neighbours(Untouchable.array((4, 2), 2), cube),
               lambda: ops.nearest_neighbours(cube[0], cube))


def test_mismatched_widths_are_refused_like_ops_before_any_task():
    message = same_error(ValueError, lambda: sad.nearest_neighbours(Untouchable.array((9, 2), 3), np.zeros((4, 3))),
                         lambda: ops.nearest_neighbours(np.zeros((9, 2)), np.zeros((4, 3))))
    assert "same width" in message
    same_error(ValueError, lambda: sad.nearest_neighbours(Untouchable.array((9, 0), 3), np.zeros((4, 0))),
               lambda: ops.nearest_neighbours(np.zeros((9, 0)), np.zeros((4, 0))))


@pytest.mark.parametrize("chunk, kind", [(0, ValueError), (1.5, ValueError)])
def test_chunk_errors_are_the_ops_errors(chunk, kind):
    points = np.zeros((3, 2))
    same_error(kind, lambda: sad.nearest_neighbours(Untouchable.array((3, 2), 2), points, chunk=chunk),
               lambda: ops.nearest_neighbours(points, points, chunk=chunk))


def test_matmul_shape_errors_are_the_ops_errors():
    for a_shape, b_shape in [((6, 3), (4, 2)), ((6, 3), (4,)), ((2, 6, 3), (4, 2))]:
        first, second = np.ones(a_shape), np.ones(b_shape)
        same_error(ValueError, lambda a=a_shape, b=second: sad.matmul(Untouchable.array(a, 2), b),
                   lambda a=first, b=second: ops.matmul(a, b))
    same_error(TypeError, lambda: sad.matmul(Untouchable.array((4, 2), 2), np.array([["x"], ["y"]])),
               lambda: ops.matmul(np.ones((4, 2)), np.array([["x"], ["y"]])))
    same_error(ValueError, lambda: sad.matmul(Untouchable.array((4, 2), 2), np.float64(2.0)),
               lambda: ops.matmul(np.ones((4, 2)), np.float64(2.0)))


def test_matmul_first_must_be_the_tall_chunked_operand():
    with pytest.raises(ValueError, match="first must be at least 2-D"):
        sad.matmul(Untouchable.array((4,), 2), np.ones((4, 2)))
    with pytest.raises(ValueError, match="second must be 1-D or 2-D"):
        sad.matmul(Untouchable.array((4, 2), 2), np.ones((3, 2, 2)))


def test_unknown_chunk_sizes_are_named():
    x = da.from_array(np.arange(20.0).reshape(4, 5), chunks=2)
    ragged = x[x[:, 0] > 1]
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        sad.maximum_filter(ragged, 3)


@pytest.mark.parametrize("where", ["source", "target"])
def test_nan_coordinates_raise_from_the_compute_with_the_ops_words(where):
    source, target = np.zeros((40, 2)), np.ones((7, 2))
    (source if where == "source" else target)[5, 1] = np.nan
    lazy = sad.nearest_neighbours(da.from_array(source, chunks=8), target)  # no error yet: values
    with pytest.raises(ValueError) as from_ops:
        ops.nearest_neighbours(source, target)
    with pytest.raises(ValueError) as from_dask:
        dask.compute(*lazy, scheduler="threads")
    assert str(from_dask.value) == str(from_ops.value)
    assert "NaN" in str(from_dask.value)


def test_backend_and_gpu_reach_every_block_as_in_ops():
    import spacr_accel_core

    field = np.arange(36.0).reshape(6, 6)
    with pytest.raises(spacr_accel_core.BackendUnavailable) as from_ops:
        ops.maximum_filter(field, 3, backend="no-such-backend")
    with pytest.raises(spacr_accel_core.BackendUnavailable) as from_dask:
        sad.maximum_filter(da.from_array(field, chunks=3), 3, backend="no-such-backend").compute(scheduler="sync")
    assert str(from_dask.value) == str(from_ops.value)
    with sad.tally() as counted:
        sad.maximum_filter(da.from_array(field, chunks=3), 3, gpu=False, backend="numpy").compute(scheduler="sync")
    assert counted.report.by_backend() == {"numpy": 4}
