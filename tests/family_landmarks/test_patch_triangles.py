"""spaCR's triangle consensus (``ops_merge.align_by_triangles``), patched and not: the same answer to
the bit (scale, rotation, translation, or None), the same exception and warnings where spaCR raises
or warns, the inputs as they were; the seam really serving anchor-sized fields, and what it leaves
to spaCR."""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("spacr", reason="spaCR is not installed (pip install --no-deps spacr==1.5.1.5)")
pytest.importorskip("scipy.spatial")

from spacr_accel_core import patch
from spacr_accel_core.kit import _triangles
from spacr_accel_core.patch import _served_triangles, first_difference
from spacr_accel_core.patch._install import original_of
from spacr_accel_core.testing import anchor_field, landmark_point_sets

SEAM = "spacr.ops_merge.align_by_triangles"


@pytest.fixture(scope="module")
def merge() -> Iterator[Any]:
    """spaCR's ``ops_merge`` patched (no check mode: what a user's run does) for the module."""
    from spacr import ops_merge

    patch.reset()
    assert patch.install()
    try:
        yield ops_merge
    finally:
        patch.uninstall()
        patch.reset()


def _row() -> Any:
    return {row.seam: row for row in patch.report().seams}.get(SEAM)


def _served() -> int:
    row = _row()
    return sum(calls for _backend, calls, _seconds in row.served) if row else 0


def _passed() -> list[str]:
    row = _row()
    return [reason for reason, _calls, _seconds in row.passed] if row else []


def _passed_calls() -> int:
    row = _row()
    return sum(calls for _reason, calls, _seconds in row.passed) if row else 0


