"""An operation the table marks ``dask="fields"`` gets its Dask form with no code of its own:
blocks of whole fields, each field computed by ``ops`` (here built for ``maximum_filter``, a field
operation, and compared with both its own Dask form and ``ops`` on the whole stack)."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from spacr_accel_core import _dask, ops
from spacr_accel_core import dask as sad


def test_a_field_operation_from_the_table_alone_is_ops_field_by_field() -> None:
    rng = np.random.default_rng(3)
    stack = rng.choice(np.array([-1.0, -0.0, 0.0, 2.0, np.nan], np.float32), size=(3, 2, 19, 23))
    lazy = da.from_array(stack, chunks=(2, 1, 7, 9))  # rows and columns split: brought whole per block
    by_fields = _dask.by_fields("maximum_filter")
    with dask.config.set(scheduler="threads"):
        got = by_fields(lazy, 5).compute()
        own = sad.maximum_filter(lazy, 5).compute()
    want = ops.maximum_filter(stack, 5)
    assert got.dtype == np.float32 and got.tobytes() == want.tobytes() == own.tobytes()
    assert by_fields.__name__ == "maximum_filter" and "field by field" in (by_fields.__doc__ or "")


def test_the_shape_is_checked_before_any_graph_is_built() -> None:
    with pytest.raises(ValueError, match="field"):
        _dask.by_fields("maximum_filter")(da.zeros(5, chunks=2), 3)
