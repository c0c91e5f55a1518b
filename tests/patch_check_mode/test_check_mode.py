"""Check mode against spaCR unpatched: the reference is spaCR's own code throughout, the caller's
generators end where spaCR's own draws leave them, a one-shot iterator is read once, a served
answer where spaCR raises is a mismatch, spaCR's warnings reach the caller once, a planted ulp is
caught; and a seam whose spaCR would find no usable backend raises spaCR's error."""

from __future__ import annotations

import dataclasses
import logging
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spacr_accel_core import patch
from spacr_accel_core.patch import _served, first_difference
from spacr_accel_core.patch._calls import Modes, make_wrapper
from spacr_accel_core.patch._install import original_of
from spacr_accel_core.patch._report import Tally

ALIGN = "spacr.ops_cycles.align_field"
SEED = "spacr.ops_phenotype.seed_by_scaled_pairs"
MAXIMUM = "spacr.ops_accel.maximum_filter"


def _plant(monkeypatch: pytest.MonkeyPatch, seam: str, serve: Callable[..., Any]) -> None:
    """The installed table with ``seam``'s way of serving replaced by ``serve`` (the wrapper reads
    the table when the seam is made: install again after this)."""
    installer = patch._installer
    assert installer is not None
    rows = tuple(dataclasses.replace(row, serve=serve) if row.name == seam else row for row in installer.table.seams)
    monkeypatch.setattr(installer, "table", dataclasses.replace(installer.table, seams=rows))


def _calls() -> dict[str, tuple[int, int]]:
    """Seam -> (calls served, calls passed to spaCR) since the last reset."""
    return {row.seam: (sum(r[1] for r in row.served), sum(r[1] for r in row.passed)) for row in patch.report().seams}


def _reasons(seam: str) -> list[str]:
    rows = {row.seam: row for row in patch.report().seams}
    return [reason for reason, _calls, _seconds in rows[seam].passed] if seam in rows else []


def _same(got: Any, expected: Any) -> None:
    found = first_difference(got, expected)
    assert found is None, found


def _state(generator: Any) -> Any:
    if isinstance(generator, np.random.Generator):
        return generator.bit_generator.state
    if isinstance(generator, np.random.RandomState):
        return generator.get_state(legacy=False)
    return generator.state


def _moved(image: np.ndarray, dy: int, dx: int) -> np.ndarray:
    out = np.zeros_like(image)
    height, width = image.shape
    out[max(dy, 0):height + min(dy, 0), max(dx, 0):width + min(dx, 0)] = \
        image[max(-dy, 0):height + min(-dy, 0), max(-dx, 0):width + min(-dx, 0)]
    return out


def _field(seed: int) -> dict[int, list[np.ndarray]]:
    """Three cycles of two channels: spots on noise, each plane moved by a few pixels."""
    rng = np.random.default_rng(seed)
    shape = (64, 72)
    pattern = 100.0 + 5.0 * rng.standard_normal(shape)
    ys, xs = np.mgrid[:shape[0], :shape[1]]
    for y, x in zip(rng.integers(0, shape[0], 30), rng.integers(0, shape[1], 30), strict=True):
        pattern += 800.0 * np.exp(-((ys - y) ** 2 + (xs - x) ** 2) / 4.0)
    planes: dict[int, list[np.ndarray]] = {}
    for cycle in (1, 2, 3):
        dy, dx = (0, 0) if cycle == 1 else (int(v) for v in rng.integers(-4, 5, 2))
        planes[cycle] = [(_moved(pattern, dy + channel, dx) + 3.0 * rng.standard_normal(shape)).astype(np.float32)
                         for channel in range(2)]
    return planes


def _points(seed: int) -> tuple[np.ndarray, np.ndarray]:
    source = np.random.default_rng(seed).uniform(0, 100, (40, 2))
    return source, source * 2.0 + 5.0