def _outcome(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, list[tuple[type, str]]]:
    """What a call gives: ``("answer", answer)`` or ``("raised", type, message)``, and its warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result: Any = ("answer", function(*args, **kwargs))
        except Exception as error:  # the exception is the outcome compared
            result = ("raised", type(error), str(error))
    return result, [(item.category, str(item.message)) for item in caught]


def _same_outcome(merge: Any, *args: Any, **kwargs: Any) -> Any:
    """The patched call's outcome is spaCR's own: answer bits and types, exception, warnings, inputs."""
    own = original_of(merge.align_by_triangles)
    before = copy.deepcopy((args, kwargs))
    got, got_warnings = _outcome(merge.align_by_triangles, *args, **kwargs)
    assert first_difference((args, kwargs), before) is None, "the patched call changed its inputs"
    want, want_warnings = _outcome(own, *args, **kwargs)
    assert got[0] == want[0], (got, want)
    if got[0] == "raised":
        assert got[1:] == want[1:]
    else:
        found = first_difference(got[1], want[1])
        assert found is None, found
        if want[1] is not None:
            assert [type(part) for part in got[1]] == [type(part) for part in want[1]]
    assert got_warnings == want_warnings
    return got


def _pixel_field(seed: int, sources: int = 100, targets: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """An anchor pair as the phenotype phase hands it: whole-pixel nuclear centres on both sides (side
    lengths tie), the phenotype field about five times the sequencing magnification."""
    field = anchor_field(sources=sources, targets=targets, scale=0.19, degrees=3.0, seed=seed)
    return np.round(field.source), np.round(field.target)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_anchor_fields_are_spacrs_to_the_bit(merge: Any, seed: int) -> None:
    source, target = _pixel_field(seed)
    served = _served()
    got = _same_outcome(merge, source, target, tolerance=0.02)
    assert _served() == served + 1
    assert got[1] is not None and 0.1 < got[1][0] < 0.3  # the consensus is near the planted 0.19


def test_fractional_centres_are_spacrs(merge: Any) -> None:
    field = anchor_field(sources=150, targets=900, scale=0.5, degrees=-4.0, seed=5)
    served = _served()
    _same_outcome(merge, field.source, field.target)
    _same_outcome(merge, field.target, field.source, tolerance=0.01, min_votes=1)
    assert _served() == served + 2


@pytest.mark.parametrize(("tolerance", "min_votes"), [
    (0.0, 3), (0, 1), (0.02, 0), (0.005, 1), (0.1, 3), (np.float32(0.02), 2.5), (np.int64(0), True), (0.02, 10**6),
    (0.02, np.float64("nan")), (0.3, np.int8(4)),
])
def test_keywords_are_read_as_spacr_reads_them(merge: Any, tolerance: Any, min_votes: Any) -> None:
    source, target = _pixel_field(3, sources=60, targets=500)
    served = _served()
    _same_outcome(merge, source, target, tolerance=tolerance, min_votes=min_votes)
    assert _served() == served + 1


def test_containers_dtypes_and_layouts_are_spacrs(merge: Any) -> None:
    source, target = _pixel_field(4, sources=50, targets=400)
    served = _served()
    for src, dst in ((source.tolist(), target.tolist()), (source.astype(np.int32), target.astype(np.int64)),
                     (np.asfortranarray(source), target.astype(np.float32)), (tuple(map(tuple, source)), target)):
        _same_outcome(merge, src, dst)
    assert _served() == served + 4


def test_few_points_and_no_votes_are_spacrs(merge: Any) -> None:
    source, target = _pixel_field(6, sources=40, targets=300)
    for src, dst in ((source[:2], target), (source, target[:0]), (source[:0], target[:1])):
        assert _same_outcome(merge, src, dst)[1] is None
    far = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert _same_outcome(merge, far, far * 3.0 + 1.0, min_votes=2)[1] is None  # one vote, two wanted


_LINE = np.stack([np.arange(6.0), np.arange(6.0) * 2.0], axis=1)
_TRIANGLE = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])


def _spoiled(points: np.ndarray, value: float) -> np.ndarray:
    bad = points.copy()
    bad[3, 1] = value
    return bad


_LEFT: dict[str, Callable[[np.ndarray, np.ndarray], tuple[tuple[Any, ...], dict[str, Any]]]] = {
    "collinear source": lambda src, dst: ((_LINE, dst), {}),
    "collinear target": lambda src, dst: ((src[:2], _LINE), {}),
    "nan": lambda src, dst: ((_spoiled(src, np.nan), dst), {}),
    "inf": lambda src, dst: ((_spoiled(src, -np.inf), dst), {}),
    "huge": lambda src, dst: ((_spoiled(src, 1e70), dst), {}),
    "no votes": lambda src, dst: ((_TRIANGLE, _TRIANGLE * [5.0, 1.0]), {"min_votes": 0}),
    "three columns": lambda src, dst: ((np.concatenate([src, src[:, :1]], axis=1), dst), {}),
    "flat": lambda src, dst: ((src.reshape(-1), dst), {}),
    "complex": lambda src, dst: ((src.astype(np.complex128), dst), {}),
    "strings": lambda src, dst: ((src.astype(str), dst), {}),
    "tolerance None": lambda src, dst: ((src, dst), {"tolerance": None}),
    "tolerance array": lambda src, dst: ((src, dst), {"tolerance": np.array([0.02])}),
    "min_votes text": lambda src, dst: ((src, dst), {"min_votes": "3"}),
    "positional": lambda src, dst: ((src, dst, 0.02), {}),
}
"""Calls the seam leaves to spaCR, each made from an anchor pair."""


@pytest.mark.parametrize("case", sorted(_LEFT))
def test_what_is_left_to_spacr_is_spacrs(merge: Any, case: str) -> None:
    args, kwargs = _LEFT[case](*_pixel_field(7, sources=40, targets=300))
    served, passed = _served(), _passed_calls()
    _same_outcome(merge, *args, **kwargs)
    assert _served() == served
    assert _passed_calls() == passed + 1


def test_a_generator_is_left_to_spacr_untouched(merge: Any) -> None:
    """Compared by hand: a generator cannot be copied to check it unchanged."""
    source, target = _pixel_field(7, sources=40, targets=300)
    rows = (row for row in source)
    served = _served()
    got = _outcome(merge.align_by_triangles, rows, target)
    assert got == _outcome(original_of(merge.align_by_triangles), (row for row in source), target)
    assert got[0][0] == "raised"
    assert _served() == served
    assert np.array_equal(next(rows), source[0])  # not one row taken


def test_a_helper_replaced_in_spacrs_module_leaves_the_call_to_spacr(merge: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    source, target = _pixel_field(8, sources=40, targets=300)
    own = merge._similarity_from_pairs

    def halved(src: Any, dst: Any) -> Any:
        fit = own(src, dst)
        return None if fit is None else (fit[0] / 2.0, *fit[1:])

    monkeypatch.setattr(merge, "_similarity_from_pairs", halved)
    served = _served()
    got = _same_outcome(merge, source, target)
    assert _served() == served
    assert any("replaced" in reason for reason in _passed())
    monkeypatch.undo()
    assert got[1][0] * 2.0 == pytest.approx(merge.align_by_triangles(source, target)[0])


def test_a_numpy_that_batches_otherwise_leaves_every_call_to_spacr(merge: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    source, target = _pixel_field(9, sources=40, targets=300)
    monkeypatch.setattr(_served_triangles, "batches_match_single_calls", lambda: False)
    served = _served()
    _same_outcome(merge, source, target)
    assert _served() == served
    assert any("stacked" in reason for reason in _passed())


def test_underflow_reported_by_the_caller_leaves_the_call_to_spacr(merge: Any) -> None:
    source, target = _pixel_field(10, sources=40, targets=300)
    served = _served()
    with np.errstate(under="warn"):
        _same_outcome(merge, source * 1e-160, target * 1e-160)
    assert _served() == served


def test_the_probe_tells_a_one_ulp_change_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _triangles.batches_match_single_calls()
    assert _triangles._probe()
    lengths = _triangles._lengths
    monkeypatch.setattr(_triangles, "_lengths", lambda vectors: np.nextafter(lengths(vectors), np.inf))
    assert not _triangles._probe()
    monkeypatch.undo()
    similarities = _triangles._similarities

    def nudged(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        keep, scale, angle = similarities(src, dst)
        return keep, scale, np.nextafter(angle, np.inf)

    monkeypatch.setattr(_triangles, "_similarities", nudged)
    assert not _triangles._probe()


_TOLERANCES = [0.0, 0.02, 0.05, 0.3, 2, np.float32(0.02), -0.01, math.nan]
_MIN_VOTES = [3, 0, 1, 2.5, True, 10**6, math.nan]


@st.composite
def _cases(draw: st.DrawFn) -> tuple[Any, Any, Any, Any]:
    """Two point sets (pixel grids full of ties, duplicates and collinear runs; fractional centres;
    tiny ones whose triangles are degenerate; one a moved subset of the other), read in every way
    spaCR reads them, with a NaN, an infinity or a signed zero now and then."""
    source, target = draw(landmark_point_sets(most=(30, 45), least_span=2, rounded=None))
    spoil = draw(st.sampled_from([None, None, None, math.nan, math.inf, -0.0]))
    if spoil is not None and source.size:
        source[draw(st.integers(0, source.shape[0] - 1)), draw(st.integers(0, 1))] = spoil
    def read(points: np.ndarray) -> Any:
        way = draw(st.sampled_from(["C", "F", "float32", "int", "list"]))
        if way == "F":
            return np.asfortranarray(points)
        if way == "float32":
            return points.astype(np.float32)
        if way == "int" and np.isfinite(points).all() and np.array_equal(points, np.round(points)):
            return points.astype(np.int64)
        return points.tolist() if way == "list" else points
    return read(source), read(target), draw(st.sampled_from(_TOLERANCES)), draw(st.sampled_from(_MIN_VOTES))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_cases())
def test_drawn_point_sets_are_spacrs(merge: Any, case: tuple[Any, Any, Any, Any]) -> None:
    source, target, tolerance, min_votes = case
    _same_outcome(merge, source, target, tolerance=tolerance, min_votes=min_votes)
