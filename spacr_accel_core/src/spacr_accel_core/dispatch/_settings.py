"""The settings' names, their defaults from the environment, and the context-local overrides: the
body of :mod:`spacr_accel_core.config` (which adds what needs the registry: ``current``,
``override``, ``variables``). Every environment variable the core reads is named here once and
read here: the orders at discovery (:func:`environment`), the probe bound and the forced device at
every use (:func:`probe_timeout`, :func:`device_text`).

Imports only the contract and the operation table (the names of the operations).
"""

from __future__ import annotations

import contextvars
import logging
import math
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Final

from ..contract._declaration import Setting
from ..operations._operations import OPERATIONS

__all__ = ["Config", "cpu_requested", "environment", "use"]

logger = logging.getLogger(__name__)

ENV_BACKENDS: Final = "SPACR_ACCEL_BACKENDS"
ENV_DISABLE: Final = "SPACR_ACCEL_DISABLE"
ENV_ONLY: Final = "SPACR_ACCEL_ONLY"
ENV_OPERATION_PREFIX: Final = "SPACR_ACCEL_BACKENDS_"
ENV_PROBE_TIMEOUT: Final = "SPACR_ACCEL_PROBE_TIMEOUT"
"""Seconds one probe may take before it is abandoned; ``inf`` waits forever."""
ENV_DEVICE: Final = "SPACR_DEVICE"
"""Force a device (``cuda:1``, ``mps``, ``xpu``, ``directml``) or the CPU. The escape hatch for "the
GPU answer looks wrong" that does not require uninstalling anything."""

DEFAULT_PROBE_TIMEOUT: Final = 60.0
"""Generous on purpose: a prober imports its library, and a cold ``import torch`` from a slow
laptop disk takes tens of seconds. A driver that hangs takes forever, which is what this catches."""

_warned_values: set[str] = set()

_CORE_VARIABLES: Final = (
    Setting(ENV_BACKENDS, "", "backends to use, best first, e.g. 'cupy,numpy' (the floor is appended "
            "unless SPACR_ACCEL_ONLY is set)"),
    Setting(f"{ENV_OPERATION_PREFIX}<OPERATION>", "", "the same for one operation, e.g. "
            "SPACR_ACCEL_BACKENDS_MAXIMUM_FILTER=opencv,numba"),
    Setting(ENV_ONLY, "0", "1: only the named backends run; a decline is an error instead of a fall-through"),
    Setting(ENV_DISABLE, "", "plugins never imported, e.g. a plugin that crashes the interpreter"),
    Setting(ENV_PROBE_TIMEOUT, "60", "seconds a device probe or a plugin's answer may take"),
    Setting(ENV_DEVICE, "", "force the device: cpu, cuda:1, mps, xpu"),
)


def split_names(value: str | None) -> tuple[str, ...]:
    """``"cupy, numpy,,cupy"`` -> ``("cupy", "numpy")``: order kept, blanks and repeats dropped."""
    if not value:
        return ()
    return tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))


@dataclass(frozen=True)
class Config:
    """The settings in force.

    :param backends: backends to use, best first (the floor appended unless ``only``); ``None``: all,
        by priority.
    :param only: only the backends named (for the operation, or in ``backends``) run, and nothing
        after them: a decline is an error that names the backend and its reason.
    :param operations: per operation, its own order (overrides ``backends`` for that operation),
        as ``((operation, (name, ...)), ...)`` so the record stays hashable.
    :param disable: plugins never imported (read at discovery only).
    :param wait: under ``only``, a named backend still building what a call needs (numba compiling
        in the background) is waited for, bounded by the probe timeout, instead of ending the call
        in an error; ``False`` for a caller with a fallback of its own that wants an answer now.
    """

    backends: tuple[str, ...] | None = None
    only: bool = False
    operations: tuple[tuple[str, tuple[str, ...]], ...] = ()
    disable: tuple[str, ...] = ()
    wait: bool = True

    def order_for(self, operation: str) -> tuple[str, ...] | None:
        """The names in force for ``operation``: its own order, else :attr:`backends`."""
        for name, order in self.operations:
            if name == operation:
                return order
        return self.backends


def environment(environ: Mapping[str, str] | None = None) -> Config:
    """The configuration the environment gives (what a process starts with).

    :param environ: the variables to read; ``os.environ`` when not given.
    """
    env = os.environ if environ is None else environ
    operations = tuple(sorted(
        (key[len(ENV_OPERATION_PREFIX):].lower(), split_names(value))
        for key, value in env.items()
        if key.startswith(ENV_OPERATION_PREFIX) and split_names(value)))
    return Config(backends=split_names(env.get(ENV_BACKENDS)) or None,
                  only=env.get(ENV_ONLY, "").strip().lower() in ("1", "true", "yes", "on"),
                  operations=operations,
                  disable=split_names(env.get(ENV_DISABLE)))


