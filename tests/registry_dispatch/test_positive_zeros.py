"""``Declaration.positive_zeros``: the core's +0.0 pass is made for every plugin but those that declare
their zeros positive, whose results it passes on untouched (and the conformance suite holds them to it)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import spacr_accel_core
from spacr_accel_core import BackendInfo, Declaration, hookimpl, last_dispatch, ops
from spacr_accel_core.testing import BackendConformance

Plug = Callable[[object, str], object]


class NegativeZeros:
    """A filter that answers every field with -0.0 everywhere (as scipy may, for a window of zeros)."""

    def __init__(self, name: str, declared: object = False) -> None:
        self.name = name
        self.SPACR_ACCEL_PLUGIN = Declaration(name=name, priority=500.0, positive_zeros=declared)  # type: ignore[arg-type]  # any value on purpose: the declaration's own check judges it
        self.returned: list[np.ndarray] = []

    @hookimpl
    def spacr_accel_backend_info(self) -> BackendInfo:
        return BackendInfo()

    @hookimpl
    def spacr_accel_maximum_filter(self, field: np.ndarray, size: int) -> np.ndarray:
        result = np.full(field.shape, -0.0, dtype=np.float32)
        self.returned.append(result)
        return result


_ZEROS = np.zeros((6, 7), np.float32)


def test_an_undeclared_plugin_gets_the_pass(plug: Plug) -> None:
    plugin = plug(NegativeZeros("plain"), "plain")
    got = ops.maximum_filter(_ZEROS, 3)
    assert last_dispatch().backend == "plain"  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record
    assert not np.signbit(got).any()
    assert got is plugin.returned[-1]  # type: ignore[attr-defined]  # written in place: it was the plugin's own


def test_a_declared_plugin_is_passed_on_untouched_and_the_suite_holds_it_to_its_word(plug: Plug) -> None:
    plugin = plug(NegativeZeros("liar", declared=True), "liar")
    got = ops.maximum_filter(_ZEROS, 3)
    assert got is plugin.returned[-1]  # type: ignore[attr-defined]  # no pass: the core trusted it
    assert np.signbit(got).all()
    checks = type("Suite", (BackendConformance,), {"backend": "liar"})()
    with pytest.raises(AssertionError):
        checks.test_maximum_filter_sign_of_zero()


def test_a_declaration_that_is_neither_a_bool_nor_operation_names_makes_the_plugin_faulty(plug: Plug) -> None:
    plug(NegativeZeros("vague", declared="yes"), "vague")
    row = next(r for r in spacr_accel_core.plugins() if r.name == "vague")
    assert row.status == "faulty"
    assert "SPACR_ACCEL_PLUGIN.positive_zeros is 'yes', not True, False or a set of operation names" in row.reason
    got = ops.maximum_filter(_ZEROS, 3)
    assert last_dispatch().backend != "vague"  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record
    assert not np.signbit(got).any()


def test_an_integer_field_needs_no_pass(plug: Plug) -> None:
    plugin = plug(NegativeZeros("plain"), "plain")
    got = ops.maximum_filter(np.zeros((6, 7), np.uint16), 3)
    assert got is plugin.returned[-1]  # type: ignore[attr-defined]  # plug() hands the plugin back as object: the stand-in's own record
