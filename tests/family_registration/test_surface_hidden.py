"""The patch's correlation surface is invisible to spaCR's callers: a backend name, known or not,
meets spaCR's own answer or spaCR's own error with spaCR's exact message, patched as unpatched;
spaCR's table of surfaces keeps its names; the served call gives spaCR's whole record; and another
thread, while a served call runs, sees spaCR's table as spaCR made it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spacr_accel_core import patch
from spacr_accel_core.patch import _served_register


@pytest.fixture
def unpatched() -> Iterator[None]:
    was = patch.installed()
    patch.uninstall()
    yield
    if was:
        patch.install()


def _pair(seed: int = 0, shape: tuple[int, int] = (48, 64)) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    first = rng.random(shape)
    return first, np.roll(first, (3, -5), axis=(0, 1))


def _outcome(call: Any) -> tuple[str, ...]:
    try:
        answer = call()
    except Exception as error:  # the comparison is of whatever spaCR does, raising included
        return "raised", type(error).__qualname__, str(error)
    return "returned", repr(answer)


def _both(backend: object, module: str = "ops_register") -> tuple[tuple[str, ...], tuple[str, ...]]:
    import importlib

    first, second = _pair()

    def call() -> tuple[str, ...]:
        function = importlib.import_module(f"spacr.{module}").phase_correlate
        return _outcome(lambda: function(first, second, backend=backend, gpu=False))

    plain = call()
    assert patch.install()
    try:
        patched = call()
    finally:
        patch.uninstall()
    return plain, patched


@pytest.mark.parametrize("module", ["ops_register", "ops_cycles"])
@pytest.mark.parametrize("backend", ["spacr_accel", "Spacr_Accel", "nope", "numpy", "", 3, ("numpy",)])
def test_a_backend_name_meets_spacrs_own_answer_or_error_patched(unpatched: None, backend: object,
                                                                   module: str) -> None:
    plain, patched = _both(backend, module)
    assert patched == plain
    if backend in ("spacr_accel", "nope"):
        assert plain == ("raised", "ValueError",
                         f"unknown backend {backend!r}; expected one of ['cupy', 'numpy', 'torch']")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(max_size=12), st.sampled_from(["spacr_accel", "cupy", "torch", "numpy"])))
def test_any_backend_name_meets_spacrs_own_answer_or_error_patched(unpatched: None, backend: str) -> None:
    plain, patched = _both(backend)
    assert patched == plain


def test_the_served_call_gives_spacrs_whole_record_and_the_table_keeps_spacrs_names(unpatched: None) -> None:
    from spacr import ops_register

    first, second = _pair(1, (96, 130))
    expected = ops_register.phase_correlate(first, second, gpu=False)
    names, spacrs = sorted(ops_register._SURFACES), ops_register._SURFACES["numpy"]
    patch.reset()
    assert patch.install()
    try:
        found = ops_register.phase_correlate(first, second, gpu=False)
        served = {row.seam: row for row in patch.report().seams}["spacr.ops_register.phase_correlate"]
        assert served.served and not served.passed, served
        assert sorted(ops_register._SURFACES) == names
        outside = ops_register._SURFACES["numpy"](first, second)  # a caller reaching the table
        assert np.array_equal(outside, spacrs(first, second)) and outside.dtype == spacrs(first, second).dtype
    finally:
        patch.uninstall()
    assert found == expected and found.backend == "numpy"
    assert ops_register._SURFACES["numpy"] is spacrs


def test_a_surface_of_the_callers_own_in_spacrs_table_is_left_to_spacr(unpatched: None,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from spacr import ops_register

    first, second = _pair(2)
    assert patch.install()
    try:
        seen: list[int] = []
        spacrs = ops_register._surface_numpy

        def own(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            seen.append(1)
            return spacrs(a, b)

        monkeypatch.setitem(ops_register._SURFACES, "numpy", own)
        patch.reset()
        ops_register.phase_correlate(first, second, gpu=False)
        row = {row.seam: row for row in patch.report().seams}["spacr.ops_register.phase_correlate"]
        assert seen == [1] and not row.served and row.passed, row
    finally:
        monkeypatch.undo()
        patch.uninstall()


def test_another_thread_sees_spacrs_table_while_a_served_call_runs(unpatched: None,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The served call is held inside the patch's surface while a second thread asks spaCR for the
    patch's name and reaches the table's NumPy surface directly: both get spaCR's own."""
    from spacr import ops_register

    first, second = _pair(3)
    inside, release = threading.Event(), threading.Event()
    real = _served_register.spacr_surface

    def held(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        inside.set()
        assert release.wait(60)
        return real(a, b)

    monkeypatch.setattr(_served_register, "spacr_surface", held)
    expected_error = _outcome(lambda: ops_register.phase_correlate(first, second, backend="spacr_accel"))
    spacrs = ops_register._surface_numpy(first, second)
    assert patch.install()
    try:
        answers: list[object] = []
        served = threading.Thread(target=lambda: answers.append(ops_register.phase_correlate(first, second,
                                                                                            gpu=False)))
        served.start()
        assert inside.wait(60)
        try:
            error = _outcome(lambda: ops_register.phase_correlate(first, second, backend="spacr_accel"))
            direct = ops_register._SURFACES["numpy"](first, second)
        finally:
            release.set()
            served.join(60)
        assert error == expected_error
        assert np.array_equal(direct, spacrs)
        assert answers and answers[0] == ops_register.phase_correlate.__wrapped__(first, second, gpu=False)  # type: ignore[attr-defined]  # the seam keeps spaCR's function here
    finally:
        patch.uninstall()
