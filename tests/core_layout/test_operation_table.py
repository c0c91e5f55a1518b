"""An operation is its table entry, its hookspec, its ``ops`` function, its reference and the floor's
implementation: whatever a new entry still lacks is named here, never served by a silent default.

Capabilities, the bench, the conformance suite's small case, the doctor and the Dask layer read the
entry; these checks prove each of them has what it reads.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

from spacr_accel_core import last_dispatch, ops, plugins, reference
from spacr_accel_core.contract import _hookspecs
from spacr_accel_core.devices._tasks import _PRIMITIVES
from spacr_accel_core.operations._operations import OPERATIONS, Operation
from spacr_accel_core.operations._results import RATIO_RTOL, Example
from spacr_accel_core.ops import Registration

NAMES = sorted(OPERATIONS)


def test_a_table_entry_cannot_leave_out_what_the_rest_reads() -> None:
    required = [f.name for f in dataclasses.fields(Operation) if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]
    assert {"check", "adapt", "task", "reference", "agree", "small", "bench"} <= set(required)
    with pytest.raises(TypeError, match="small"):
        Operation("new_operation", OPERATIONS["matmul"].check, OPERATIONS["matmul"].adapt, {}, "words",  # type: ignore[call-arg]
                  reference=reference.matmul, agree=OPERATIONS["matmul"].agree, bench=OPERATIONS["matmul"].bench)


@pytest.mark.parametrize("name", NAMES)
def test_each_operation_has_its_hookspec_ops_function_and_reference(name: str) -> None:
    entry = OPERATIONS[name]
    assert hasattr(_hookspecs, entry.hook), f"no hook specification {entry.hook} in contract/_hookspecs.py"
    assert callable(getattr(ops, name, None)), f"no ops.{name}"
    assert name in ops.__all__, f"ops.{name} is not in ops.__all__"
    assert inspect.getmodule(entry.reference) is reference, f"{name}'s reference is not in spacr_accel_core.reference"
    assert (name, entry.task) in _PRIMITIVES, f"{name} has no row in the capabilities table"


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
    sad = pytest.importorskip("spacr_accel_core.dask")
    assert callable(getattr(sad, name, None)) and name in sad.__all__, f"spacr_accel_core.dask has no {name}"
