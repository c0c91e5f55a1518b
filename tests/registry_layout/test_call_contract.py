"""The call contract between ``ops`` and the hook specifications cannot drift.

``ops`` names the arguments it passes and the operation table puts them in the specification's
order; a name the specification lacks, or one it has that ``ops`` does not give, is a ``TypeError``
at the first call, and this test makes every operation's first call (its table entry's small case).
The specifications carry no pluggy call option: the core calls each plugin itself, never ``manager.hook.<name>()``.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from spacr_accel_core import ops
from spacr_accel_core.contract import _hookspecs
from spacr_accel_core.dispatch._registry import REGISTRY
from spacr_accel_core.operations._operations import OPERATIONS


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_ops_passes_exactly_the_specifications_arguments(operation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, tuple[str, ...]]] = []
    real = REGISTRY.dispatch

    def spy(name: str, named: dict[str, Any], **kwargs: Any) -> Any:
        seen.append((name, tuple(named)))
        return real(name, named, **kwargs)

    monkeypatch.setattr(REGISTRY, "dispatch", spy)
    example = OPERATIONS[operation].small()  # the table's own small case: nothing to add here
    getattr(ops, operation)(*example.args, **dict(example.keywords))
    spec = tuple(inspect.signature(OPERATIONS[operation].spec).parameters)
    assert seen and all(name == operation and sorted(names) == sorted(spec) for name, names in seen), seen


def test_a_misnamed_or_missing_argument_is_refused() -> None:
    table = OPERATIONS["matmul"]
    assert table.positional({"out": None, "second": 2, "first": 1}) == (1, 2, None)
    with pytest.raises(TypeError, match="spacr_accel_matmul takes first, second, out"):
        table.positional({"first": 1, "second": 2, "into": None})
    with pytest.raises(TypeError):
        table.positional({"first": 1, "second": 2})


def test_no_specification_carries_a_pluggy_call_option() -> None:
    options = {name: spec.spacr_accel_spec for name, spec in vars(_hookspecs).items()
               if name.startswith("spacr_accel_") and hasattr(spec, "spacr_accel_spec")}
    options.update({row.hook: row.spec.spacr_accel_spec for row in OPERATIONS.values()})  # type: ignore[attr-defined]  # the marker's attribute
    assert "spacr_accel_backend_info" in options and "spacr_accel_phase_correlate" in options  # the control
    flagged = {name: opts for name, opts in options.items()
               if opts.get("firstresult") or opts.get("historic") or opts.get("warn_on_impl")}
    assert not flagged, flagged
