"""Phase correlation's hostile inputs on Dask: an expected shift past int64 refused when the
function is called (before any graph runs, with the in-memory call's words), and the answers that
are the core's rule (fields at any scale, 0-d tolerances) equal to the in-memory call."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from spacr_accel_core import dask as sad
from spacr_accel_core import ops

FIELDS = np.random.default_rng(8).random((2, 12, 10))
MOVED = np.roll(FIELDS, (2, -3), axis=(-2, -1))


def lazy(array: np.ndarray) -> da.Array:
    return da.from_array(array, chunks=(1, 5, 4))


def test_an_expected_shift_past_int64_is_refused_at_the_call() -> None:
    with pytest.raises(ValueError, match=r"expected\[0\] must be within"):
        sad.phase_correlate(lazy(FIELDS), lazy(MOVED), expected=(2**63 - 1, 0))


@pytest.mark.parametrize(("scale", "keywords"), [(1e-250, {}), (1e250, {"tolerance": np.array(4.0)}),
                                                 (1.0, {"tolerance": 10**400, "min_peak_ratio": np.array(2)})])
def test_phase_correlate_on_dask_is_the_in_memory_rule(scale: float, keywords: dict[str, object]) -> None:
    with dask.config.set(scheduler="sync"):
        found = sad.phase_correlate(lazy(FIELDS * scale), lazy(MOVED * scale), **keywords)  # type: ignore[arg-type]  # keywords of odd types on purpose: how they are read is the test
        got = {name: np.asarray(getattr(found, name).compute()) for name in ("dy", "dx", "peak_ratio", "accepted")}
    want = ops.phase_correlate(FIELDS * scale, MOVED * scale, **keywords)  # type: ignore[arg-type]  # keywords of odd types on purpose: how they are read is the test
    for name, value in got.items():
        np.testing.assert_array_equal(value, getattr(want, name))
    np.testing.assert_array_equal(got["dy"], [-2, -2])
    assert got["accepted"].all()
