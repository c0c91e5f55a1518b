"""The compiled kernels against the plain reference and the NumPy floor, on the same inputs.

Both comparisons are bitwise (float32 bytes of the filter, int64 indices and float32 distances of
the search): the numba backend must be the floor's answer, faster, never a near miss.
"""

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
