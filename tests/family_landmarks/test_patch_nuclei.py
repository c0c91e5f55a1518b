"""``spacr.ops_phenotype.nuclear_points`` served whole: against spaCR unpatched on nuclear planes, on
ties and plateaus (where the spacing's walk order decides), on drawn dtypes, layouts, special values
and keyword types; the spacing itself against scikit-image's ``peak_local_max``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("spacr", reason="spaCR is not installed (pip install --no-deps spacr==1.5.1.5)")
pytest.importorskip("skimage", reason="scikit-image is not installed (spaCR's peak finder)")

from spacr_accel_core import patch
from spacr_accel_core.kit import _peaks

pytestmark = pytest.mark.usefixtures("compiled_backends")  # while numba compiles, a seam may pass calls to spaCR

SEAM = "spacr.ops_phenotype.nuclear_points"
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _counts(seam: str = SEAM) -> tuple[int, int]:
    """(served, passed) calls of ``seam`` so far."""
    rows = {row.seam: row for row in patch.report().seams}
    if seam not in rows:
        return 0, 0
    row = rows[seam]
    return (sum(calls for _backend, calls, _seconds in row.served),
            sum(entry[1] for entry in row.passed))


def _nuclei(side: int, count: int, seed: int) -> np.ndarray:
    """A nuclear stain: Gaussian nuclei of drawn brightness and size on camera noise, as whole counts."""
    rng = np.random.default_rng(seed)
    plane = rng.normal(400.0, 30.0, (side, side))
    ys, xs = np.mgrid[0:side, 0:side]
    for y, x, peak, radius in zip(rng.uniform(0, side, count), rng.uniform(0, side, count),
                                  rng.uniform(1500, 4000, count), rng.uniform(4, 9, count), strict=True):
        near = slice(max(0, int(y - 3 * radius)), int(y + 3 * radius) + 1), \
            slice(max(0, int(x - 3 * radius)), int(x + 3 * radius) + 1)
        plane[near] += peak * np.exp(-((ys[near] - y) ** 2 + (xs[near] - x) ** 2) / (2 * radius * radius))
    return np.round(plane).astype(np.float32)


def _plateaus(shape: tuple[int, int], seed: int, levels: int = 3) -> np.ndarray:
    """Small integers in blocks: flat tops and equal peaks everywhere, where only the walk's order
    (brightest first, ties row-major) decides which peaks are kept."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, levels, (shape[0] // 2 + 1, shape[1] // 2 + 1))
    return np.kron(blocks, np.ones((2, 2)))[: shape[0], : shape[1]].astype(np.float32)


def test_a_nuclear_plane_is_served_with_spacrs_centres(same_as_spacr: Callable[..., Any]) -> None:
    import spacr.ops_phenotype as phenotype

    plane = _nuclei(384, 120, 1)
    for options in ({}, {"top": 25}, {"min_distance": 3, "percentile": 90.0}, {"min_distance": 1, "top": 40},
                    {"sigma": 2, "min_distance": 8.9, "percentile": 95}, {"top": np.int64(0)}, {"top": -3}):
        outcome = same_as_spacr(lambda options=options: phenotype.nuclear_points(plane, **options), plane)
        assert outcome.value.shape[0] > 0 or options.get("top") is not None
    assert _counts() == (7, 0)


def test_the_brightest_are_cut_as_spacr_cuts_them(same_as_spacr: Callable[..., Any]) -> None:
    import spacr.ops_phenotype as phenotype

    plane = _nuclei(256, 80, 2)
    found = same_as_spacr(lambda: phenotype.nuclear_points(plane, percentile=50.0, min_distance=4), plane).value
    assert found.shape[0] > 10
    cut = same_as_spacr(lambda: phenotype.nuclear_points(plane, percentile=50.0, min_distance=4, top=10), plane)
    assert cut.value.shape == (10, 2)
    assert _counts() == (2, 0)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("min_distance", [1, 2, 3, 5])
