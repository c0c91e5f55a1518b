"""The operation table's public door: declare an operation, read the rows, dispatch a declared one.

AN OPERATION IS ONE ROW. Its public function is decorated with :func:`operation`, which carries what
the rest of the registry reads: the hook's specification (the arguments a backend receives and the
promise it keeps), the check of a backend's answer, when two answers agree, the plain reference, a
small case and a bench input, and its form on Dask. From that row alone, dispatch finds the plugins
that implement ``spacr_accel_<name>``, the conformance suite runs the small case on every backend
against the reference, ``spacr-accel bench`` times the bench input, the doctor gives it a row, and
:mod:`spacr_accel_core.dask` builds its graph (``dask=WholeFields()``). The core's own operations are
declared this way in their family modules (``spacr_accel_core.ops._filters``, ...); a third party
declares its own the same way, in one module, and serves it from one module of its backend
(``docs/contributing.md`` walks through both).

- :func:`operation`: the decorator; :class:`Operation`, the row it leaves; :func:`rows`, every row
  declared in this process, by name.
- :class:`Example`: an input of an operation (its small case, its bench input).
- :class:`WholeFields` and :class:`OwnGraph`: the Dask forms.
- :func:`dispatch`: a declared operation run on the best backend that serves it (the public
  function's last step, after it has checked and normalised its input).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .dispatch._registry import REGISTRY
from .operations._checks import _options
from .operations._operations import OPERATIONS, DaskForm, Operation, OwnGraph, WholeFields, operation
from .operations._results import Example

__all__ = ["DaskForm", "Example", "Operation", "OwnGraph", "WholeFields", "dispatch", "operation", "rows"]


def rows() -> Mapping[str, Operation]:
    """Every operation declared in this process, by name, in the order declared (a read-only view).

    :returns: the table: ``rows()["maximum_filter"].task``, ``.reference``, ``.small()``, ...
    """
    return MappingProxyType(OPERATIONS)


def dispatch(name: str, arguments: Mapping[str, Any], *, gpu: Any = True, backend: str | None = None,
             expected: Any = None) -> Any:
    """Run the declared operation ``name`` on the best backend that serves it, falling through on a
    ``RuntimeError`` as every operation does; ``last_dispatch()`` then says who served it.

    :param name: the operation's name (declared with :func:`operation`).
    :param arguments: the hook's arguments by name, already checked and normalised: exactly the
        spec's (the call is put in the spec's order here, so a caller cannot pass another).
    :param gpu: ``False`` refuses accelerated backends.
    :param backend: force one backend by name; its failure is raised.
    :param expected: what the row's ``check`` compares a backend's answer with (its shape, say).
    :returns: the answer of the backend that served it, which the row's check accepted.
    :raises KeyError: ``name`` is not a declared operation.
    :raises TypeError: ``gpu`` or ``backend`` is not a bool and a name, or ``arguments`` are not the
        spec's.
    :raises spacr_accel_core.NoBackendError: nothing serves it here (the message says how to fix it).
    """
    if name not in OPERATIONS:
        raise KeyError(f"{name!r} is not a declared operation; declared: {', '.join(OPERATIONS)}")
    use_gpu = _options(gpu, backend)
    return REGISTRY.dispatch(name, arguments, gpu=use_gpu, backend=backend, expected=expected)
