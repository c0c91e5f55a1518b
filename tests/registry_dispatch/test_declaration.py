"""``SPACR_ACCEL_PLUGIN``: each field validated once at load, a plugin of another API refused, pluggy's
ordering options refused, and the floor as whatever declares ``try_last``."""

from __future__ import annotations

import logging
import re
from typing import Any

import numpy as np
import pytest

from spacr_accel_core import (
    API_VERSION,
    BackendDeclined,
    BackendInfo,
    BackendUnavailable,
    Declaration,
    NoBackendError,
    Setting,
    hookimpl,
    ops,
    use,
)
from spacr_accel_core.contract._declaration import validated
from spacr_accel_core.operations._operations import OPERATIONS
from spacr_accel_core.toolkit import install_command

FIRST = np.arange(6, dtype=np.float32).reshape(2, 3)
SECOND = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
PRODUCT = (FIRST.astype(np.float64) @ SECOND.astype(np.float64)).astype(np.float32)

# (fields given to Declaration, the words the reason must hold)
MALFORMED = [
    ({"name": ""}, "SPACR_ACCEL_PLUGIN.name is '', not a non-empty string"),
    ({"name": 7}, "SPACR_ACCEL_PLUGIN.name is 7, not a non-empty string"),
    ({"priority": "high"}, "SPACR_ACCEL_PLUGIN.priority is 'high', not a finite number"),
    ({"priority": None}, "SPACR_ACCEL_PLUGIN.priority is None, not a finite number"),
    ({"priority": float("inf")}, "SPACR_ACCEL_PLUGIN.priority is inf, not a finite number"),
    ({"priority": float("nan")}, "SPACR_ACCEL_PLUGIN.priority is nan, not a finite number"),
    ({"priority": False}, "SPACR_ACCEL_PLUGIN.priority is False, not a finite number"),
    ({"priority": 10**400}, "too large for a float"),
    ({"accelerated": 1}, "SPACR_ACCEL_PLUGIN.accelerated is 1, not True or False"),
    ({"try_last": "yes"}, "SPACR_ACCEL_PLUGIN.try_last is 'yes', not True or False"),
    ({"positive_zeros": None}, "positive_zeros is None, not True, False or a set of operation names"),
    ({"stacks": 1}, "SPACR_ACCEL_PLUGIN.stacks is 1, not True, False or a set of operation names"),
    ({"field_dtypes": "uint8"}, "SPACR_ACCEL_PLUGIN.field_dtypes is 'uint8', not a tuple of dtype names"),
    ({"field_dtypes": ("float64",)}, "SPACR_ACCEL_PLUGIN.field_dtypes names 'float64'"),
    ({"settings": ("SPACR_ACCEL_X",)}, "SPACR_ACCEL_PLUGIN.settings is ('SPACR_ACCEL_X',), not a tuple of Setting"),
    ({"settings": [Setting("SPACR_ACCEL_X")]}, "SPACR_ACCEL_PLUGIN.settings is [Setting("),
    ({"settings": Setting("SPACR_ACCEL_X")}, "not a tuple of Setting records"),
]


def _declaration(**fields: Any) -> Declaration:
    return Declaration(**{"name": "bad", "priority": 500.0, **fields})


@pytest.mark.parametrize(("fields", "reason"), MALFORMED, ids=[str(i) for i in range(len(MALFORMED))])
def test_each_malformed_field_is_named(fields, reason):
    declaration, problem = validated(_declaration(**fields), "bad")
    assert declaration is None and problem is not None and reason in problem


@pytest.mark.parametrize(("fields", "reason"), MALFORMED, ids=[str(i) for i in range(len(MALFORMED))])
def test_a_malformed_declaration_makes_its_plugin_faulty_before_any_question(kit, private, numpy_plugin, fields,
                                                                            reason):
    bad = kit.make_plugin("bad", declaration=_declaration(**fields), matmul=kit.reference_matmul)
    private.register(bad, "bad")
    private.register(numpy_plugin, "numpy")
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
    assert private.last_dispatch().backend == "numpy"
    row = next(r for r in private.plugins() if r.name == "bad")
    assert row.status == "faulty" and reason in row.reason
    assert bad.calls == {}  # never asked whether it can run, never called


def test_a_valid_declaration_is_normalised_and_named_by_its_entry_point():
    given = Declaration(name="what-it-calls-itself", priority=np.int64(7), accelerated=True, try_last=False,
                        field_dtypes=("uint8", "float32"), positive_zeros=True, stacks=True,
                        settings=(Setting("SPACR_ACCEL_X", "1", "a knob"),))
    declaration, problem = validated(given, "entry")
    assert problem is None and declaration is not None
    assert (declaration.name, declaration.priority, type(declaration.priority)) == ("entry", 7.0, float)
    assert (declaration.accelerated, declaration.positive_zeros, declaration.stacks) == (True, True, True)
    assert declaration.narrow_fields("maximum_filter") == frozenset({np.dtype(np.uint8)})  # float32 is every plugin's
    assert declaration.settings == (Setting("SPACR_ACCEL_X", "1", "a knob"),)


