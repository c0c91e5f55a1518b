"""The shared exact nearest-neighbour machinery in ``spacr_accel_core.exact``, on its own.

Every backend's exactness rests on two promises made here: the tie rule of ``pick_lowest``, and
the error margin of ``expansion_plan`` (the true nearest is always a candidate, at any magnitude,
in any width, even where a device flushes subnormals)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spacr_accel_core.exact import (
    EXACT_IN_FLOAT32,
    ExpansionPlan,
    exact_squared,
    expansion_plan,
    pick_lowest,
    pick_lowest_dense,
)

F32_UNIT = 2.0 ** -24
TINY32 = np.float32(np.finfo(np.float32).tiny)


def plain_squared(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Every pair's contract distance, written out independently: float64, coordinates in order."""
    s = source.astype(np.float64)
    t = target.astype(np.float64)
    total = np.zeros((s.shape[0], t.shape[0]))
    for axis in range(s.shape[1]):
        total += np.square(s[:, None, axis] - t[None, :, axis])
    return total


# ---- exact_squared -------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(data=st.data(), dims=st.integers(1, 12))
def test_exact_squared_is_the_ordered_float64_sum(data: st.DataObject, dims: int) -> None:
    bound = float(np.float32(1e30))
    values = st.floats(-bound, bound, allow_nan=False, width=32)
    source = data.draw(hnp.arrays(np.float32, (data.draw(st.integers(1, 8)), dims), elements=values))
    target = data.draw(hnp.arrays(np.float32, (data.draw(st.integers(1, 8)), dims), elements=values))
    s64, t64 = source.astype(np.float64), target.astype(np.float64)
    expected = plain_squared(source, target)
    assert np.array_equal(exact_squared(s64[:, None, :], t64[None, :, :]), expected)
    rows, cols = np.nonzero(np.ones(expected.shape, dtype=bool))
    assert np.array_equal(exact_squared(s64, t64, rows, cols), expected[rows, cols])
    assert np.array_equal(exact_squared(s64[rows], t64[cols]), expected[rows, cols])


def test_exact_squared_wants_both_index_arrays_or_neither() -> None:
    points = np.zeros((3, 2))
    with pytest.raises(ValueError, match="both"):
        exact_squared(points, points, rows=np.arange(3))


def test_exact_in_float32_holds_the_narrow_dtypes_only() -> None:
    assert np.dtype(np.uint16) in EXACT_IN_FLOAT32 and np.dtype(np.float32) in EXACT_IN_FLOAT32
    assert not {np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float64)} & EXACT_IN_FLOAT32


# ---- pick_lowest ---------------------------------------------------------------------------------


