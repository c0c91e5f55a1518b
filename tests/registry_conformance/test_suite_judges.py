"""The conformance suite itself: it passes what conforms and fails what does not.

Each case registers an in-process backend and runs one of the suite's checks on it directly, so
what is tested is the suite's verdict (pass, skip with a reason, or fail), not a backend.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from spacr_accel_core import BackendDeclined, BackendInfo, BackendUnavailable, Declaration, PluginFault, hookimpl
from spacr_accel_core.testing import BackendConformance, reference_maximum_filter

Plug = Callable[[object, str], object]


class Filter:
    """A maximum_filter backend that is right, except as ``refuse`` says for a given field."""

    def __init__(self, name: str, *, usable: bool = True, priority: float = 500.0,
                 refuse: Callable[[np.ndarray], BaseException | None] = lambda field: None) -> None:
        self.name = name
        self.SPACR_ACCEL_PLUGIN = Declaration(name=name, priority=priority)
        self.usable = usable
        self.refuse = refuse
        self.calls = 0

    @hookimpl
    def spacr_accel_backend_info(self) -> BackendInfo:
        return BackendInfo(usable=self.usable, note="" if self.usable else "no device here")

    @hookimpl
    def spacr_accel_maximum_filter(self, field: np.ndarray, size: int) -> np.ndarray:
        self.calls += 1
        problem = self.refuse(field)
        if problem is not None:
            raise problem
        return reference_maximum_filter(field, size)


def suite(name: str) -> BackendConformance:
    return type("Suite", (BackendConformance,), {"backend": name})()


def nan_declined(field: np.ndarray) -> BaseException | None:
    return BackendDeclined("holds a NaN") if np.isnan(field).any() else None


def test_a_backend_that_declines_nan_per_call_passes(plug: Plug) -> None:
    backend = plug(Filter("nanless", refuse=nan_declined), "nanless")
    checks = suite("nanless")
    checks.test_maximum_filter_nan_window_is_nan()  # every call declined, numpy answering, checked
    checks.test_maximum_filter_large_windows_and_fields()  # served by it
    assert backend.calls > 0  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record
    with pytest.raises(pytest.skip.Exception, match="usable here"):
        checks.test_declines_cleanly_where_it_cannot_run()


def test_primitives_it_lacks_are_skipped_with_that_reason(plug: Plug) -> None:
    plug(Filter("filteronly"), "filteronly")
    with pytest.raises(pytest.skip.Exception, match="does not implement matmul"):
        suite("filteronly").test_matmul_tall_by_tiny()
    with pytest.raises(pytest.skip.Exception, match="does not implement nearest_neighbours"):
        suite("filteronly").test_nearest_ties_go_to_the_lowest_index()


def test_a_usable_backend_that_cannot_run_fails(plug: Plug) -> None:
    plug(Filter("liar", refuse=lambda field: BackendUnavailable("no device after all")), "liar")
    with pytest.raises(pytest.fail.Exception, match=r"usable \(status ok\) but its forced maximum_filter raised"):
        suite("liar").test_maximum_filter_sign_of_zero()


def test_a_decline_that_another_backend_answers_wrongly_fails(plug: Plug) -> None:
    """The answer after a decline is checked too: here the next backend in line is wrong."""
    plug(Filter("declines", refuse=lambda field: BackendDeclined("not this one")), "declines")

    class Wrong(Filter):
        @hookimpl
        def spacr_accel_maximum_filter(self, field: np.ndarray, size: int) -> np.ndarray:
            return reference_maximum_filter(field, size) + np.float32(1)

    plug(Wrong("wrong", priority=400.0), "wrong")
    with pytest.raises(AssertionError, match="pixels differ"):
        suite("declines").test_maximum_filter_sign_of_zero()


def test_a_name_nobody_installed_fails() -> None:
    with pytest.raises(pytest.fail.Exception, match="no spacr_accel plugin named 'nosuch'"):
        suite("nosuch").test_maximum_filter_sign_of_zero()
    with pytest.raises(pytest.fail.Exception, match="no spacr_accel plugin named 'nosuch'"):
        suite("nosuch").test_declines_cleanly_where_it_cannot_run()


def test_an_unusable_backend_is_checked_to_decline_and_its_checks_skip(plug: Plug) -> None:
    plug(Filter("nodevice", usable=False, refuse=lambda field: BackendUnavailable("no device")), "nodevice")
    checks = suite("nodevice")
    checks.test_declines_cleanly_where_it_cannot_run()
    with pytest.raises(pytest.skip.Exception, match=r"cannot run maximum_filter here \(unusable: no device here\)"):
        checks.test_maximum_filter_sign_of_zero()


def test_an_unusable_backend_that_runs_when_forced_is_checked_like_any(plug: Plug) -> None:
    plug(Filter("cpuonly", usable=False), "cpuonly")
    checks = suite("cpuonly")
    checks.test_declines_cleanly_where_it_cannot_run()
    checks.test_maximum_filter_sign_of_zero()


def test_an_unusable_backend_whose_forced_call_breaks_the_contract_fails(plug: Plug) -> None:
    plug(Filter("broken", usable=False, refuse=lambda field: TypeError("a bug")), "broken")
    with pytest.raises(PluginFault):
        suite("broken").test_declines_cleanly_where_it_cannot_run()
