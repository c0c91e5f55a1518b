"""The plugin contract at its edges: by-name calls, lazy and bounded questions, hostile plugins."""

from __future__ import annotations

import threading
import tracemalloc
import types
import warnings
from collections import Counter
from typing import Any

import numpy as np
import pytest
import scipy.ndimage

from spacr_accel_core import BackendDeclined, BackendInfo, Declaration, NoBackendError, PluginFault, hookimpl, ops
from spacr_accel_core.testing import reference_nearest

FIRST = np.arange(6, dtype=np.float32).reshape(3, 2)
SECOND = np.arange(4, dtype=np.float32).reshape(2, 2)


def declared(name: str, priority: float, *, accelerated: bool = False, **hooks: Any) -> types.ModuleType:
    """A plugin of today's contract: a static declaration, hooks as given, every call counted."""
    module = types.ModuleType(f"spacr_accel_test_{name}")
    module.SPACR_ACCEL_PLUGIN = Declaration(name=name, priority=priority, accelerated=accelerated)  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
    module.calls = Counter()  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
    for hook, function in hooks.items():
        setattr(module, f"spacr_accel_{hook}", hookimpl(function))
    return module


# ---- pluggy's calling convention -----------------------------------------------------------


def test_hookimpls_are_called_by_name_reordered_or_a_subset(private, numpy_plugin):
    """Reordered arguments, and the optional ones (out, k, max_distance, metric) left out."""
    seen: dict[str, tuple[Any, ...]] = {}

    def nearest(chunk: int, target: np.ndarray, source: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        seen["nearest"] = (source.shape, target.shape, chunk)
        return reference_nearest(source, target)

    def matmul(second: np.ndarray, first: np.ndarray) -> np.ndarray:
        seen["matmul"] = (first.shape, second.shape)
        return np.matmul(first, second)

    def maximum_filter(size: int, field: np.ndarray) -> np.ndarray:
        seen["maximum_filter"] = (field.shape, size)
        return scipy.ndimage.maximum_filter(field, size, mode="nearest") + np.float32(0)

    private.register(declared("byname", 500.0, nearest_neighbours=nearest, matmul=matmul,
                              maximum_filter=maximum_filter), "byname")
    private.register(numpy_plugin, "numpy")
    source, target = np.zeros((4, 2)), np.arange(10.0).reshape(5, 2)
    index, _ = ops.nearest_neighbours(source, target)
    assert index.tolist() == [0, 0, 0, 0] and seen["nearest"] == ((4, 2), (5, 2), ops.CHUNK)
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), FIRST @ SECOND)
    assert seen["matmul"] == ((3, 2), (2, 2))
    ops.maximum_filter(np.eye(5), 3)
    assert seen["maximum_filter"] == ((5, 5), 3)
    dispatch = private.last_dispatch()
    assert dispatch is not None and dispatch.backend == "byname"


@pytest.mark.parametrize(("operation", "hook", "missing"), [
    ("nearest_neighbours", lambda source, chunk: None, "target"),
    ("maximum_filter", lambda field, out: None, "size"),
    ("matmul", lambda first: None, "second"),
])
def test_a_hookimpl_without_a_required_argument_makes_its_plugin_faulty(private, numpy_plugin, operation, hook,
                                                                        missing):
    """Only the optional arguments may be left out: one without ``target`` cannot search anything."""
    private.register(declared("lacking", 500.0, **{operation: hook}), "lacking")
    private.register(numpy_plugin, "numpy")
    row = next(r for r in private.plugins() if r.name == "lacking")
    assert row.status == "faulty"
    assert f"spacr_accel_{operation} does not take {missing}" in row.reason
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), FIRST @ SECOND)
    assert private.last_dispatch().backend == "numpy"


