"""ops.attribute_reads and ops.count_within: the input checks (before any backend), the answers the
core gives itself, the squared limit, and the backends against spaCR's own function, SciPy's tree
and the reference on drawn and crafted input (ties, the bound's rounding, zero areas)."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spacr_accel_core import last_dispatch, ops, reference, warm_up
from spacr_accel_core.operations._points import squared_limit

BACKENDS = ["numpy", "numba", *(["torch"] if importlib.util.find_spec("torch") else [])]
"""The backends that answer the point operations here (torch on the CPU where no card is)."""
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module", autouse=True)
def _numba_ready() -> None:
    warm_up("numba")


# ---- the checks ------------------------------------------------------------------------------


@pytest.mark.parametrize(("call", "error", "words"), [
    (lambda: ops.attribute_reads(np.zeros((3, 3)), np.zeros((1, 2)), [1.0]), ValueError, "peaks must be"),
    (lambda: ops.attribute_reads(np.zeros((3, 2)), np.zeros((2,)), [1.0]), ValueError, "centroids must be"),
    (lambda: ops.attribute_reads(np.zeros((3, 2)), np.zeros((2, 2)), [1.0]), ValueError, "areas must be one"),
    (lambda: ops.attribute_reads([[np.nan, 0.0]], np.zeros((1, 2)), [1.0]), ValueError, "peaks must be finite"),
    (lambda: ops.attribute_reads(np.zeros((1, 2)), [[0.0, np.inf]], [1.0]), ValueError, "centroids must be finite"),
    (lambda: ops.attribute_reads(np.zeros((1, 2)), np.zeros((1, 2)), [np.nan]), ValueError, "areas must be finite"),
    (lambda: ops.attribute_reads(np.zeros((1, 2)), np.zeros((1, 2)), [1.0], footprint=-1), ValueError, "footprint"),
    (lambda: ops.attribute_reads(np.zeros((1, 2)), np.zeros((1, 2)), [1.0], tie=math.inf), ValueError, "tie"),
    (lambda: ops.attribute_reads(np.zeros((1, 2)), np.zeros((1, 2)), [1.0], tie=True), TypeError, "tie"),
    (lambda: ops.attribute_reads(np.zeros((1, 2)), np.zeros((1, 2)), ["a"]), TypeError, "areas"),
    (lambda: ops.attribute_reads(np.zeros((1, 2)), np.zeros((1, 2)), [1.0], gpu="yes"), TypeError, "gpu"),
    (lambda: ops.count_within(np.zeros((3,)), np.zeros((1, 2)), 1.0), ValueError, "moved must be"),
    (lambda: ops.count_within(np.zeros((2, 3, 3)), np.zeros((1, 2)), 1.0), ValueError, "moved must be"),
    (lambda: ops.count_within(np.zeros((3, 2)), np.zeros((1, 3)), 1.0), ValueError, "target must be"),
    (lambda: ops.count_within([[np.nan, 1.0]], np.zeros((1, 2)), 1.0), ValueError, "moved must be finite"),
    (lambda: ops.count_within(np.zeros((3, 2)), np.zeros((1, 2)), -0.5), ValueError, "radius"),
    (lambda: ops.count_within(np.zeros((3, 2)), np.zeros((1, 2)), math.nan), ValueError, "radius"),
    (lambda: ops.count_within(np.zeros((3, 2)), np.zeros((1, 2)), "5"), TypeError, "radius"),
])
def test_bad_input_is_refused_naming_the_argument(call: Callable[[], object], error: type[Exception],
                                                  words: str) -> None:
    with pytest.raises(error, match=words):
        call()


def test_empty_input_is_answered_by_the_core() -> None:
    owner, ambiguous = ops.attribute_reads([], np.zeros((2, 2)), [1.0, 2.0])
    assert owner.shape == ambiguous.shape == (0,) and owner.dtype == np.int64 and ambiguous.dtype == bool
    owner, ambiguous = ops.attribute_reads(np.ones((3, 2)), np.zeros((0, 2)), [])
    np.testing.assert_array_equal(owner, -1)
    assert not ambiguous.any()
    assert last_dispatch().backend == "core"  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record
    np.testing.assert_array_equal(ops.count_within(np.zeros((4, 0, 2)), np.zeros((3, 2)), 1.0), np.zeros(4))
    np.testing.assert_array_equal(ops.count_within(np.zeros((2, 5, 2)), np.zeros((0, 2)), 1.0), np.zeros(2))
    assert last_dispatch().backend == "core"  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record


def test_one_set_gives_a_zero_dimensional_count_and_stacks_keep_their_shape() -> None:
    one = ops.count_within(np.zeros((3, 2)), np.zeros((1, 2)), 0.0)
    assert one.shape == () and int(one) == 3
    assert ops.count_within(np.zeros((2, 3, 4, 2)), np.ones((1, 2)), 1.5).shape == (2, 3)


@SETTINGS
@given(radius=st.one_of(st.floats(0, 1e6), st.floats(0, 1e-300), st.sampled_from([0.0, 5.0, 12.0, 2.0**0.5])))
def test_the_squared_limit_is_the_last_sum_whose_root_is_within_the_radius(radius: float) -> None:
    limit = squared_limit(radius)
    assert math.sqrt(limit) <= radius
    assert math.sqrt(math.nextafter(limit, math.inf)) > radius


def test_the_squared_limit_can_exceed_the_radius_squared() -> None:
    """sqrt rounds 25 + 1 ulp down to 5: SciPy's ``distance <= 5`` holds there, ``s <= 25`` does not."""
    assert squared_limit(5.0) > 25.0
    assert squared_limit(0.0) == 0.0