@dataclass(frozen=True)
class Changes:
    """What a context's overrides change (``None``: as in force outside it). Kept as changes, not
    as a whole configuration, so each registry applies them to the environment IT read.

    :param clear_operations: ``backends=`` was given without ``operations=``: the names given are
        the order for every operation, so the per-operation orders in force outside are dropped.
    """

    backends: tuple[str, ...] | None = None
    only: bool | None = None
    operations: tuple[tuple[str, tuple[str, ...]], ...] = ()
    clear_operations: bool = False
    wait: bool | None = None

    def over(self, base: Config) -> Config:
        """``base`` with these changes applied (per-operation orders merged, these winning)."""
        orders = {} if self.clear_operations else dict(base.operations)
        orders.update(self.operations)
        return Config(backends=base.backends if self.backends is None else self.backends,
                      only=base.only if self.only is None else self.only,
                      operations=tuple(sorted(orders.items())), disable=base.disable,
                      wait=base.wait if self.wait is None else self.wait)

    def then(self, inner: Changes) -> Changes:
        """These changes with an inner override's on top (a nested ``with``)."""
        orders = {} if inner.clear_operations else dict(self.operations)
        orders.update(inner.operations)
        return Changes(backends=self.backends if inner.backends is None else inner.backends,
                       only=self.only if inner.only is None else inner.only,
                       operations=tuple(sorted(orders.items())),
                       clear_operations=self.clear_operations or inner.clear_operations,
                       wait=self.wait if inner.wait is None else inner.wait)

    def names(self) -> tuple[str, ...]:
        """Every backend name these changes mention."""
        return (*(self.backends or ()), *(n for _, order in self.operations for n in order))


_context: contextvars.ContextVar[Changes | None] = contextvars.ContextVar("spacr_accel_config", default=None)

_cpu_forced: contextvars.ContextVar[bool] = contextvars.ContextVar("spacr_accel_cpu_forced", default=False)
"""Set while a call that forced one backend with ``gpu=False`` runs (see :func:`cpu_requested`)."""


def overridden() -> Changes | None:
    """This context's changes, or ``None`` (the per-call path reads only this)."""
    return _context.get()


def _checked(backends: tuple[str, ...] | list[str] | None, only: bool | None,
             operations: Mapping[str, tuple[str, ...] | list[str]] | None, wait: bool | None = None) -> Changes:
    """The keywords of :func:`override` as :class:`Changes`, each checked."""
    orders: tuple[tuple[str, tuple[str, ...]], ...] = ()
    if only is not None and not isinstance(only, bool):
        raise TypeError(f"only must be True or False, got {only!r}")
    if wait is not None and not isinstance(wait, bool):
        raise TypeError(f"wait must be True or False, got {wait!r}")
    if operations is not None:
        unknown = sorted(set(operations) - set(OPERATIONS))
        if unknown:
            raise ValueError(f"operations names unknown operations {unknown}; known: {sorted(OPERATIONS)}")
        orders = tuple(sorted((op, _names(order, f"operations[{op!r}]")) for op, order in operations.items()))
    return Changes(backends=None if backends is None else _names(backends, "backends"), only=only,
                   operations=orders, clear_operations=backends is not None and operations is None, wait=wait)


@contextmanager
def _changes(changes: Changes) -> Iterator[None]:
    """Put ``changes`` in force for this context (on top of any in force); no discovery needed."""
    outer = _context.get()
    token = _context.set(changes if outer is None else outer.then(changes))
    try:
        yield
    finally:
        _context.reset(token)


def _names(value: object, what: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (tuple, list)) or not value \
            or not all(isinstance(n, str) and n for n in value):
        raise TypeError(f"{what} must be a non-empty list of backend names, got {value!r}")
    return tuple(dict.fromkeys(value))


def core_variables() -> tuple[Setting, ...]:
    """The core's own environment variables (no discovery needed)."""
    return _CORE_VARIABLES


@contextmanager
def use(*names: str, only: bool | None = None) -> Iterator[None]:
    """Restrict and order the backends for this context: ``with use("cupy", "numpy"): ...``.

    Context-local (built on :func:`spacr_accel_core.config.override`), so threads and asyncio tasks
    do not see each other's choice. Like ``SPACR_ACCEL_BACKENDS`` it names backends best first; the
    floor stays at the end so a call still runs when every named backend declines, unless
    ``only=True``: then a decline is an error naming the backend and its reason (how a CI job proves
    the card ran). Use ``backend=`` on a call to run exactly one backend.

    :param names: backend names, best first. A name no installed plugin has makes the calls
        inside the context raise ``ValueError`` listing those that are installed.
    :param only: ``True``: no fall-through beyond ``names``; ``False``: the floor is appended;
        ``None`` (the default): as in force (``SPACR_ACCEL_ONLY``, or an enclosing override).
    :raises TypeError: no names, or a name that is not a non-empty string.
    """
    if not names or not all(isinstance(n, str) and n for n in names):
        raise TypeError("use() takes one or more backend names, e.g. use('numpy')")
    with _changes(_checked(list(names), only, None)):  # no discovery on entry: only calls need it
        yield