def test_a_hookimpl_may_leave_out_the_chunk_hint_as_pluggy_allows(private, numpy_plugin):
    """``chunk`` is a hint ("the answer does not depend on it"): a plugin that does not take it is
    served without it, in its own argument order, not refused as faulty."""
    seen: list[tuple[int, int]] = []

    def search(target: np.ndarray, source: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        seen.append((source.shape[0], target.shape[0]))
        return private_reference(source, target)

    private.register(declared("hintless", 500.0, nearest_neighbours=search), "hintless")
    private.register(numpy_plugin, "numpy")
    row = next(r for r in private.plugins() if r.name == "hintless")
    assert row.status == "ok", row.reason
    source = np.array([[0.0, 0.0], [5.0, 5.0], [9.0, 1.0]])
    target = np.array([[4.0, 4.0], [0.0, 1.0]])
    index, distance = ops.nearest_neighbours(source, target, chunk=1)
    assert seen == [(3, 2)]
    expected_index, expected_distance = private_reference(source.astype(np.float32), target.astype(np.float32))
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(distance, expected_distance)
    assert private.last_dispatch().backend == "hintless"


def test_a_shared_reference_reaches_a_plugin_once_with_the_pairing(private, numpy_plugin):
    """A reference broadcast against every cycle, or repeated in value, reaches a plugin as its
    distinct fields and each pair's index into them; one without ``pairing`` gets a field per pair.
    Both answer as the materialised stack does."""
    from spacr_accel_numpy import _registration_kernels

    seen: dict[str, list[tuple[Any, ...]]] = {"paired": [], "one_each": []}

    def paired(first: np.ndarray, second: np.ndarray, pairing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        seen["paired"].append((first.shape, tuple(pairing), first.flags.writeable, pairing.flags.writeable))
        return _registration_kernels.phase_correlate(first, second, pairing)

    def one_each(second: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        seen["one_each"].append((first.shape, first.flags.writeable))
        return _registration_kernels.phase_correlate(first, second, np.arange(first.shape[0]))

    rng = np.random.default_rng(12)
    cycles = rng.random((3, 2, 16, 18))
    broadcast = np.broadcast_to(cycles[:1], cycles.shape)
    repeated = np.repeat(cycles[:1], 3, axis=0)  # equal in value, in memory of its own
    for name, function in (("paired", paired), ("one_each", one_each)):
        private.register(declared(name, 500.0, phase_correlate=function), name)
    private.register(numpy_plugin, "numpy")
    want = ops.phase_correlate(np.array(broadcast), cycles, backend="numpy")
    for first in (broadcast, repeated):
        for name in ("paired", "one_each"):
            got = ops.phase_correlate(first, cycles, backend=name)
            for field in ("dy", "dx", "peak_ratio", "accepted"):
                np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
    # broadcast: its two distinct fields; repeated: the stack as it is, each pair pointing at the
    # first of the equal fields (the others are never read)
    assert seen["paired"] == [((2, 16, 18), (0, 1) * 3, False, False), ((6, 16, 18), (0, 1) * 3, False, False)]
    assert seen["one_each"] == [((6, 16, 18), False)] * 2
    # A cast keeps the broadcast: a float32 reference against float64 cycles, and integer fields.
    for first, second in ((np.broadcast_to(cycles[:1].astype(np.float32), cycles.shape), cycles),
                          (np.broadcast_to(np.round(cycles[:1] * 1000).astype(np.uint16), cycles.shape),
                           np.round(cycles * 1000).astype(np.uint16))):
        got = ops.phase_correlate(first, second, backend="paired")
        assert seen["paired"][-1] == ((2, 16, 18), (0, 1) * 3, False, False)
        want = ops.phase_correlate(np.array(first, dtype=np.float64), second.astype(np.float64), backend="numpy")
        for field in ("dy", "dx", "peak_ratio", "accepted"):
            np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
    distinct = ops.phase_correlate(cycles, cycles[::-1], backend="paired")
    assert seen["paired"][-1][:2] == ((6, 16, 18), tuple(range(6)))
    assert distinct.dy.shape == (3, 2)


def private_reference(source: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    index, distance = reference_nearest(source, target)
    return np.asarray(index, dtype=np.int64), np.asarray(distance, dtype=np.float32)


def test_probe_hooks_are_called_by_name_with_a_subset(plug):
    from spacr_accel_core import accelerator

    asked: list[object] = []

    class Prober:
        SPACR_ACCEL_PLUGIN = Declaration(name="aaa_subset_prober")

        @hookimpl
        def spacr_accel_probe(self, include_cuda: bool) -> None:  # a subset of the spec's arguments
            asked.append(include_cuda)

        @hookimpl
        def spacr_accel_neural_engines(self) -> list[str]:
            return ["Test Engine"]

    plug(Prober(), "aaa_subset_prober")
    accelerator.resolve(refresh=True)
    assert asked == [True]
    assert "Test Engine" in accelerator.neural_engines()


# ---- what a plugin is, apart from whether it can run now -----------------------------------


def test_a_declared_plugin_is_asked_only_when_next_in_line(private, numpy_plugin):
    asked = Counter()

    def info() -> BackendInfo:
        asked["gpu"] += 1
        raise RuntimeError("no card here")

    def matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return np.matmul(first, second)

    gpu = declared("gpu", 400.0, accelerated=True, backend_info=info, matmul=matmul)
    private.register(gpu, "gpu")
    private.register(numpy_plugin, "numpy")
    ops.matmul(FIRST, SECOND, gpu=False)  # refused outright: nothing to ask
    ops.matmul(FIRST, SECOND, backend="numpy")  # forced elsewhere: nothing to ask
    assert asked["gpu"] == 0
    ops.matmul(FIRST, SECOND)  # next in line: asked once, passed over with its note
    ops.matmul(FIRST, SECOND)
    assert asked["gpu"] == 1
    dispatch = private.last_dispatch()
    assert dispatch is not None and dispatch.backend == "numpy"
    assert dispatch.declined == (("gpu", "unusable: RuntimeError: no card here"),)


def test_a_declared_plugin_without_backend_info_is_usable(private):
    def plain_matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return np.matmul(first, second)

    private.register(declared("plain", 10.0, matmul=plain_matmul), "plain")
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), FIRST @ SECOND)
    row = next(r for r in private.plugins() if r.name == "plain")
    assert (row.status, row.priority, row.accelerated) == ("ok", 10.0, False)


# ---- a plugin that hangs -------------------------------------------------------------------


@pytest.fixture
def hung(monkeypatch: pytest.MonkeyPatch):
    """A plugin whose backend_info never answers (until the test ends), with a short bound; in two
    styles: ``declared`` (today's contract) and ``undeclared`` (no declaration: the earlier API)."""
    monkeypatch.setenv("SPACR_ACCEL_PROBE_TIMEOUT", "0.3")
    release = threading.Event()
    asked = Counter()

    def info() -> BackendInfo:
        asked["hung"] += 1
        release.wait()
        return BackendInfo()

    plugin = types.SimpleNamespace(asked=asked)
    for style in ("declared", "undeclared"):
        module = types.ModuleType(f"hung_{style}")
        if style == "declared":
            module.SPACR_ACCEL_PLUGIN = Declaration(name="hung", priority=900.0)  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
        module.spacr_accel_backend_info = hookimpl(info)  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
        module.spacr_accel_matmul = hookimpl(lambda first, second: np.zeros((1, 1), np.float32))  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
        setattr(plugin, style, module)
    yield plugin
    release.set()


def test_a_hung_backend_info_costs_a_forced_call_nothing_and_others_one_bound(private, numpy_plugin, hung):
    private.register(hung.declared, "hung")
    private.register(numpy_plugin, "numpy")
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND, backend="numpy"), FIRST @ SECOND)
    assert hung.asked["hung"] == 0  # a forced call asks no other plugin anything
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), FIRST @ SECOND)
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), FIRST @ SECOND)
    assert hung.asked["hung"] == 1  # asked once per process, not once per call
    row = next(r for r in private.plugins() if r.name == "hung")
    assert row.status == "unusable" and "did not answer within 0.3 s" in row.reason
    assert "spacr_accel_backend_info" in row.reason
    private.refresh()  # and asked again only after refresh()
    private.plugins()
    assert hung.asked["hung"] == 2