def test_what_a_plugin_says_about_one_operation_is_said_per_operation():
    given = Declaration(name="per-op", stacks=("local_maxima",), positive_zeros=frozenset({"maximum_filter"}),
                        field_dtypes={"maximum_filter": ("uint16",)})
    declaration, problem = validated(given, "per-op", OPERATIONS)
    assert problem is None and declaration is not None
    assert declaration.stacks == frozenset({"local_maxima"})
    assert declaration.holds("stacks", "local_maxima") and not declaration.holds("stacks", "maximum_filter")
    assert declaration.holds("positive_zeros", "maximum_filter")
    assert declaration.narrow_fields("maximum_filter") == frozenset({np.dtype(np.uint16)})
    assert declaration.narrow_fields("local_maxima") == frozenset()  # not named: float32 only
    for wrong in ({"stacks": ("local_maximums",)}, {"positive_zeros": "maximum_filter"},
                  {"field_dtypes": {"maximum": ("uint8",)}}, {"field_dtypes": {"maximum_filter": ("float64",)}}):
        declaration, problem = validated(Declaration(name="bad", **wrong), "bad", OPERATIONS)
        assert declaration is None and problem is not None and next(iter(wrong)) in problem, (wrong, problem)


def test_declared_settings_are_listed_with_their_plugin(kit, private):
    knob = Setting("SPACR_ACCEL_TEST_KNOB", "4", "how hard to try")
    module = kit.make_plugin("knobbed", matmul=kit.reference_matmul)
    module.SPACR_ACCEL_PLUGIN = Declaration(name="knobbed", settings=(knob,))
    private.register(module, "knobbed")
    assert private.declared_settings() == (("knobbed", knob),)


# ---- another plugin API ---------------------------------------------------------------------------


@pytest.mark.parametrize("declared", [API_VERSION + 1, API_VERSION - 1, "2", None])
def test_another_api_version_is_incompatible(kit, private, numpy_plugin, core_log, declared):
    future = kit.make_plugin("future", api_version=declared, matmul=kit.raising(AssertionError("never")))
    private.register(future, "future")
    private.register(numpy_plugin, "numpy")
    row = next(r for r in private.plugins() if r.name == "future")
    assert row.status == "incompatible"
    assert f"written for plugin API {declared!r}; this spacr-accel-core speaks {API_VERSION}" == row.reason
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
    assert future.calls == {}
    assert len(kit.records(core_log, logging.WARNING, "'future' is incompatible")) == 1


@pytest.mark.parametrize("old", ["SPACR_ACCEL_BACKEND", "SPACR_ACCEL_API_VERSION"])
def test_the_earlier_api_s_attributes_alone_are_incompatible(kit, private, numpy_plugin, old):
    """A plugin of the earlier API (its name and priority in ``SPACR_ACCEL_BACKEND`` or its
    backend_info, an ``SPACR_ACCEL_API_VERSION``) has no declaration: never asked, never called."""
    legacy = kit.make_plugin("legacy", declaration=None, info=BackendInfo,
                             matmul=kit.raising(AssertionError("never")))
    setattr(legacy, old, 1)
    private.register(legacy, "legacy")
    private.register(numpy_plugin, "numpy")
    row = next(r for r in private.plugins() if r.name == "legacy")
    assert row.status == "incompatible"
    assert row.reason.startswith("declares no SPACR_ACCEL_PLUGIN record") and str(API_VERSION) in row.reason
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
    assert legacy.calls == {}
    with pytest.raises(BackendUnavailable, match="incompatible"):
        ops.matmul(FIRST, SECOND, backend="legacy")


def test_a_declaration_that_is_not_a_declaration_is_faulty(kit, private):
    odd = kit.make_plugin("odd", declaration={"name": "odd", "priority": 5}, matmul=kit.reference_matmul)
    private.register(odd, "odd")
    row = next(r for r in private.plugins() if r.name == "odd")
    assert row.status == "faulty"
    assert row.reason == "SPACR_ACCEL_PLUGIN is {'name': 'odd', 'priority': 5}, not a spacr_accel_core.Declaration"


# ---- pluggy's own ordering options --------------------------------------------------------------


def _matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    return np.matmul(first, second)


def _wrapping_matmul(first: np.ndarray, second: np.ndarray) -> Any:
    result = yield
    return result


