"""The operation table: each operation is one row, declared where its family lives.

WHY A ROW. An operation is its hook specification (whose argument names pluggy holds), the check of
what a backend returns, the adapter that lets every plugin serve it whatever subset of the arguments
it declares (:mod:`._adapters`), its plain definition (:mod:`spacr_accel_core.reference`), the inputs
it is tried on and the form it takes on Dask. NetworkX's ``@_dispatchable`` makes a function its own
table row; :func:`operation` does the same here: the public function of a family module
(``spacr_accel_core.ops._filters``, ...) is decorated with everything the rest reads, and the row it
leaves in :data:`OPERATIONS` is what discovery (which plugins implement the hook, and whether their
signatures can serve it), dispatch (the adapter, the result check), the capabilities table the doctor
prints, the bench (its realistic input), the conformance suite (its small case, judged against its
reference) and the Dask layer (its form) read. Adding an operation is one decorated function in one
family module, and one module per backend that serves it (``docs/contributing.md`` walks through it).

THE ADAPTERS KEEP THE HOT PATH BARE. A plugin that declares exactly the spec's arguments and takes
everything it can be sent is called as it is: no wrapper, no cost on the per-tile path.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import numpy as np

from ..contract import _hookspecs
from ..contract._declaration import Declaration
from ..contract._markers import PROJECT_NAME, hookspec
from ._adapters import Adapter, Call, adapt_plain
from ._results import Example

Check = Callable[[Any, Any], "str | None"]
Agree = Callable[[Any, Any], tuple[bool, str]]
_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass(frozen=True)
class WholeFields:
    """The Dask form of an operation that works on each field ``(H, W)`` of a stack on its own and
    answers an array of the stack's shape: the last two axes are brought whole into every block, the
    leading axes keep their chunks, and each block is one call of the operation on the worker that
    computes it (:mod:`spacr_accel_core.dask` builds the graph from the row; no graph code of its own).

    :param dtype: the answer's dtype, or ``None`` to read it off the operation's answer on a tiny
        field of the stack's dtype.
    """

    dtype: str | None = None


@dataclass(frozen=True)
class OwnGraph:
    """The Dask form of an operation whose graph :mod:`spacr_accel_core.dask` writes itself (a halo
    for a window, pairs never split, reads chunked against whole objects): the row names the
    function there, which has the operation's name."""


DaskForm = WholeFields | OwnGraph


@dataclass(frozen=True)
class Operation:
    """One operation, as the registry serves it: what :func:`operation` leaves in the table.

    :param name: the operation's name (``ops.<name>``); its hook is ``spacr_accel_<name>``.
    :param function: the public function (``spacr_accel_core.ops.<name>``, or a third party's): what
        the conformance suite and the bench call.
    :param spec: the hook's specification: a function whose arguments are the hook's, in the order
        the core passes them, and whose docstring is the promise a backend keeps.
    :param check: ``check(result, expected)`` says what is wrong with a backend's result, or
        ``None``; a wrong result makes that backend faulty for this operation.
    :param adapt: ``adapt(function, argnames, spec, declaration, operation)`` gives the plugin's
        implementation as a call taking the spec's arguments (:attr:`arguments`) by position
        (:meth:`adapted` calls it; ``operation`` is what the declaration's per-operation facts
        are read for).
    :param optional: arguments a plugin may leave out of its signature, each with the value it then
        serves (a plugin without ``k`` serves ``k=1`` only; ``None`` for a hint such as ``chunk``,
        which the answer does not depend on and which is then simply not passed, as pluggy would).
    :param task: the step of spaCR's science it serves, in the capabilities table's words.
    :param reference: its plain definition, called like the public function: what the conformance
        suite and the bench compare every backend with.
    :param agree: ``agree(expected, got) -> (agrees, detail)``: when two answers are the same
        answer (bit for bit for a filter, within float32 rounding for a product).
    :param small: a tiny input: the conformance suite runs it on every backend, one that cannot
        run here included (it must decline cleanly or agree with :attr:`reference`).
    :param bench: ``bench(quick, rng)``: a realistic input (a camera tile, a well's spots), which
        ``spacr-accel bench`` times on every backend and checks against the floor's answer.
    :param dask: its form on ``dask.array`` (:class:`WholeFields`, :class:`OwnGraph`), or ``None``
        where it has none (``spacr_accel_core.dask`` then says so).
    """

    name: str
    function: Callable[..., Any]
    spec: Callable[..., Any]
    check: Check
    adapt: Adapter
    optional: Mapping[str, object]
    task: str
    reference: Callable[..., Any]
    agree: Agree
    small: Callable[[], Example]
    bench: Callable[[bool, np.random.Generator], Example]
    dask: DaskForm | None = field(default=None)

    @property
    def hook(self) -> str:
        """The hook name plugins implement."""
        return f"spacr_accel_{self.name}"

    @functools.cached_property
    def arguments(self) -> tuple[str, ...]:
        """The hookspec's arguments in order: how the core passes them, by position (read once; see
        :meth:`positional`)."""
        return tuple(inspect.signature(self.spec).parameters)

    def positional(self, named: Mapping[str, Any]) -> tuple[Any, ...]:
        """The arguments ``ops`` names, in the hookspec's order: the call is built by name, so what
        ``ops`` passes cannot silently disagree with the order of the specification.

        :raises TypeError: a name the specification lacks, or one of its arguments not given.
        """
        order = self.arguments
        if len(named) == len(order):
            try:
                return tuple(named[name] for name in order)
            except KeyError:
                pass
        raise TypeError(f"{self.hook} takes {', '.join(order)}; given {', '.join(named)}")

    def adapted(self, function: Call, argnames: tuple[str, ...], declaration: Declaration) -> Call:
        """One plugin's implementation as dispatch calls it (see :attr:`adapt`)."""
        return self.adapt(function, argnames, self.arguments, declaration, self.name)

    def missing(self, argnames: tuple[str, ...]) -> tuple[str, ...]:
        """The required arguments a plugin's signature lacks (it cannot serve the operation)."""
        return tuple(a for a in self.arguments if a not in argnames and a not in self.optional)


