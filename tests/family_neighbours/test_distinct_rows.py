"""``exact.distinct_rows`` (identical targets searched once) against a plain, independently written
reference: the first copy of each row kept, signed zeros merged, distinct points declined."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core.exact import distinct_rows


def plain_first_copies(points: np.ndarray) -> np.ndarray:
    """The lowest index of each distinct row, by a dictionary (``-0.0`` and ``+0.0`` are one value)."""
    seen: dict[tuple[float, ...], int] = {}
    for index, row in enumerate(points.astype(np.float64) + 0.0):
        seen.setdefault(tuple(row.tolist()), index)
    return np.array(sorted(seen.values()), dtype=np.int64)


@st.composite
def duplicated_points(draw):
    width = draw(st.integers(1, 9))
    pool = draw(hnp.arrays(np.float32, (draw(st.integers(1, 12)), width),
                           elements=st.sampled_from([0.0, -0.0, 1.0, -2.5, 1e7, 3e-30, 7.0])))
    picks = draw(hnp.arrays(np.int64, draw(st.integers(2, 200)), elements=st.integers(0, pool.shape[0] - 1)))
    return pool[picks]


@settings(max_examples=150, deadline=None)
@given(points=duplicated_points())
def test_distinct_rows_keeps_exactly_the_first_copy_of_each_row(points):
    found = distinct_rows(points)
    expected = plain_first_copies(points)
    if found is None:
        # Allowed only where a search loses nothing by skipping it: no duplicate rows at all, or few
        # repeats of the first coordinate.
        column = np.sort(points[:, 0])
        few = np.count_nonzero(column[1:] == column[:-1]) * 64 <= points.shape[0]
        assert few or len(expected) == points.shape[0], (points, expected)
    else:
        keep, owner = found
        assert keep.dtype == np.int64 and owner.dtype == np.int64
        assert np.array_equal(keep, expected)
        # Every row is its copy's row (signed zeros aside), and its copy is no later than itself.
        assert np.array_equal(points[keep][owner] + np.float32(0), points + np.float32(0))
        assert (keep[owner] <= np.arange(points.shape[0])).all()


def test_distinct_rows_merges_signed_zeros_and_declines_distinct_points():
    points = np.array([[0.0, 1.0], [-0.0, 1.0], [0.0, -0.0], [0.0, 1.0]] * 40, dtype=np.float32)
    keep, owner = distinct_rows(points)
    assert np.array_equal(keep, [0, 2]) and np.array_equal(owner[:4], [0, 0, 1, 0])
    rng = np.random.default_rng(0)
    assert distinct_rows(rng.uniform(0, 2048, (10_000, 2)).astype(np.float32)) is None
    # The first coordinate repeats on a pixel grid, the rows do not: nothing to remove.
    grid = np.stack(np.meshgrid(np.arange(50), np.arange(50)), -1).reshape(-1, 2).astype(np.float32)
    assert distinct_rows(grid) is None
