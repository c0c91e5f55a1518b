"""What the numba backend declines (points of a tree's width, points crowding its grid, a window
whose block buffers it will not hold) goes to the floor, named as the backend that served it; a
call forcing numba meets the decline's reason as its error."""

from __future__ import annotations

import numpy as np
import pytest

from spacr_accel_core import last_dispatch, ops
from spacr_accel_core.testing import reference_nearest


def test_what_it_declines_goes_to_the_floor_named() -> None:
    rng = np.random.default_rng(3)
    middling = rng.standard_normal((400, 4)).astype(np.float32)  # a tree's width: the floor's
    ops.nearest_neighbours(middling, middling[::-1])
    served = last_dispatch()
    assert served is not None and served.backend == "numpy"
    assert "go to a tree" in dict(served.declined)["numba"]
    clustered = np.repeat(rng.standard_normal((3, 2)), 400, axis=0).astype(np.float32)
    with pytest.raises(RuntimeError, match="crowd"):
        ops.nearest_neighbours(clustered[:50], clustered, backend="numba")
    index, _ = ops.nearest_neighbours(clustered[:50], clustered)
    assert np.array_equal(index, reference_nearest(clustered[:50], clustered)[0])
    with pytest.raises(RuntimeError, match="MiB of block buffers"):
        ops.maximum_filter(np.zeros((3000, 4096), np.float32), 2001, backend="numba")