def cpu_requested() -> bool:
    """Whether the call being served forced this backend with ``gpu=False``: run on the CPU, or
    decline. (An accelerated backend is otherwise never called under ``gpu=False``.)"""
    return _cpu_forced.get()


def known(environment: Config, plugins: Mapping[str, object]) -> Config:
    """The environment's orders with names no plugin has dropped (and warned about, once per discovery).

    Under ``SPACR_ACCEL_ONLY`` an order whose every name is unknown stays an empty order (nothing may
    run: the error says why) instead of becoming "no order" (everything runs): a typo must not let
    the CPU answer where the job asked to prove the card ran.
    """
    def keep(names: tuple[str, ...] | None, variable: str) -> tuple[str, ...] | None:
        if names is None:
            return None
        unknown = [n for n in names if n not in plugins]
        if unknown:
            logger.warning("%s names backends that are not installed: %s; installed: %s", variable,
                           ", ".join(unknown), ", ".join(sorted(plugins)) or "none")
        kept = tuple(n for n in names if n in plugins)
        return kept if kept or environment.only else None

    for op, _ in environment.operations:
        if op not in OPERATIONS:
            logger.warning("%s%s names no operation (known: %s); ignored", ENV_OPERATION_PREFIX, op.upper(),
                           ", ".join(sorted(OPERATIONS)))
    operations = tuple((op, kept) for op, order in environment.operations
                       if op in OPERATIONS and (kept := keep(order, f"{ENV_OPERATION_PREFIX}{op.upper()}")) is not None)
    return replace(environment, backends=keep(environment.backends, ENV_BACKENDS), operations=operations)


# ---- read at every use (a test or a user may change them while the process runs) ---------------


def read(name: str) -> str:
    """The environment variable ``name`` as set now (``""`` when unset): the one place a setting
    that is read at every use, rather than at discovery, is read from the environment."""
    return os.environ.get(name, "")


def values(names: tuple[str, ...] | list[str]) -> dict[str, str | None]:
    """``{name: value or None}`` for the variables named, as set now (what the doctor prints)."""
    return {name: os.environ.get(name) for name in names}


def operation_variables() -> tuple[str, ...]:
    """The per-operation order variables set now (``SPACR_ACCEL_BACKENDS_<OPERATION>``), sorted."""
    return tuple(sorted(name for name in os.environ if name.startswith(ENV_OPERATION_PREFIX)))


def setting_value(setting: Setting) -> str | None:
    """A plugin's declared setting as set now (``None`` when unset): a plugin reads its own settings
    here, where the core reads its own and the doctor shows them."""
    return os.environ.get(setting.environment)


def device_text() -> str:
    """:data:`ENV_DEVICE` as set now (parsed by :func:`spacr_accel_core.accelerator.device_request`)."""
    return read(ENV_DEVICE)


def probe_timeout() -> float | None:
    """The bound from :data:`ENV_PROBE_TIMEOUT`, in seconds; ``None`` means wait forever.

    An unreadable, zero, negative or NaN value falls back to :data:`DEFAULT_PROBE_TIMEOUT`
    rather than disabling the bound: a typo must not turn a hang-proof resolver into one that
    hangs. The typo is warned about once per process and value, not at every probe.
    """
    raw = read(ENV_PROBE_TIMEOUT).strip()
    if not raw:
        return DEFAULT_PROBE_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        _warn_once(raw, "is not a number of seconds")
        return DEFAULT_PROBE_TIMEOUT
    if math.isnan(value) or value <= 0:
        _warn_once(raw, "must be positive")
        return DEFAULT_PROBE_TIMEOUT
    return None if math.isinf(value) else value


def _warn_once(raw: str, problem: str) -> None:
    """Warn that :data:`ENV_PROBE_TIMEOUT` cannot be used, the first time this value is met: the
    bound is read for every probe and registry question (seven or eight times for one doctor)."""
    if raw not in _warned_values:
        _warned_values.add(raw)
        logger.warning("%s=%r %s; using %g", ENV_PROBE_TIMEOUT, raw, problem, DEFAULT_PROBE_TIMEOUT)
