"""What ``operation`` refuses, and what the table's door says, in this process (nothing here declares
a row: the table stays the core's own; a declaration that succeeds is tried in a fresh interpreter by
``test_toy_operation.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from spacr_accel_core import ops
from spacr_accel_core.table import Example, dispatch, operation, rows


def _spec(field: np.ndarray) -> np.ndarray:  # type: ignore[empty-body]  # a specification has no body
    """A specification: the hook's arguments and promise."""


def _row(**changes: Any) -> dict[str, Any]:
    given: dict[str, Any] = {
        "spec": _spec, "task": "words", "check": lambda result, expected: None,
        "agree": lambda expected, got: (True, ""), "reference": lambda field: field,
        "small": lambda: Example("one", (np.zeros((2, 2)),)), "bench": lambda quick, rng: Example("one", ()),
    }
    given.update(changes)
    return given


def _function(field: Any) -> Any:
    return field


def test_a_name_taken_by_another_function_is_refused() -> None:
    before = dict(rows())
    with pytest.raises(ValueError, match=r"'maximum_filter' is already declared by spacr_accel_core\.ops\._filters"):
        operation(**_row(name="maximum_filter"))(_function)
    assert dict(rows()) == before


def test_a_name_of_the_contracts_own_hooks_is_refused() -> None:
    """``spacr_accel_probe`` is how a prober answers: a row of that name would make every plugin
    manager refuse its specification, and every dispatch of every operation fail."""
    with pytest.raises(ValueError, match="spacr_accel_probe is one of the contract's own hooks"):
        operation(**_row(name="probe"))(_function)
    assert "probe" not in rows()
    assert ops.matmul(np.eye(2), np.eye(2)).tolist() == [[1.0, 0.0], [0.0, 1.0]]  # dispatch unharmed


@pytest.mark.parametrize("name", ["two words", "3d", "", "a-b"])
def test_a_name_that_is_no_identifier_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="must be a Python identifier"):
        operation(**_row(name=name))(_function)


def test_a_spec_without_arguments_is_refused() -> None:
    def bare() -> None:
        """No arguments: nothing a backend could be handed."""

    with pytest.raises(ValueError, match=r"its spec .*bare takes no arguments"):
        operation(**_row(spec=bare, name="bare_operation"))(_function)
    assert "bare_operation" not in rows()


def test_a_row_without_a_required_field_is_a_type_error_naming_it() -> None:
    given = _row(name="incomplete")
    del given["small"]
    with pytest.raises(TypeError, match="small"):
        operation(**given)(_function)


def test_the_rows_are_read_only_and_hold_every_ops_function() -> None:
    table = rows()
    with pytest.raises(TypeError):
        table["new"] = table["matmul"]  # type: ignore[index]  # the view refuses it: that is the test
    assert all(getattr(ops, name) is row.function for name, row in table.items())


def test_dispatch_names_an_undeclared_operation_and_checks_its_keywords() -> None:
    with pytest.raises(KeyError, match="'no_such_operation' is not a declared operation"):
        dispatch("no_such_operation", {})
    with pytest.raises(TypeError, match="gpu must be True or False"):
        dispatch("matmul", {"first": np.eye(2, dtype=np.float32), "second": np.eye(2, dtype=np.float32),
                            "out": None}, gpu="yes")
    with pytest.raises(TypeError, match="spacr_accel_matmul takes first, second, out"):
        dispatch("matmul", {"first": np.eye(2, dtype=np.float32)})


def test_dispatch_serves_a_declared_operation_as_its_function_does() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((3, 2), dtype=np.float32)
    got = dispatch("matmul", {"first": a, "second": b, "out": None}, expected=((2, 2), None))
    assert np.array_equal(got, ops.matmul(a, b))


def test_the_dask_face_builds_a_rows_graph_once() -> None:
    sad = pytest.importorskip("spacr_accel_core.dask")
    assert sad.maximum_filter is sad.maximum_filter  # a graph of its own: the face's function