def test_an_undeclared_plugin_is_incompatible_and_never_asked(private, numpy_plugin, hung):
    """Before API 2 a plugin's backend_info said what it was; without a declaration it is now of
    another API: never asked (not even bounded), never called, and the reason says what it lacks."""
    private.register(hung.undeclared, "hung")
    private.register(numpy_plugin, "numpy")
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), FIRST @ SECOND)
    row = next(r for r in private.plugins() if r.name == "hung")
    assert row.status == "incompatible" and "SPACR_ACCEL_PLUGIN" in row.reason
    assert hung.asked["hung"] == 0
    dispatch = private.last_dispatch()
    assert dispatch is not None and dispatch.backend == "numpy"


def test_a_hung_backend_info_does_not_block_other_threads(private, numpy_plugin, hung):
    private.register(hung.declared, "hung")
    private.register(numpy_plugin, "numpy")
    results: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda: results.append(ops.matmul(FIRST, SECOND))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == 8 and all(np.array_equal(r, FIRST @ SECOND) for r in results)
    assert hung.asked["hung"] == 1


# ---- priorities ----------------------------------------------------------------------------


@pytest.mark.parametrize("priority", [np.float32(600), np.int64(600), 600])
def test_numpy_scalar_priorities_are_numbers(private, priority):
    module = types.ModuleType("scalar")
    module.SPACR_ACCEL_PLUGIN = Declaration(name="scalar", priority=priority)  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes

    def matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return np.matmul(first, second)

    module.spacr_accel_matmul = hookimpl(matmul)  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
    private.register(module, "scalar")
    row = next(r for r in private.plugins() if r.name == "scalar")
    assert (row.status, row.priority, type(row.priority)) == ("ok", 600.0, float)


