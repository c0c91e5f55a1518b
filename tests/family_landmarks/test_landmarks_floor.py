"""The landmarks family (``ops.spaced_peaks``, ``ops.match_triangles``) on the floor, against the plain
references: drawn fields of plateaus and ties, drawn point sets (pixel grids full of isosceles
triangles, fractional centres, degenerate ones, one a moved subset of the other); and against the
peers themselves (scikit-image's ``peak_local_max``, spaCR's ``align_by_triangles``) where they are
installed."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spacr_accel_core import last_dispatch, ops, reference
from spacr_accel_core.kit import _peaks, _triangles
from spacr_accel_core.table import rows
from spacr_accel_core.testing import landmark_point_sets

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _plateaus(shape: tuple[int, int], seed: int, levels: int) -> np.ndarray:
    """Small integers in 2 x 2 blocks: flat tops and equal peaks, where only the walk's order decides."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, levels, (shape[0] // 2 + 1, shape[1] // 2 + 1))
    return np.kron(blocks, np.ones((2, 2)))[: shape[0], : shape[1]].astype(np.float32)


def _same_match(expected: tuple[object, ...], got: ops.TriangleMatch) -> None:
    """The same count of votes, and the same consensus to the bit (the row's own agreement)."""
    agrees, detail = rows()["match_triangles"].agree(expected, got)
    assert agrees, detail


# ---- spaced_peaks ---------------------------------------------------------------------------------


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), height=st.integers(1, 40), width=st.integers(1, 40),
       levels=st.sampled_from([2, 3, 50]), min_distance=st.integers(1, 6), every=st.booleans())
def test_spaced_peaks_are_the_references(seed: int, height: int, width: int, levels: int, min_distance: int,
                                         every: bool) -> None:
    field = _plateaus((height, width), seed, levels)
    points = np.argwhere(field > 0) if every else ops.local_maxima(field, 2 * min_distance + 1)
    got = ops.spaced_peaks(field, points, min_distance, backend="numpy")
    want = reference.spaced_peaks(field, points, min_distance)
    assert got.dtype == np.int64 and got.flags.c_contiguous
    assert np.array_equal(got, want), (got, want)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), count=st.integers(0, 300), min_distance=st.integers(1, 9))
def test_points_in_any_order_rank_ties_as_given(seed: int, count: int, min_distance: int) -> None:
    rng = np.random.default_rng(seed)
    field = rng.integers(0, 4, (30, 33)).astype(np.float32)
    flat = rng.permutation(field.size)[:count]
    points = np.stack(np.unravel_index(flat, field.shape), axis=1)
    got = ops.spaced_peaks(field, points, min_distance)
    assert np.array_equal(got, reference.spaced_peaks(field, points, min_distance))


@pytest.mark.parametrize("at_once", [1, 7, 1 << 21])
def test_a_plateau_is_walked_in_parts_to_the_same_answer(monkeypatch: pytest.MonkeyPatch, at_once: int) -> None:
    field = np.zeros((48, 52), np.float32)
    field[5:40, 3:45] = 7.0
    field[20:22, 30:32] = 9.0
    points = np.argwhere(field > 0)
    want = reference.spaced_peaks(field, points, 3)
    monkeypatch.setattr(_peaks, "PAIRS_AT_ONCE", at_once)
    assert np.array_equal(ops.spaced_peaks(field, points, 3, backend="numpy"), want)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), height=st.integers(2, 40), width=st.integers(2, 40),
       levels=st.sampled_from([2, 3, 50]), min_distance=st.integers(1, 6), threshold=st.sampled_from([-1.0, 0.0, 1.0]))
def test_with_local_maxima_it_is_peak_local_max(seed: int, height: int, width: int, levels: int, min_distance: int,
                                                threshold: float) -> None:
    skimage = pytest.importorskip("skimage.feature")
    field = _plateaus((height, width), seed, levels)
    if (field == field.flat[0]).all():
        return  # scikit-image finds no peak on a constant field
    want = skimage.peak_local_max(field, min_distance=min_distance, threshold_abs=threshold)
    maxima = ops.local_maxima(field, 2 * min_distance + 1, threshold=threshold)
    got = ops.spaced_peaks(field, maxima, min_distance)
    assert got.dtype == want.dtype and np.array_equal(got, want), (got, want)
    assert (got.flags.c_contiguous, got.flags.f_contiguous) == (want.flags.c_contiguous, want.flags.f_contiguous)