_GENERATORS: dict[str, Callable[[int], Any]] = {
    "Generator": np.random.default_rng,
    "PCG64": np.random.PCG64,
    "MT19937": np.random.MT19937,
    "RandomState": np.random.RandomState,
}


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(_GENERATORS)), seed=st.integers(0, 2**32 - 1), points=st.integers(0, 50))
def test_a_generator_seed_in_check_mode_ends_where_spacr_alone_leaves_it(patched: None, kind: str, seed: int,
                                                                         points: int) -> None:
    """The served call draws from a copy, spaCR's own from the caller's generator: the answer is
    spaCR's and the caller's generator is advanced once, as spaCR alone advances it."""
    from spacr import ops_phenotype

    source, target = _points(points)
    mine, theirs = _GENERATORS[kind](seed), _GENERATORS[kind](seed)
    patch.reset()
    got = ops_phenotype.seed_by_scaled_pairs(source, target, 2.0, trials=60, seed=mine)
    expected = original_of(ops_phenotype.seed_by_scaled_pairs)(source, target, 2.0, trials=60, seed=theirs)
    _same(got, expected)
    _same(_state(mine), _state(theirs))
    assert _calls()[SEED] == (1, 0)  # served, and so checked


def test_a_served_call_that_draws_otherwise_than_spacr_is_a_mismatch(patched: None,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Check compares the generators' states too: a served answer that took one draw more is not
    spaCR's behaviour even where the answer's bits are."""
    from spacr import ops_phenotype

    from spacr_accel_core.patch import _served_points

    real = _served_points.seed_by_scaled_pairs

    def one_draw_more(*args: Any, **kwargs: Any) -> tuple[Any, str]:
        answer = real(*args, **kwargs)
        kwargs["seed"].random()
        return answer

    _plant(monkeypatch, "spacr.ops_phenotype.seed_by_scaled_pairs", one_draw_more)
    patch.uninstall()
    patch.install(check=True)  # the wrapper reads the table when the seam is made
    source, target = _points(1)
    with pytest.raises(patch.PatchMismatch, match=r"seed_by_scaled_pairs.*another state"):
        ops_phenotype.seed_by_scaled_pairs(source, target, 2.0, trials=60, seed=np.random.default_rng(3))


def _counts_of_align(check: bool) -> tuple[dict[str, tuple[int, int]], Any]:
    from spacr import ops_cycles

    patch.uninstall()
    patch.install(check=check)
    patch.reset()
    answer = ops_cycles.align_field(_field(4))
    return _calls(), answer


def test_the_reference_of_align_field_reaches_no_other_seam(served_only: None) -> None:
    """Checked, ``align_field`` makes exactly the seam calls it makes served alone: spaCR's own
    reference runs its registrations and moves in spaCR's original functions, none counted (and
    none checked or refused by ``strict`` on its behalf)."""
    from spacr import ops_cycles

    served, answer = _counts_of_align(check=False)
    try:
        checked, checked_answer = _counts_of_align(check=True)
    finally:
        patch.install()
    assert served[ALIGN] == (1, 0)
    assert len(served) > 1  # the served call's own registrations go through their seams
    assert checked == served
    _same(checked_answer, answer)
    _same(answer, original_of(ops_cycles.align_field)(_field(4)))


def test_check_and_strict_refuse_only_what_the_served_call_refuses() -> None:
    """``check,strict``: what spaCR's own reference calls is never refused on its behalf."""
    from spacr import ops_cycles

    patch.reset()
    patch.install(check=True, strict=True)
    try:
        answer = ops_cycles.align_field(_field(5))
    finally:
        patch.install()
        patch.uninstall()
        patch.reset()
    _same(answer, original_of(ops_cycles.align_field)(_field(5)))