def test_an_overflowing_priority_costs_only_its_plugin(private, numpy_plugin, kit):
    private.register(kit.make_plugin("huge", priority=10**400, matmul=kit.reference_matmul), "huge")
    private.register(numpy_plugin, "numpy")
    np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), FIRST @ SECOND)
    rows = {r.name: r for r in private.plugins()}
    assert rows["huge"].status == "faulty" and "priority" in rows["huge"].reason
    assert "too large" in rows["huge"].reason
    assert rows["numpy"].status == "ok"


# ---- plugins that scribble, exit or interrupt ----------------------------------------------


@pytest.mark.parametrize("operation", ["maximum_filter", "matmul", "nearest_neighbours"])
def test_a_plugin_that_writes_into_its_input_corrupts_nothing(private, numpy_plugin, operation):
    def scribble(*arrays: Any) -> Any:
        for array in arrays:
            if isinstance(array, np.ndarray):
                array[...] = 7  # then decline: the write must not have happened
        raise BackendDeclined("changed my mind")

    hooks = {"maximum_filter": lambda field, size: scribble(field),
             "matmul": lambda first, second: scribble(first, second),  # noqa: PLW0108  # pluggy reads the argument names
             "nearest_neighbours": lambda source, target, chunk: scribble(source, target)}
    private.register(declared("scribbler", 800.0, **{operation: hooks[operation]}), "scribbler")
    private.register(numpy_plugin, "numpy")
    field = np.arange(16, dtype=np.float32).reshape(4, 4)
    source = np.arange(8, dtype=np.float32).reshape(4, 2)
    target = np.arange(6, dtype=np.float32).reshape(3, 2)
    before = [a.copy() for a in (field, source, target, FIRST, SECOND)]
    if operation == "maximum_filter":
        got: Any = ops.maximum_filter(field, 3)
        np.testing.assert_array_equal(got, scipy.ndimage.maximum_filter(before[0], 3, mode="nearest"))
    elif operation == "matmul":
        got = ops.matmul(FIRST, SECOND)
        np.testing.assert_array_equal(got, before[3] @ before[4])
    else:
        got = ops.nearest_neighbours(source, target)
        np.testing.assert_array_equal(got[0], reference_nearest(before[1], before[2])[0])
    for now, then in zip((field, source, target, FIRST, SECOND), before, strict=True):
        np.testing.assert_array_equal(now, then)
    dispatch = private.last_dispatch()
    assert dispatch is not None and dispatch.backend == "numpy"
    assert dispatch.declined[0][0] == "scribbler" and "read-only" in dispatch.declined[0][1]
    assert dict(next(r for r in private.plugins() if r.name == "scribbler").faults)[operation]