OPERATIONS: Final[dict[str, Operation]] = {}
"""Every operation declared in this process, by name, in the order declared (the doctor and the bench
list them so). The core's own families are declared when ``spacr_accel_core`` is imported; read it,
never write it: :func:`operation` is the one way in."""

_declaring = threading.Lock()
_listeners: list[Callable[[], None]] = []


def on_declared(listener: Callable[[], None]) -> None:
    """Call ``listener()`` after each operation declared from now on: the registry forgets the hooks
    it read, so a plugin's implementation of a new operation is found at the next call."""
    _listeners.append(listener)


def operation(*, spec: Callable[..., Any], task: str, check: Check, agree: Agree, reference: Callable[..., Any],
              small: Callable[[], Example], bench: Callable[[bool, np.random.Generator], Example],
              adapt: Adapter = adapt_plain, optional: Mapping[str, object] | None = None,
              dask: DaskForm | None = None, name: str | None = None) -> Callable[[_F], _F]:
    """Declare the decorated public function an operation of the registry: its one row.

    The function checks its input, answers what needs no backend, and dispatches the rest by name
    (``dispatch(name, {argument: value, ...})``); a plugin serves it by implementing the hook
    ``spacr_accel_<name>`` with the spec's arguments. The function is returned as it is.

    :param spec: the hook's specification (see :attr:`Operation.spec`); it is marked as a pluggy
        hookspec here, so it is written as a plain function with a docstring and no body.
    :param task: the capabilities table's words for it (``"Peak finding (maximum_filter)"``).
    :param check: see :attr:`Operation.check`.
    :param agree: see :attr:`Operation.agree`.
    :param reference: see :attr:`Operation.reference`.
    :param small: see :attr:`Operation.small`.
    :param bench: see :attr:`Operation.bench`.
    :param adapt: see :attr:`Operation.adapt`; the default calls a plugin that declares exactly the
        spec's arguments as it is, by position.
    :param optional: see :attr:`Operation.optional`.
    :param dask: see :attr:`Operation.dask`.
    :param name: the operation's name; the function's own name by default.
    :raises ValueError: the name is no identifier, names one of the contract's own hooks or is taken by
        another function, or the spec has no arguments.
    """

    def declare(function: _F) -> _F:
        named = function.__name__ if name is None else name
        if not named.isidentifier():
            raise ValueError(f"operation name must be a Python identifier, got {named!r}")
        if hasattr(_hookspecs, f"spacr_accel_{named}"):
            # The contract's own hooks (what a plugin is, probing, warming) are no operation's: a row
            # named so would make every plugin manager refuse its specification, and every dispatch fail.
            raise ValueError(f"operation {named!r}: spacr_accel_{named} is one of the contract's own hooks")
        if not inspect.signature(spec).parameters:
            raise ValueError(f"operation {named!r}: its spec {spec.__qualname__} takes no arguments")
        if not getattr(spec, f"{PROJECT_NAME}_spec", None):
            hookspec(spec)
        row = Operation(named, function, spec, check, adapt, dict(optional or {}), task, reference, agree, small,
                        bench, dask)
        with _declaring:
            held = OPERATIONS.get(named)
            if held is not None and _identity(held.function) != _identity(function):
                raise ValueError(f"operation {named!r} is already declared by {_identity(held.function)}")
            OPERATIONS[named] = row
        for listener in tuple(_listeners):
            listener()
        return function

    return declare


def _identity(function: Callable[..., Any]) -> str:
    """Where a function is defined: the same module reloaded declares the same row again."""
    return f"{function.__module__}.{function.__qualname__}"


def declared() -> tuple[Operation, ...]:
    """Every row declared so far, read at one moment: a reader that walks the rows more than once (the
    registry's build) sees one table even while another thread declares an operation."""
    with _declaring:
        return tuple(OPERATIONS.values())


def hook_specifications(rows: tuple[Operation, ...]) -> type:
    """The hook specifications of ``rows`` as one namespace pluggy's ``add_hookspecs`` reads."""
    return type("OperationHooks", (), {row.hook: staticmethod(row.spec) for row in rows})