# ---- the answers -------------------------------------------------------------------------------


@st.composite
def fields(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """Continuous reads and nuclei (spaCR's kind of field), at drawn densities."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    side = draw(st.sampled_from([50.0, 200.0, 800.0]))
    reads, objects = draw(st.integers(1, 400)), draw(st.integers(1, 60))
    areas = rng.uniform(-10, 500, objects)
    return (rng.uniform(0, side, (reads, 2)), rng.uniform(0, side, (objects, 2)), areas,
            draw(st.sampled_from([0.0, 3.0, 10.0])), draw(st.sampled_from([0.0, 1.0, 4.0])))


@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(field=fields())
def test_attribution_is_spacrs_own(backend: str, field: tuple[np.ndarray, np.ndarray, np.ndarray, float, float]
                                   ) -> None:
    sbs = pytest.importorskip("spacr.ops_sbs")
    peaks, centroids, areas, footprint, tie = field
    own = getattr(sbs.attribute_reads, "__spacr_accel_original__", sbs.attribute_reads)
    expected = own(peaks, centroids, areas, footprint=footprint, tie=tie)
    got = ops.attribute_reads(peaks, centroids, areas, footprint=footprint, tie=tie, backend=backend)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_nearest_boundary_wins_over_the_nearest_centre(backend: str) -> None:
    """A read 12 px from a big nucleus's centre (radius 10) and 4 px from a point's centre: the big
    one's boundary is 2 px away, the point's 4."""
    owner, ambiguous = ops.attribute_reads([[0.0, 0.0]], [[0.0, 4.0], [0.0, -12.0]], [0.0, 100 * np.pi],
                                           tie=1.0, backend=backend)
    assert owner.tolist() == [1] and not ambiguous.any()


@pytest.mark.parametrize("backend", BACKENDS)
def test_equal_gaps_go_to_neither_or_to_the_lowest_index(backend: str) -> None:
    peaks, centroids, areas = [[0.0, 0.0]], [[0.0, 5.0], [0.0, -5.0], [5.0, 0.0]], [0.0, 0.0, 0.0]
    owner, ambiguous = ops.attribute_reads(peaks, centroids, areas, tie=1.0, backend=backend)
    assert owner.tolist() == [-1] and ambiguous.tolist() == [True]
    owner, ambiguous = ops.attribute_reads(peaks, centroids, areas, tie=0.0, backend=backend)
    assert owner.tolist() == [0] and ambiguous.tolist() == [False]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_read_exactly_at_the_reach_is_the_trees_verdict(backend: str) -> None:
    """Reads whose squared distance to a centre equals the squared reach exactly (integers: the
    numba grid defers them to the tree) and a hair either side."""
    sbs = pytest.importorskip("spacr.ops_sbs")
    own = getattr(sbs.attribute_reads, "__spacr_accel_original__", sbs.attribute_reads)
    ys = np.array([0.0, 3.0, np.nextafter(3.0, 0.0), np.nextafter(3.0, 9.0), 6.0, -4.0])
    peaks = np.stack([ys, np.array([4.0, 4.0, 4.0, 4.0, 8.0, 3.0])], axis=1)
    centroids, areas = np.array([[0.0, 0.0], [6.0, 0.0]]), np.array([0.0, 0.0])
    for footprint, tie in ((5.0, 0.0), (5.0, 1.0), (np.nextafter(5.0, 0.0), 0.5)):
        expected = own(peaks, centroids, areas, footprint=footprint, tie=tie)
        got = ops.attribute_reads(peaks, centroids, areas, footprint=footprint, tie=tie, backend=backend)
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])


def test_numba_defers_a_read_at_the_bound_to_the_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    from spacr_accel_numba import _points_kernels

    deferred: list[int] = []
    real = _points_kernels.attribute_by_tree

    def counting(peaks: np.ndarray, *args: object) -> tuple[np.ndarray, np.ndarray]:
        deferred.append(peaks.shape[0])
        return real(peaks, *args)  # type: ignore[arg-type]  # the kernel's own arguments, passed on as received

    monkeypatch.setattr(_points_kernels, "attribute_by_tree", counting)
    peaks = np.array([[3.0, 4.0], [30.0, 30.0], [1.0, 1.0]])
    got = ops.attribute_reads(peaks, [[0.0, 0.0]], [0.0], footprint=5.0, backend="numba")
    assert deferred == [1]  # only the read at distance 5 == reach
    np.testing.assert_array_equal(got[0], [0, -1, 0])


@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), radius=st.sampled_from([0.0, 1.0, 5.0, 12.0, 40.0]),
       sets=st.integers(1, 6), points=st.integers(1, 80), targets=st.integers(1, 120))
def test_counts_are_scipys(backend: str, seed: int, radius: float, sets: int, points: int, targets: int) -> None:
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    target = rng.uniform(0, 300, (targets, 2))
    moved = np.concatenate([target[rng.integers(0, targets, (sets, points // 2))] + rng.normal(0, radius + 0.1,
                            (sets, points // 2, 2)), rng.uniform(-50, 350, (sets, points - points // 2, 2))], axis=1)
    tree = cKDTree(target)
    expected = [int(np.sum(tree.query(one, k=1)[0] <= radius)) for one in moved]
    np.testing.assert_array_equal(ops.count_within(moved, target, radius, backend=backend), expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_counts_on_the_float_boundary_are_scipys(backend: str) -> None:
    """Targets at exactly the radius along many directions, and one float64 either side."""
    from scipy.spatial import cKDTree

    angles = np.linspace(0, 2 * np.pi, 200, endpoint=False)
    ring = np.stack([np.cos(angles), np.sin(angles)], axis=1) * 12.0
    moved = np.stack([ring, np.nextafter(ring, np.inf), np.nextafter(ring, -np.inf), ring * (1 + 1e-16)]) + 500.0
    target = np.array([[500.0, 500.0], [900.0, 900.0]])
    tree = cKDTree(target)
    expected = [int(np.sum(tree.query(one, k=1)[0] <= 12.0)) for one in moved]
    got = ops.count_within(moved, target, 12.0, backend=backend)
    np.testing.assert_array_equal(got, expected)
    assert min(expected) > 0 and max(expected) < 200  # the boundary really is crossed both ways


def test_the_reference_agrees_with_spacr_on_a_field() -> None:
    sbs = pytest.importorskip("spacr.ops_sbs")
    rng = np.random.default_rng(4)
    peaks, centroids, areas = rng.uniform(0, 400, (800, 2)), rng.uniform(0, 400, (120, 2)), rng.uniform(0, 400, 120)
    own = getattr(sbs.attribute_reads, "__spacr_accel_original__", sbs.attribute_reads)
    for got, expected in zip(reference.attribute_reads(peaks, centroids, areas), own(peaks, centroids, areas),
                             strict=True):
        np.testing.assert_array_equal(got, expected)