def test_ties_and_plateaus_are_walked_in_spacrs_order(same_as_spacr: Callable[..., Any], seed: int,
                                                      min_distance: int) -> None:
    import spacr.ops_phenotype as phenotype

    plane = _plateaus((37, 45), seed)
    for top in (600, 7):
        same_as_spacr(lambda top=top: phenotype.nuclear_points(plane, sigma=1e-3, min_distance=min_distance,
                                                                percentile=10.0, top=top), plane)
    assert _counts() == (2, 0)


def test_a_plateau_walked_in_parts_is_spacrs(same_as_spacr: Callable[..., Any],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A plateau with more neighbouring pairs than the walk holds at once is walked a part at a time:
    spaCR's centres, served."""
    import spacr.ops_phenotype as phenotype

    monkeypatch.setattr(_peaks, "PAIRS_AT_ONCE", 50)
    plane = np.zeros((40, 40), np.float32)
    plane[10:30, 10:30] = 5.0
    same_as_spacr(lambda: phenotype.nuclear_points(plane, sigma=1e-3, min_distance=2, percentile=10.0), plane)
    assert _counts() == (1, 0)


def test_a_call_left_to_spacr_still_meets_the_scoped_gaussian(same_as_spacr: Callable[..., Any]) -> None:
    import spacr.ops_phenotype as phenotype

    plane = _nuclei(96, 10, 3)
    same_as_spacr(lambda: phenotype.nuclear_points(plane, top=600.0), plane)
    assert _counts() == (0, 1)
    assert sum(_counts("spacr.ops_phenotype: scipy.ndimage.gaussian_filter")) == 1  # served, or left to SciPy


@pytest.mark.parametrize(("options", "why"), [
    ({"percentile": 101.0}, "refuses"), ({"percentile": np.float64(99.0)}, "promotes"),
    ({"min_distance": 0}, "warns"), ({"min_distance": float("nan")}, "int()"), ({"sigma": np.float32(3.0)}, "type"),
    ({"top": "600"}, "slice"), ({"min_distance": 10_000}, "beyond")])
def test_keywords_spacr_reads_its_own_way_are_left_to_it(same_as_spacr: Callable[..., Any], options: dict[str, Any],
                                                         why: str) -> None:
    import spacr.ops_phenotype as phenotype

    plane = _nuclei(64, 6, 4)
    same_as_spacr(lambda: phenotype.nuclear_points(plane, **options), plane)
    assert _counts()[0] == 0
    passed = {row.seam: row for row in patch.report().seams}[SEAM].passed
    assert any(why in entry[0] for entry in passed), passed


def _array(draw: st.DrawFn, shape: tuple[int, int]) -> np.ndarray:
    dtype = draw(st.sampled_from([np.float32, np.float32, np.float64, np.uint16, np.int32, np.float16]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        values = rng.integers(0, draw(st.sampled_from([3, 1000])), shape).astype(dtype)
    else:
        values = (rng.standard_normal(shape) * draw(st.sampled_from([1.0, 1e3, 1e-3]))).astype(dtype)
    if np.dtype(dtype).kind == "f":
        for _ in range(draw(st.integers(0, 2))):
            special = draw(st.sampled_from([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1e35]))
            with np.errstate(all="ignore"):
                values[draw(st.integers(0, shape[0] - 1)), draw(st.integers(0, shape[1] - 1))] = special
    layout = draw(st.sampled_from(["C", "F", "transposed", "reversed"]))
    if layout == "F":
        return np.asfortranarray(values)
    if layout == "transposed":
        return np.ascontiguousarray(values.T).T
    if layout == "reversed":
        return values[::-1, ::-1]
    return values


@SETTINGS
@given(data=st.data(), height=st.integers(1, 30), width=st.integers(1, 30),
       sigma=st.sampled_from([1.0, 3.0, 2, 1e-3, np.float64(1.5), np.int64(1), np.float32(1.0)]),
       min_distance=st.sampled_from([1, 2, 3, 8, 2.5, np.int64(3), np.float32(2.0)]),
       top=st.sampled_from([600, 3, 0, np.int64(2)]), percentile=st.sampled_from([99.0, 50.0, 0, 100, 10.5]))
def test_drawn_planes_and_keywords_are_spacrs(same_as_spacr: Callable[..., Any], data: st.DataObject, height: int,
                                              width: int, sigma: Any, min_distance: Any, top: Any,
                                              percentile: Any) -> None:
    import spacr.ops_phenotype as phenotype

    image = _array(data.draw, (height, width))
    same_as_spacr(lambda: phenotype.nuclear_points(image, sigma=sigma, min_distance=min_distance, top=top,
                                                   percentile=percentile), image)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), height=st.integers(1, 40), width=st.integers(1, 40),
       levels=st.sampled_from([2, 3, 50]), min_distance=st.integers(1, 6), threshold=st.sampled_from([-1.0, 0.0, 1.0]))
def test_the_spacing_is_scikit_images(seed: int, height: int, width: int, levels: int, min_distance: int,
                                      threshold: float) -> None:
    from skimage.feature import peak_local_max

    from spacr_accel_core import ops

    field = _plateaus((height, width), seed, levels)
    expected = peak_local_max(field, min_distance=min_distance, threshold_abs=threshold)
    maxima = ops.local_maxima(field, 2 * min_distance + 1, threshold=threshold)
    if not (field == field.flat[0]).all():  # scikit-image finds no peak on a constant field
        got = _peaks.spaced_peaks(maxima, field[maxima[:, 0], maxima[:, 1]], field.shape, min_distance)
        assert got.dtype == expected.dtype and np.array_equal(got, expected), (got, expected)
        assert (got.flags.c_contiguous, got.flags.f_contiguous) == (expected.flags.c_contiguous,
                                                                    expected.flags.f_contiguous)


def test_a_nuclear_field_is_served_in_the_patch_report() -> None:
    import spacr.ops_phenotype as phenotype

    plane = _nuclei(512, 200, 5)
    patch.reset()
    assert patch.install()
    try:
        phenotype.nuclear_points(plane)
        assert _counts() == (1, 0)
    finally:
        patch.uninstall()
        patch.reset()


@pytest.mark.parametrize("percentile", [94.0, 99.0, 99.9, 100, 100.0, 99])
def test_a_high_floor_is_numpys_percentile(same_as_spacr: Callable[..., Any], percentile: Any) -> None:
    import spacr.ops_phenotype as phenotype

    for plane in (_nuclei(320, 60, 6), _plateaus((333, 300), 7, levels=4)):
        same_as_spacr(lambda plane=plane: phenotype.nuclear_points(plane, percentile=percentile, sigma=1e-3), plane)
        same_as_spacr(lambda plane=plane: phenotype.nuclear_points(plane, percentile=percentile), plane)
    assert _counts() == (4, 0)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 5000), levels=st.sampled_from([2, 7, 1000, 0]),
       fraction=st.floats(0.0, 1.0), dtype=st.sampled_from([np.float32, np.float64]))
def test_high_order_statistics_are_the_sorted_values(seed: int, size: int, levels: int, fraction: float,
                                                     dtype: Any) -> None:
    rng = np.random.default_rng(seed)
    values = (rng.integers(0, levels, size) if levels else rng.standard_normal(size)).astype(dtype)
    rank = min(size - 1, int(fraction * size))
    ranks = np.unique(np.array([rank, min(size - 1, rank + 1)], np.int64))
    found = _peaks.high_order_statistics(values, ranks)
    if (size - rank) * 16 > size:
        assert found is None
    elif found is not None:
        assert found.dtype == values.dtype and np.array_equal(found, np.sort(values)[ranks])


def test_spacing_refuses_a_distance_below_one() -> None:
    with pytest.raises(ValueError, match="min_distance"):
        _peaks.spaced_peaks(np.zeros((0, 2), np.int64), np.zeros(0, np.float32), (4, 4), 0)