def test_what_needs_no_backend_is_answered_by_the_core() -> None:
    field = np.arange(30, dtype=np.float32).reshape(5, 6)
    for points, distance in (([], 1), (np.argwhere(field > 3), 3)):
        got = ops.spaced_peaks(field, points, distance)
        assert got.shape == (0, 2) and got.dtype == np.int64
        assert last_dispatch().backend == "core"  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record


@pytest.mark.parametrize(("field", "points", "distance", "error", "words"), [
    (np.zeros((3, 4, 5)), [], 1, ValueError, "field must be one 2-D field"),
    (np.zeros((6, 6), dtype=complex), [], 1, TypeError, "field must hold real numbers"),
    (np.zeros((6, 6)), [[1, 9]], 1, ValueError, "outside the 6 x 6 field"),
    (np.zeros((6, 6)), [[1.5, 2]], 1, ValueError, "whole pixel coordinates"),
    (np.zeros((6, 6)), [[2, 2], [1, 1], [2, 2]], 1, ValueError, "repeated point"),
    (np.zeros((6, 6)), [[2, 2]], 0, ValueError, "min_distance must be at least 1"),
    (np.zeros((6, 6)), [[2, 2]], 1.5, ValueError, "min_distance must be a whole number"),
    (np.full((6, 6), np.nan), [[2, 2]], 1, ValueError, "NaN pixel"),
])
def test_bad_input_is_refused_naming_it(field: object, points: object, distance: object, error: type[Exception],
                                        words: str) -> None:
    with pytest.raises(error, match=words):
        ops.spaced_peaks(field, points, distance)


# ---- match_triangles ------------------------------------------------------------------------------


@st.composite
def _point_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, float]:
    source, target = draw(landmark_point_sets())
    return source, target, draw(st.sampled_from([0.0, 0.02, 0.05, 0.3]))


def _reference_or_refusal(source: np.ndarray, target: np.ndarray, tolerance: float) -> tuple[object, ...] | None:
    """The reference's answer, or None where Qhull refuses a side (the operation raises there)."""
    from scipy.spatial import QhullError

    try:
        return reference.match_triangles(source, target, tolerance)
    except QhullError:
        return None


@SETTINGS
@given(case=_point_sets())
def test_triangle_matches_are_the_references(case: tuple[np.ndarray, np.ndarray, float]) -> None:
    source, target, tolerance = case
    want = _reference_or_refusal(source, target, tolerance)
    if want is None:
        with pytest.raises(ValueError, match="Qhull cannot triangulate"):
            ops.match_triangles(source, target, tolerance=tolerance, backend="numpy")
        return
    with np.errstate(all="ignore"):
        got = ops.match_triangles(source, target, tolerance=tolerance, backend="numpy")
    _same_match(want, got)
    assert type(got.scale) is float and got.rotation.shape == (2, 2) and got.translation.shape == (2,)


@SETTINGS
@given(case=_point_sets())
def test_one_item_at_a_time_is_the_same_answer(monkeypatch: pytest.MonkeyPatch,
                                               case: tuple[np.ndarray, np.ndarray, float]) -> None:
    """Where a NumPy rounds the stacked calls otherwise, the floor makes the per-item calls: the
    same answer, by the other path."""
    source, target, tolerance = case
    want = _reference_or_refusal(source, target, tolerance)
    if want is None:
        return
    with monkeypatch.context() as patched:
        patched.setattr(_triangles, "batches_match_single_calls", lambda: False)
        with np.errstate(all="ignore"):
            got = ops.match_triangles(source, target, tolerance=tolerance, backend="numpy")
    _same_match(want, got)