@st.composite
def candidates(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    count = draw(st.integers(0, 12))
    extra = draw(st.integers(0, 40)) if count else 0
    # Every row at least once, then more pairs for random rows, in a random order.
    more = draw(hnp.arrays(np.int64, extra, elements=st.integers(0, max(0, count - 1))))
    rows = np.concatenate([np.arange(count), more])
    rows = rows[draw(st.permutations(range(rows.size)))] if rows.size else rows.astype(np.int64)
    cols = draw(hnp.arrays(np.int64, rows.size, elements=st.integers(0, 30)))
    # Few distinct distances, so equal distances (the tie rule) are common.
    squared = draw(hnp.arrays(np.float64, rows.size, elements=st.sampled_from([0.0, 1.0, 2.5, 1e300, 5e-324])))
    return rows.astype(np.int64), cols, squared, count


@settings(max_examples=200, deadline=None)
@given(case=candidates())
def test_pick_lowest_takes_the_smallest_distance_then_the_lowest_column(case) -> None:
    rows, cols, squared, count = case
    index, best = pick_lowest(rows, cols, squared, count)
    assert index.dtype == np.int64 and best.dtype == np.float64 and index.shape == best.shape == (count,)
    for row in range(count):
        mine = rows == row
        smallest = squared[mine].min()
        assert best[row] == smallest
        assert index[row] == cols[mine][squared[mine] == smallest].min()


@settings(max_examples=100, deadline=None)
@given(block=hnp.arrays(np.float64, st.tuples(st.integers(0, 8), st.integers(1, 12)),
                        elements=st.sampled_from([0.0, 1.0, 2.5, 1e300, 5e-324])))
def test_pick_lowest_dense_is_pick_lowest_over_every_pair(block: np.ndarray) -> None:
    n, m = block.shape
    rows, cols = np.divmod(np.arange(n * m, dtype=np.int64), m)
    expected = pick_lowest(rows, cols, block.ravel(), n)
    index, best = pick_lowest_dense(block)
    assert index.dtype == np.int64 and best.dtype == np.float64
    assert np.array_equal(index, expected[0]) and np.array_equal(best, expected[1])


def test_pick_lowest_refuses_a_row_without_a_candidate() -> None:
    rows = np.array([0, 0, 2])
    with pytest.raises(ArithmeticError, match="no candidate"):
        pick_lowest(rows, np.array([3, 1, 0]), np.array([1.0, 1.0, 2.0]), 3)


# ---- expansion_plan ------------------------------------------------------------------------------

MAGNITUDES = [1.0, 1e19, 3e37, 1e-22, 3e-23, 1e-3, 1e5]


@st.composite
def point_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    dims = draw(st.integers(1, 64))
    n, m = draw(st.integers(1, 24)), draw(st.integers(1, 24))
    scale = np.float32(draw(st.sampled_from(MAGNITUDES)))
    kind = draw(st.sampled_from(["uniform", "grid", "cluster", "mixed"]))
    unit = st.floats(-1, 1, allow_nan=False, width=32)
    source = draw(hnp.arrays(np.float32, (n, dims), elements=unit))
    target = draw(hnp.arrays(np.float32, (m, dims), elements=unit))
    if kind == "grid":  # many exact ties
        source, target = np.round(source * 2), np.round(target * 2)
    elif kind == "cluster":  # a tight cluster far from the origin: what float32 cannot tell apart
        offset = np.float32(draw(st.sampled_from([1.0, 1000.0, -3e5])))
        if abs(float(offset) * float(scale)) > 1e38:  # keep every coordinate finite in float32
            offset = np.float32(1.0)
        source, target = offset + source * np.float32(1e-3), offset + target * np.float32(1e-3)
    source = (source.astype(np.float64) * float(scale)).astype(np.float32)
    target = (target.astype(np.float64) * float(scale)).astype(np.float32)
    assert np.all(np.isfinite(source)) and np.all(np.isfinite(target))
    if kind == "mixed":  # a far outlier beside points many orders of magnitude smaller
        source[0, 0] = np.float32(draw(st.sampled_from([1.0, 1e19, 3e37])))
    if draw(st.booleans()):  # duplicate targets: the lowest index must stay a candidate
        target[draw(st.integers(0, m - 1))] = source[draw(st.integers(0, n - 1))]
    return source, target


def flushed_product(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``left @ right`` in float32 as the worst device would run it: every input, product and
    partial sum below float32's smallest normal number flushed to zero, summed in order."""

    def flush(values: np.ndarray) -> np.ndarray:
        return np.where(np.abs(values) < TINY32, np.float32(0), values).astype(np.float32)

    left, right = flush(left), flush(right)
    total = np.zeros((left.shape[0], right.shape[1]), dtype=np.float32)
    for k in range(left.shape[1]):
        total = flush(total + flush(left[:, k, None] * right[None, k, :]))
    return total


def tf32_product(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """A float32 product as tensor cores run it under TF32: inputs truncated to 10 mantissa bits."""

    def truncate(values: np.ndarray) -> np.ndarray:
        return (np.ascontiguousarray(values).view(np.int32) & ~0x1FFF).view(np.float32)

    return truncate(left) @ truncate(right)


def assert_true_nearest_is_a_candidate(plan: ExpansionPlan, approx: np.ndarray,
                                       source: np.ndarray, target: np.ndarray) -> None:
    assert approx.dtype == plan.margin.dtype
    threshold = approx.min(axis=1) + plan.margin  # in the work dtype, as the backends compare
    exact = plain_squared(source, target)
    nearest = np.argmin(exact, axis=1)  # the first minimum: the contract's answer
    rows = np.arange(source.shape[0])
    missed = approx[rows, nearest] > threshold
    assert not missed.any(), (
        f"rows {np.flatnonzero(missed)} lost their true nearest: approx {approx[rows, nearest][missed]}, "
        f"threshold {threshold[missed]}"
    )


@settings(max_examples=300, deadline=None)
@given(points=point_sets())
def test_the_true_nearest_is_always_within_the_margin_of_a_float32_gemm(points) -> None:
    source, target = points
    plan = expansion_plan(source, target, np.float32, F32_UNIT)
    n, m, dims = source.shape[0], target.shape[0], source.shape[1]
    assert plan.left.shape == (n, dims + 1) and plan.right.shape == (dims + 1, m)
    assert plan.left.dtype == plan.right.dtype == plan.margin.dtype == np.float32
    assert plan.left.flags.c_contiguous and plan.right.flags.c_contiguous
    # The scaling keeps every operand, and the product, far inside float32's range.
    assert np.abs(plan.left).max() <= 4 and np.abs(plan.right[:dims]).max() <= 2
    assert np.all(np.isfinite(plan.margin)) and np.all(plan.margin > 0)
    approx = plan.left @ plan.right
    assert np.all(np.isfinite(approx))
    assert_true_nearest_is_a_candidate(plan, approx, source, target)
    # Even where a device flushes every subnormal to zero, summing in order.
    assert_true_nearest_is_a_candidate(plan, flushed_product(plan.left, plan.right), source, target)


@settings(max_examples=100, deadline=None)
@given(points=point_sets())
def test_the_margin_follows_the_unit_roundoff_it_is_given(points) -> None:
    """A TF32 product (unit 2**-10) stays safe behind a margin told so; float64 work does too."""
    source, target = points
    plan = expansion_plan(source, target, np.float32, 2.0 ** -10)
    assert_true_nearest_is_a_candidate(plan, tf32_product(plan.left, plan.right), source, target)
    wide = expansion_plan(source, target, np.float64, 2.0 ** -53)
    assert wide.margin.dtype == np.float64
    assert_true_nearest_is_a_candidate(wide, wide.left @ wide.right, source, target)


def test_the_margin_is_rounded_up_to_the_work_dtype() -> None:
    rng = np.random.default_rng(4)
    source = rng.standard_normal((50, 9)).astype(np.float32)
    target = rng.standard_normal((40, 9)).astype(np.float32)
    plan = expansion_plan(source, target, np.float32, F32_UNIT)
    wide = expansion_plan(source, target, np.float64, F32_UNIT)  # the same bound, kept in float64
    assert np.all(plan.margin.astype(np.float64) >= wide.margin - 16 * 11 * np.finfo(np.float64).tiny)


def test_a_single_point_and_identical_points_get_a_positive_margin() -> None:
    point = np.array([[3.0, -2.0]], np.float32)
    plan = expansion_plan(point, point, np.float32, F32_UNIT)
    assert np.all(plan.margin > 0) and np.all(np.isfinite(plan.left)) and np.all(np.isfinite(plan.right))
    same = np.zeros((4, 3), np.float32)
    plan = expansion_plan(same, same, np.float32, F32_UNIT)
    assert np.all(plan.left @ plan.right <= (plan.left @ plan.right).min(axis=1) + plan.margin)


def test_the_work_dtype_must_be_float32_or_float64() -> None:
    with pytest.raises(TypeError, match="float32 or float64"):
        expansion_plan(np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32), np.float16, 2.0 ** -11)
