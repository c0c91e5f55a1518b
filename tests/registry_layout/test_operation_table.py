"""An operation is its row (declared with its hookspec beside its ``ops`` function), its reference
and the floor's implementation: whatever a new row still lacks is named here, never served by a
silent default.

Capabilities, the bench, the conformance suite's small case, the doctor and the Dask layer read the
entry; these checks prove each of them has what it reads.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

from spacr_accel_core import last_dispatch, ops, plugins, reference
from spacr_accel_core.devices._tasks import primitive_tasks
from spacr_accel_core.operations._operations import OPERATIONS, Operation, OwnGraph, WholeFields
from spacr_accel_core.operations._results import RATIO_RTOL, Example
from spacr_accel_core.ops import Registration

NAMES = sorted(OPERATIONS)


def test_a_table_entry_cannot_leave_out_what_the_rest_reads() -> None:
    required = [f.name for f in dataclasses.fields(Operation) if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]
    assert {"check", "adapt", "task", "reference", "agree", "small", "bench"} <= set(required)
    matmul = OPERATIONS["matmul"]
    with pytest.raises(TypeError, match="small"):
        Operation("new_operation", matmul.function, matmul.spec, matmul.check,  # type: ignore[call-arg]  # small left out on purpose
                  matmul.adapt, {}, "words", reference=reference.matmul, agree=matmul.agree, bench=matmul.bench)


@pytest.mark.parametrize("name", NAMES)
def test_each_operation_has_its_hookspec_ops_function_and_reference(name: str) -> None:
    entry = OPERATIONS[name]
    assert entry.spec.__name__ == entry.hook, f"{name}'s specification is named {entry.spec.__name__}"
    assert inspect.getmodule(entry.spec) is inspect.getmodule(entry.function), f"{name}'s spec is not beside it"
    assert getattr(ops, name, None) is entry.function, f"ops.{name} is not the declared function"
    assert name in ops.__all__, f"ops.{name} is not in ops.__all__"
    assert entry.reference.__module__.split(".")[:2] == ["spacr_accel_core", "reference"], (
        f"{name}'s reference is not in spacr_accel_core.reference")
    assert getattr(reference, name) is entry.reference, f"spacr_accel_core.reference.{name} is not the row's"
    assert (name, entry.task) in primitive_tasks(), f"{name} has no row in the capabilities table"


@pytest.mark.parametrize("name", NAMES)
def test_the_floor_implements_each_operation(name: str) -> None:
    floor = [row for row in plugins() if row.name == "numpy"]
    assert floor and name in floor[0].operations, f"the floor (spacr_accel_numpy) does not implement {name}"


@pytest.mark.parametrize("name", NAMES)
def test_each_small_case_agrees_with_its_reference_on_the_floor(name: str) -> None:
    entry = OPERATIONS[name]
    example = entry.small()
    assert isinstance(example, Example)
    expected = entry.reference(*example.args, **dict(example.keywords))
    got = getattr(ops, name)(*example.args, backend="numpy", **dict(example.keywords))
    if isinstance(expected, Registration):
        # The floor's transforms run one axis at a time (the reference's are SciPy's 2-D calls):
        # the same shifts and verdicts, the float64 ratio within the contract's 1e-9 and no looser.
        assert entry.agree(expected, got)[0]
        assert got.peak_ratio == pytest.approx(expected.peak_ratio, rel=RATIO_RTOL, abs=0)
    else:
        assert entry.agree(expected, got) == (True, entry.agree(expected, expected)[1])
    served = last_dispatch()
    assert served is not None and served.operation == name


def test_an_agreement_can_fail() -> None:
    example = OPERATIONS["maximum_filter"].small()
    expected = reference.maximum_filter(*example.args)
    assert OPERATIONS["maximum_filter"].agree(expected, expected + np.float32(1))[0] is False


@pytest.mark.parametrize("name", NAMES)
def test_each_bench_input_is_one_ops_takes(name: str) -> None:
    example = OPERATIONS[name].bench(True, np.random.default_rng(0))
    assert isinstance(example, Example) and example.label
    signature = inspect.signature(getattr(ops, name))
    signature.bind(*example.args, **dict(example.keywords))
    for label, args in example.checks:
        assert label
        signature.bind(*args, **dict(example.keywords))


@pytest.mark.parametrize("name", NAMES)
def test_the_dask_layer_serves_each_operation(name: str) -> None:
    """Each operation with a Dask form is on the Dask face; one whose row declares none (a handful
    of points, no field to split) is absent from it, and the face says why."""
    sad = pytest.importorskip("spacr_accel_core.dask")
    form = OPERATIONS[name].dask
    if form is None:
        assert name not in sad.__all__, name
        with pytest.raises(AttributeError, match="its row declares no Dask form"):
            getattr(sad, name)
        return
    assert isinstance(form, (OwnGraph, WholeFields)), f"{name}'s row declares {form!r}, not a Dask form"
    assert callable(getattr(sad, name, None)) and name in sad.__all__, f"spacr_accel_core.dask has no {name}"
    if isinstance(form, OwnGraph):
        assert getattr(sad, name).__module__.startswith("spacr_accel_core.dask"), name


def test_a_row_without_a_dask_form_says_so_on_dask() -> None:
    sad = pytest.importorskip("spacr_accel_core.dask")
    formless = [name for name, row in OPERATIONS.items() if row.dask is None]
    assert formless, "no row without a Dask form to try"  # the landmarks' rows have none
    for name in formless:
        with pytest.raises(AttributeError, match=rf"no attribute '{name}' \(its row declares no Dask form\)"):
            getattr(sad, name)
    with pytest.raises(AttributeError, match=r"no attribute 'not_an_operation'$"):
        sad.not_an_operation  # noqa: B018  (the attribute read is the test)