def test_without_vecdot_the_lengths_keep_the_norms_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    """NumPy 1 has no ``np.vecdot``: each side's length is then its ``(1, n) @ (n, 1)`` product's
    root, to the bit ``np.linalg.norm`` of the side (the per-item call) and ``vecdot``'s where NumPy
    has it, on sides whose dot product rounds apart from a plain sum of squares where BLAS fuses;
    the probe still holds, and the floor's answer is the reference's."""
    rng = np.random.default_rng(11)
    sides = rng.normal(scale=173.0, size=(4000, 3, 2)) + rng.integers(0, 500, size=(4000, 3, 2))
    norms = np.array([[np.linalg.norm(side) for side in triangle] for triangle in sides])
    stacked = _triangles._lengths(sides)
    monkeypatch.delattr(np, "vecdot", raising=False)
    without = _triangles._lengths(sides)
    assert np.array_equal(without.view(np.int64), norms.view(np.int64))
    assert np.array_equal(without.view(np.int64), stacked.view(np.int64))
    with np.errstate(all="ignore"):
        assert _triangles._probe()
    source, target = _triangles._probe_points()
    want = _reference_or_refusal(source, target, 0.02)
    assert want is not None
    with monkeypatch.context() as patched:
        patched.setattr(_triangles, "batches_match_single_calls", lambda: True)
        got = ops.match_triangles(source, target, tolerance=0.02, backend="numpy")
    _same_match(want, got)


def test_without_scipy_the_triangles_are_refused_naming_what_to_install() -> None:
    """SciPy is not the core's dependency: in a process where it cannot be imported, the core still
    imports, a side of fewer than three points is still answered (no triangle, no SciPy), and a call
    that needs Delaunay's triangles is refused with the contract's ``BackendUnavailable`` naming
    ``pip install scipy``, not a ``ModuleNotFoundError`` from deep inside the call."""
    code = textwrap.dedent("""
        import sys
        sys.modules["scipy"] = None
        import numpy as np
        from spacr_accel_core import BackendUnavailable, ops
        print("few", ops.match_triangles(np.zeros((2, 2)), np.ones((1, 2))).votes)
        try:
            ops.match_triangles(np.array([[0.0, 0.0], [4.0, 1.0], [1.0, 5.0]]), np.eye(3, 2) * 7.0)
        except BackendUnavailable as exc:
            print("refused", exc)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "few 0" in done.stdout
    refused = done.stdout.split("refused ", 1)[-1]
    assert "Delaunay" in refused and "pip install scipy" in refused, done.stdout


def test_an_anchor_pair_is_spacrs_consensus() -> None:
    merge = pytest.importorskip("spacr.ops_merge", reason="spaCR is not installed")
    from spacr_accel_core.testing import anchor_field

    field = anchor_field(sources=100, targets=2000, scale=0.19, degrees=3.0, seed=2)
    source, target = np.round(field.source), np.round(field.target)
    got = ops.match_triangles(source, target)
    want = merge.align_by_triangles(source, target)
    assert got.votes >= 3 and 0.1 < got.scale < 0.3
    assert got.scale == want[0] and np.array_equal(got.rotation, want[1]) and np.array_equal(got.translation, want[2])


def test_a_side_without_triangles_has_no_vote() -> None:
    triangle = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 3.0]])
    for source, target in ((triangle[:2], triangle), (triangle, np.zeros((0, 2)))):
        got = ops.match_triangles(source, target)
        assert got.votes == 0 and math.isnan(got.scale)
        assert np.isnan(got.rotation).all() and np.isnan(got.translation).all()
        assert last_dispatch().backend == "core"  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record


@pytest.mark.parametrize(("source", "tolerance", "error", "words"), [
    (np.zeros((4, 3)), 0.02, ValueError, r"source must be \(N, 2\) rows"),
    (np.array([[0.0, 0.0], [1.0, np.nan], [0.0, 1.0]]), 0.02, ValueError, "source holds a NaN or an infinity"),
    (np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]), 0.02, ValueError, "Qhull cannot triangulate"),
    (np.array([["a", "b"]]), 0.02, TypeError, "source must hold real numbers"),
    (np.zeros((3, 2)), -0.1, ValueError, "tolerance must be a finite number at least zero"),
    (np.zeros((3, 2)), math.inf, ValueError, "tolerance must be a finite number at least zero"),
    (np.zeros((3, 2)), "0.02", TypeError, "tolerance must be a number"),
])
def test_bad_triangle_input_is_refused_naming_it(source: object, tolerance: object, error: type[Exception],
                                                 words: str) -> None:
    target = np.array([[0.0, 0.0], [5.0, 1.0], [2.0, 7.0], [9.0, 9.0]])
    with pytest.raises(error, match=words):
        ops.match_triangles(source, target, tolerance=tolerance)


def test_neither_operation_has_a_dask_form() -> None:
    sad = pytest.importorskip("spacr_accel_core.dask")
    for name in ("spaced_peaks", "match_triangles"):
        with pytest.raises(AttributeError, match="its row declares no Dask form"):
            getattr(sad, name)