@pytest.mark.parametrize(("option", "function"), [
    ("tryfirst", _matmul), ("trylast", _matmul), ("wrapper", _wrapping_matmul), ("hookwrapper", _wrapping_matmul),
])
def test_hook_options_are_refused_at_load(kit, private, numpy_plugin, core_log, option, function):
    """The registry orders plugins by their declarations and calls each itself: an option that
    would reorder or wrap the others cannot be honoured, so its plugin is refused, saying which."""
    module = kit.make_plugin("pushy", priority=900.0)
    module.spacr_accel_matmul = hookimpl(**{option: True})(function)
    private.register(module, "pushy")
    private.register(numpy_plugin, "numpy")
    row = next(r for r in private.plugins() if r.name == "pushy")
    assert row.status == "faulty"
    assert f"hook 'spacr_accel_matmul' of plugin 'pushy' is marked {option}" in row.reason
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
    assert private.last_dispatch().backend == "numpy"
    assert module.calls == {}
    assert len(kit.records(core_log, logging.WARNING, "'pushy' is faulty")) == 1


def test_a_hook_option_on_a_prober_hook_is_refused_too(kit, private, numpy_plugin):
    module = kit.make_plugin("prober", priority=900.0)
    module.spacr_accel_probe = hookimpl(trylast=True)(lambda include_cuda: None)
    private.register(module, "prober")
    private.register(numpy_plugin, "numpy")
    row = next(r for r in private.plugins() if r.name == "prober")
    assert row.status == "faulty" and "hook 'spacr_accel_probe' of plugin 'prober' is marked trylast" in row.reason
    assert "prober" not in [name for name, _ in private.hookimpls("spacr_accel_probe")]


def test_an_unmarked_hookimpl_is_accepted(kit, private):
    """The control: the same plugin without the option loads."""
    module = kit.make_plugin("plain", priority=900.0)
    module.spacr_accel_matmul = hookimpl(_matmul)
    private.register(module, "plain")
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)
    assert private.last_dispatch().backend == "plain"


# ---- the floor: whatever declares try_last --------------------------------------------------------


def test_a_third_party_try_last_plugin_is_the_floor_whatever_its_priority(kit, private):
    """No NumPy here: a plugin that declares ``try_last`` is tried after everything else (even one of
    lower priority), appended to any restriction, and never quarantined by one bad answer."""
    answers = iter([TypeError("one input it cannot take"), None, None, None])

    def ground_matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        problem = next(answers)
        if problem is not None:
            raise problem
        return kit.reference_matmul(first, second)

    ground = kit.make_plugin("ground", priority=1000.0, try_last=True, matmul=ground_matmul)
    low = kit.make_plugin("low", priority=0.5, matmul=kit.raising(BackendDeclined("not me")))
    private.register(ground, "ground")
    private.register(low, "low")
    assert private.backend_names() == ("low", "ground")
    with pytest.raises(NoBackendError) as info:  # the floor's fault reaches the caller...
        ops.matmul(FIRST, SECOND)
    assert dict(info.value.reasons)["ground"] == "faulty: raised TypeError: one input it cannot take"
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), PRODUCT)  # ...and it still answers
    dispatch = private.last_dispatch()
    assert dispatch.backend == "ground" and dispatch.declined == (("low", "BackendDeclined: not me"),)
    assert ground.calls["matmul"] == 2
    with use("low"):
        assert private.backend_names() == ("low", "ground")
    with use("low", only=True):
        assert private.backend_names() == ("low",)


def test_without_try_last_nothing_is_the_floor(kit, private):
    """The same plugin without the declaration is one backend among others: ranked by priority and
    quarantined after a fault; the error's fix names the install that brings a floor."""
    ground = kit.make_plugin("ground", priority=1000.0, matmul=kit.raising(TypeError("broken")))
    low = kit.make_plugin("low", priority=0.5, matmul=kit.raising(BackendDeclined("not me")))
    private.register(ground, "ground")
    private.register(low, "low")
    assert private.backend_names() == ("ground", "low")
    for _ in range(2):
        with pytest.raises(NoBackendError, match=re.escape(install_command())):
            ops.matmul(FIRST, SECOND)
    assert ground.calls["matmul"] == 1


def test_two_floors_are_both_last_by_priority(kit, private, numpy_plugin):
    ground = kit.make_plugin("ground", priority=1.0, try_last=True, matmul=kit.reference_matmul)
    high = kit.make_plugin("high", priority=50.0, matmul=kit.raising(BackendDeclined("no")))
    private.register(ground, "ground")
    private.register(high, "high")
    private.register(numpy_plugin, "numpy")
    assert private.backend_names() == ("high", "numpy", "ground")
    with use("high"):
        assert private.backend_names() == ("high", "numpy", "ground")
    assert private._state().floor == "numpy"