def test_system_exit_in_an_operation_is_a_fault_and_interrupts_still_propagate(private, numpy_plugin):
    calls = Counter()

    def exits(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        calls["exits"] += 1
        raise SystemExit(3)

    private.register(declared("exits", 800.0, matmul=exits), "exits")
    private.register(numpy_plugin, "numpy")
    for _ in range(3):
        np.testing.assert_array_equal(ops.matmul(FIRST, SECOND), FIRST @ SECOND)
    assert calls["exits"] == 1  # quarantined after the first
    private.refresh()

    def interrupted(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        raise KeyboardInterrupt

    private.unregister("exits")
    private.register(declared("interrupted", 800.0, matmul=interrupted), "interrupted")
    with pytest.raises(KeyboardInterrupt):
        ops.matmul(FIRST, SECOND)
    with pytest.raises(KeyboardInterrupt):
        ops.matmul(FIRST, SECOND, backend="interrupted")


# ---- names checked -------------------------------------------------------------------------


def test_disabling_the_floor_really_removes_it_and_the_error_says_so(private, numpy_plugin, monkeypatch):
    monkeypatch.setenv("SPACR_ACCEL_DISABLE", "numpy")
    private.register(numpy_plugin, "numpy")
    private.refresh()
    assert ops.accelerated_backends() == ()
    with pytest.raises(NoBackendError) as info:
        ops.matmul(FIRST, SECOND)
    message = str(info.value)
    assert message.startswith("no usable backend for matmul")
    assert "numpy: blocked: named in SPACR_ACCEL_DISABLE" in message
    assert "SPACR_ACCEL_DISABLE blocks numpy: remove the floor from it" in message and "pip install" not in message


def test_the_error_when_nothing_runs_begins_with_the_seeds_words(private):
    with pytest.raises(NoBackendError, match=r"^no usable backend for nearest_neighbours:"):
        ops.nearest_neighbours(np.zeros((1, 2)), np.ones((1, 2)))


# ---- warnings, windows ---------------------------------------------------------------------


def test_an_overflowing_distance_is_inf_even_when_warnings_are_errors(private, numpy_plugin):
    private.register(numpy_plugin, "numpy")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        index, distance = ops.nearest_neighbours([[-3e38]], [[3e38]])
    assert index.tolist() == [0] and distance.tolist() == [np.inf]
    assert all(not r.faults for r in private.plugins())


@pytest.mark.parametrize(("shape", "size"), [((1, 70000), 200001), ((1, 10000), 20001), ((3, 2), 10**9)])
def test_a_window_covering_a_thin_field_is_a_reduction(private, shape, size):
    """No backend at all (the private registry has none): the core answers, in O(pixels) memory."""
    field = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    field[0, -1] = np.float32(5)
    tracemalloc.start()
    try:
        got = ops.maximum_filter(field, size)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20 and peak < 4 * field.nbytes + 2**20
    np.testing.assert_array_equal(got, np.full(shape, 5, np.float32))
    field[0, 0] = np.nan
    assert np.isnan(ops.maximum_filter(field, size)).all()  # the NaN rule


def test_max_distance_applied_by_the_core_compares_in_float64(kit, private, numpy_plugin):
    """A plugin without max_distance has it applied by the core, exactly as the backends that prune
    compare: a float32 distance of 0.1 (0.100000001...) is beyond max_distance=0.1."""
    def nearest(source, target, chunk):
        return np.zeros(len(source), np.int64), np.full(len(source), np.float32(0.1))

    private.register(kit.make_plugin("near", nearest_neighbours=nearest), "near")
    private.register(numpy_plugin, "numpy")
    index, distance = ops.nearest_neighbours(np.zeros((2, 2)), np.ones((3, 2)), max_distance=0.1, backend="near")
    assert index.tolist() == [-1, -1] and np.isinf(distance).all()


def test_a_wrong_answer_for_one_field_of_a_stack_is_that_plugins_fault(kit, private, numpy_plugin):
    """A plugin taking one field at a time that returns int32 peaks for a field is faulty, named by
    the field, as it would be for a 2-D call (not widened into a right-looking answer)."""
    def peaks(field, size, threshold):
        return np.zeros((1, 2), np.int32)

    plugin = kit.make_plugin("narrow", maximum_filter=lambda f, s: np.zeros(f.shape, np.float32))
    plugin.spacr_accel_local_maxima = hookimpl(peaks)  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
    private.register(plugin, "narrow")
    private.register(numpy_plugin, "numpy")
    with pytest.raises(PluginFault, match="field 0 of the stack"):
        ops.local_maxima(np.zeros((2, 4, 4), np.float32), 3, backend="narrow")