def test_a_served_answer_where_spacr_raises_is_a_mismatch(patched: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """spaCR's own maximum filter made to raise (every backend of its ``_try`` refuses): the served
    answer is reported, naming the seam and spaCR's exception."""
    from spacr import ops_accel

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no usable backend: the card went away")

    monkeypatch.setattr(ops_accel, "_try", refuse)
    field = np.random.default_rng(1).random((20, 24), dtype=np.float32)
    with pytest.raises(patch.PatchMismatch,
                       match=r"maximum_filter\(float32\[20, 24\], 3\): served an answer where spaCR's own raises "
                             r"RuntimeError: no usable backend") as raised:
        ops_accel.maximum_filter(field, 3)
    assert isinstance(raised.value.__cause__, RuntimeError)


def test_a_one_shot_iterator_is_read_once_by_spacr_alone(patched: None) -> None:
    """Channels given as a generator: check cannot hand them to both calls, so spaCR's own reads
    them, once, and the report says why the call was not served."""
    from spacr import ops_cycles

    planes = _field(6)[1]
    got = ops_cycles.sbs_mean_target(plane for plane in planes)
    _same(got, original_of(ops_cycles.sbs_mean_target)(iter(planes)))
    assert any("one-shot generator" in reason for reason in _reasons("spacr.ops_cycles.sbs_mean_target"))
    rest = iter([planes[0], planes[1], planes[0]])
    with pytest.raises(patch.PatchMismatch, match="one-shot list_iterator"):
        patch.install(check=True, strict=True)
        ops_cycles.sbs_mean_target(rest)


def _far_pair() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(8)
    first = rng.random((48, 48))
    return first, np.roll(first, (17, -15), axis=(0, 1))


def _warned(call: Callable[[], Any], caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    """What ``call`` warned, through ``warnings`` and through the loggers, in order of kind."""
    caplog.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [(item.category.__name__, str(item.message)) for item in caught] + \
        [(record.name, record.getMessage()) for record in caplog.records if record.levelno >= logging.WARNING]


def test_spacrs_logged_warning_reaches_the_caller_once(patched: None, caplog: pytest.LogCaptureFixture) -> None:
    """A far shift with ``expected=(0, 0)``: spaCR's phase correlation logs a warning, and so does
    the served call, which runs spaCR's own code on the patch's surface. The caller sees spaCR's,
    once."""
    from spacr import ops_register

    first, second = _far_pair()
    own = _warned(lambda: original_of(ops_register.phase_correlate)(first, second, expected=(0, 0)), caplog)
    patch.reset()
    got = _warned(lambda: ops_register.phase_correlate(first, second, expected=(0, 0)), caplog)
    assert own, "spaCR must warn here, or this test proves nothing"
    assert got == own
    assert _calls()["spacr.ops_register.phase_correlate"] == (1, 0)  # served, and so checked


def _warn_as_spacr() -> None:
    warnings.warn("a backend declined", RuntimeWarning, stacklevel=1)


def test_spacrs_python_warning_reaches_the_caller_once(patched: None, monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """spaCR's own maximum filter made to warn (its ``_try`` warns first), and the served call made
    to warn the same words from the same line: the caller sees spaCR's warning once, neither
    doubled nor lost."""
    from spacr import ops_accel

    spacrs_try, real = ops_accel._try, _served.maximum_filter

    def warning_try(*args: Any, **kwargs: Any) -> Any:
        _warn_as_spacr()
        return spacrs_try(*args, **kwargs)

    def warning_way(*args: Any, **kwargs: Any) -> tuple[Any, str]:
        _warn_as_spacr()
        return real(*args, **kwargs)

    monkeypatch.setattr(ops_accel, "_try", warning_try)
    _plant(monkeypatch, MAXIMUM, warning_way)
    patch.uninstall()
    patch.install(check=True)  # the wrapper reads the table when the seam is made
    field = np.random.default_rng(9).random((16, 16), dtype=np.float32)
    own = _warned(lambda: original_of(ops_accel.maximum_filter)(field, 3), caplog)
    patch.reset()
    got = _warned(lambda: ops_accel.maximum_filter(field, 3), caplog)
    assert own == [("RuntimeWarning", "a backend declined")]
    assert got == own
    assert _calls()[MAXIMUM] == (1, 0)


def test_another_threads_call_during_a_reference_is_served() -> None:
    """The flag that sends seams to spaCR inside a reference is the reference's own context's: a
    thread started meanwhile is served (and counted) as usual."""
    from spacr import ops_accel

    field = np.random.default_rng(2).random((16, 16), dtype=np.float32)
    tally = Tally()
    wrap = make_wrapper(tally, Modes(check=True))
    inner = wrap(MAXIMUM, _served.maximum_filter, original_of(ops_accel.maximum_filter), {"accel": ops_accel})
    seen: list[Any] = []

    def reference(data: np.ndarray, size: int) -> Any:
        inner(data, size)  # in the reference's context: spaCR's own, not counted
        worker = threading.Thread(target=lambda: seen.append(inner(data, size)))
        worker.start()
        worker.join()
        return original_of(ops_accel.maximum_filter)(data, size)

    outer = wrap("outer", _served.maximum_filter, reference, {"accel": ops_accel})
    _same(outer(field, 3), original_of(ops_accel.maximum_filter)(field, 3))
    rows = {row.seam: row for row in tally.seams(("outer", MAXIMUM))}
    assert [calls for _backend, calls, _seconds in rows[MAXIMUM].served] == [1]  # the thread's call alone
    assert [calls for _backend, calls, _seconds in rows["outer"].served] == [1]
    _same(seen[0], original_of(ops_accel.maximum_filter)(field, 3))


def _nudge_plugin() -> Any:
    support = str(Path(__file__).resolve().parent.parent / "patch_spacr_suite")
    sys.path.insert(0, support)
    try:
        import spacr_suite_nudge
    finally:
        sys.path.remove(support)
    return spacr_suite_nudge


def test_the_suites_planted_ulp_is_caught_by_check(patched: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite's self-test plugin moves one element of the registry's maximum filter by one ulp;
    check mode must raise on it, and the same call unchecked must give the moved element."""
    from spacr import ops_accel

    from spacr_accel_core import ops

    nudge = _nudge_plugin()
    monkeypatch.setattr(ops, "maximum_filter", nudge._nudged(ops.maximum_filter))
    field = np.random.default_rng(3).random((20, 30), dtype=np.float32)
    with pytest.raises(patch.PatchMismatch, match=r"maximum_filter\(float32\[20, 30\], 5\): the array\[0, 0\]"):
        ops_accel.maximum_filter(field, 5)
    patch.install()
    moved = ops_accel.maximum_filter(field, 5)
    own = original_of(ops_accel.maximum_filter)(field, 5)
    assert moved[0, 0] == np.nextafter(own[0, 0], np.float32(np.inf)) and np.array_equal(moved[1:], own[1:])


@pytest.fixture
def no_backend(served_only: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """spaCR's own backend orders made empty, as a broken machine's are."""
    from spacr import ops_accel, ops_register

    monkeypatch.setattr(ops_accel, "accelerated_backends", lambda gpu=True: ())
    monkeypatch.setattr(ops_register, "available_backends", lambda gpu=True: ())
    yield


@pytest.mark.parametrize("gpu", [True, False])
def test_no_usable_backend_raises_spacrs_error(no_backend: None, gpu: bool) -> None:
    """Where spaCR's own order is empty spaCR raises ``RuntimeError("no usable backend...")``: so
    does the patched call, passed to spaCR before anything is computed."""
    from spacr import ops_accel, ops_register

    field = np.random.default_rng(5).random((12, 12), dtype=np.float32)
    points = np.random.default_rng(6).random((10, 2), dtype=np.float32)
    first, second = _far_pair()
    calls: list[Callable[[], Any]] = [
        lambda: ops_accel.maximum_filter(field, 3, gpu=gpu),
        lambda: ops_accel.nearest_neighbours(points, points[::-1].copy(), gpu=gpu),
        lambda: ops_register.phase_correlate(first, second, gpu=gpu),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="no usable backend"):
            call()
    rows = {row.seam: row for row in patch.report().seams}
    for seam in (MAXIMUM, "spacr.ops_accel.nearest_neighbours", "spacr.ops_register.phase_correlate"):
        assert not rows[seam].served and "has no numpy" in rows[seam].passed[0][0]


def test_the_public_comparison_is_by_bits_and_names_the_other_side() -> None:
    """``patch.first_difference``: the same bits are the same answer (two NaNs of one pattern), a
    signed zero is not, and the message says whose answer the other is (spaCR's unless told)."""
    nan = np.array([np.nan, 1.0])
    assert first_difference(nan.copy(), nan) is None
    assert first_difference({"a": (1, 2.5)}, {"a": (1, 2.5)}) is None
    found = first_difference(np.array([0.0]), np.array([-0.0]))
    assert found is not None and "against spaCR's np.float64(-0.0)" in found
    assert first_difference(0.0, -0.0, against="NumPy's") == "the answer: 0.0 against NumPy's -0.0"
    assert first_difference([1], [1, 2], "x", against="") == "x: [1] against [1, 2]"
