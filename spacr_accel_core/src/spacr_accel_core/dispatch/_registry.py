"""Ranking and dispatch: the one place that knows which plugin runs.

WHY A SNAPSHOT. Discovery (reading entry points, importing plugins, reading what each declares)
happens once per process under a lock and produces a :class:`_Snapshot`; a dispatch only reads
the current snapshot and a small per-(operation, gpu, restriction) order cache, so the per-tile
call the ops are made for costs microseconds, not an import attempt.
WHY LAZY. Whether a plugin can run here now (``spacr_accel_backend_info``) is asked the first time
it is next in line, not at discovery: a process whose first op never reaches torch never imports
torch to learn there is no GPU. Each question is bounded like a probe: a plugin that never
answers is unusable with a note naming it instead of hanging every thread.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pluggy

from ..contract import _hookspecs
from ..contract._declaration import Setting
from ..contract._errors import (
    BackendDeclined,
    BackendOutOfMemory,
    BackendUnavailable,
    BackendWarming,
    NoBackendError,
    PluginFault,
)
from ..contract._errors import describe as _describe
from ..contract._markers import PROJECT_NAME
from ..contract._records import Dispatch, PluginStatus
from ..operations._operations import OPERATIONS, declared, hook_specifications, on_declared
from . import _settings as config
from ._bounded import Outcome, start
from ._discovery import IN_PROCESS, Plugin, by_name, entry_point_plugins, judge, load
from ._ranking import fix_hint, in_force, passed_over, priority_key, rank_key, status_rows
from ._settings import ENV_DISABLE, Config, cpu_requested, probe_timeout, use
from ._settings import known as _known
from ._waiting import waited_for, when_ready

logger = logging.getLogger(__name__)

_debug_enabled = logger.isEnabledFor  # bound once: checked on every dispatch
_EXPECTED_DECLINES = (BackendUnavailable, BackendDeclined, BackendOutOfMemory)

_override = config._context  # the configuration in force for this context (None: the environment's)
_cpu_forced = config._cpu_forced

_asking: contextvars.ContextVar[str | None] = contextvars.ContextVar("spacr_accel_asking", default=None)
"""Set while a plugin's spacr_accel_backend_info runs, so a call back into the registry is refused."""


def _ask_one(name: str, describer: Callable[[], Any]) -> Any:
    _asking.set(name)  # in the question's own thread and context: the caller's is untouched
    return describer()


class _LastCall(threading.local):
    """Per-thread record of the last dispatch, kept raw so recording it costs nanoseconds."""

    call: tuple[str, str, list[tuple[str, str]], tuple[tuple[str, str], ...], list[str]] | None = None
    """(operation, served by, declined, passed over uncalled, declined as still building)."""


@dataclass(frozen=True)
class _Impl:
    """One plugin's implementation of one operation, ready to call with the spec's arguments.

    :param ask: whether the plugin must still be asked if it can run here before it is called.
    """

    plugin: str
    function: Callable[..., Any]
    ask: bool


_Order = tuple[tuple[_Impl, ...], tuple[tuple[str, str], ...], tuple[tuple[str, str], ...], bool]
"""The implementations to try, best first; why each other backend in line is passed over; why
the backends out of line (not in the order in force) are; and whether ``only`` is in force."""


@dataclass
class _Snapshot:
    plugins: dict[str, Plugin]  # entries are replaced (under the registry lock) as plugins answer
    manager: pluggy.PluginManager
    calls: dict[str, dict[str, Callable[..., Any]]]  # operation -> plugin name -> spec-order call
    environment: Config  # the environment's settings, read at discovery, unknown names dropped
    duplicates: tuple[Plugin, ...]  # conflicting entry points that lost
    floor: str | None
    ranked: tuple[str, ...] | None = None  # backends with a known priority, best first, floor last
    order_cache: dict[tuple[object, ...], _Order] = field(default_factory=dict)
    questions: dict[str, tuple[Outcome, threading.Event]] = field(default_factory=dict)
    """backend_info questions in flight or answered, one per plugin."""


class Registry:
    """The plugin registry. One per process (:data:`REGISTRY`); tests may build their own.

    :param discover: read the ``spacr_accel`` entry points. ``False`` gives an empty registry
        that only sees plugins passed to :meth:`register` (how the fault-injection tests
        isolate themselves from what is installed)."""

    def __init__(self, *, discover: bool = True) -> None:
        self._discover_entry_points = discover
        self._lock = threading.RLock()
        self._snapshot: _Snapshot | None = None
        self._building = False  # set while this registry's lock-holding thread discovers
        self._in_process: dict[str, object] = {}
        self._faults: dict[tuple[str, str], str] = {}  # (plugin, operation) -> what it did
        self._warned: set[tuple[str, str]] = set()
        self._last = _LastCall()
        _REGISTRIES.add(self)

    def _after_fork_in_child(self) -> None:
        # spaCR forks worker processes (multiprocessing's default on Linux). A lock held by
        # another thread at the fork is held for ever in the child, so the child gets new ones.
        self._lock = threading.RLock()
        self._building = False  # a discovery the parent had in progress has no thread here
        snapshot = self._snapshot
        if snapshot is not None:  # a question in flight at the fork has no thread here
            snapshot.questions = {n: q for n, q in snapshot.questions.items() if q[1].is_set()}

    # ---- discovery -------------------------------------------------------------------------

    def _state(self) -> _Snapshot:
        snapshot = self._snapshot
        if snapshot is None:
            with self._lock:
                snapshot = self._snapshot
                if snapshot is None:
                    if self._building:
                        # Only the discovering thread gets here (it holds the lock): a plugin's
                        # import called the ops. Say so, instead of recursing into discovery.
                        raise BackendUnavailable(
                            "the spacr_accel registry is still discovering plugins: a plugin must "
                            "not call the ops or accelerator.resolve() while it is imported"
                        )
                    self._building = True
                    try:
                        snapshot = self._build()
                    finally:
                        self._building = False
                    self._snapshot = snapshot
        return snapshot

    def refresh(self) -> None:
        """Forget everything discovered; the next call discovers again.

        For plugins installed after the first call, and for a changed ``SPACR_ACCEL_*``
        environment. Run-time faults and time-outs are forgotten too: a re-installed plugin, or
        one that was only slow, gets a new chance."""
        with self._lock:
            self._snapshot = None
            self._faults.clear()
            self._warned.clear()

    def forget_hooks(self) -> None:
        """Read the plugins again at the next call: an operation was declared, and a plugin may
        implement it. The snapshot is built anew (each plugin read and, when next in line, asked
        again, bounded as ever); unlike :meth:`refresh`, the run-time faults are kept. The core's own
        operations are declared before anything is discovered, so this costs only a late
        declaration (a third party's module imported after the first call)."""
        with self._lock:
            self._snapshot = None

    def register(self, plugin: object, name: str) -> None:
        """Add an in-process plugin (a module or object holding hookimpls) under ``name``.

        For embedding applications and tests; installed plugins arrive through entry points.
        A name already taken by an entry point is replaced by this plugin."""
        with self._lock:
            self._in_process[name] = plugin
            self._snapshot = None

    def unregister(self, name: str) -> None:
        """Remove an in-process plugin added with :meth:`register`."""
        with self._lock:
            self._in_process.pop(name, None)
            self._snapshot = None

    def _build(self) -> _Snapshot:
        environment = config.environment()
        manager = pluggy.PluginManager(PROJECT_NAME)
        manager.add_hookspecs(_hookspecs)
        rows = declared()
        if rows:
            manager.add_hookspecs(hook_specifications(rows))

        candidates: dict[str, Plugin] = {}
        duplicates: list[Plugin] = []
        for plugin in entry_point_plugins(environment.disable) if self._discover_entry_points else ():
            if plugin.status == "duplicate":
                duplicates.append(plugin)
            else:
                candidates[plugin.name] = plugin
        for name, obj in self._in_process.items():
            if name in environment.disable:
                candidates[name] = Plugin(name, None, IN_PROCESS, "", "blocked", f"named in {ENV_DISABLE}")
            else:
                candidates[name] = Plugin(name, obj, IN_PROCESS, "", "ok")
        plugins = {name: load(manager, plugin) for name, plugin in candidates.items()}

        calls: dict[str, dict[str, Callable[..., Any]]] = {row.name: {} for row in rows}
        for operation in rows:
            op = operation.name
            for hookimpl in getattr(manager.hook, operation.hook).get_hookimpls():
                declaration = plugins[hookimpl.plugin_name].declaration
                if declaration is not None:
                    calls[op][hookimpl.plugin_name] = operation.adapted(
                        hookimpl.function, hookimpl.argnames, declaration)
        environment = _known(environment, plugins)
        floor = next((p.name for p in sorted(plugins.values(), key=priority_key)
                      if p.floor and p.status == "ok"), None)
        return _Snapshot(plugins, manager, calls, environment, tuple(duplicates), floor)

    # ---- asking plugins what they are, and whether they can run now ---------------------------

    def _ask_all(self, snapshot: _Snapshot, names: list[str]) -> None:
        """Ask every named plugin that has not answered yet, side by side, under one bound.

        One question per plugin is ever in flight: a thread that needs a plugin another thread is
        already asking waits for that answer (within its own bound) instead of asking again."""
        waiting = [n for n in names if not snapshot.plugins[n].asked]
        if not waiting:
            return
        if _asking.get() is not None:
            raise BackendUnavailable(
                f"plugin {_asking.get()!r} called the ops from its spacr_accel_backend_info, which "
                "runs while the registry asks whether it can run here: it must not call the ops or "
                "accelerator.resolve()"
            )
        timeout = probe_timeout()
        with self._lock:
            questions = {}
            for name in waiting:
                question = snapshot.questions.get(name)
                describer = snapshot.plugins[name].describer
                if question is None and describer is not None:
                    logger.debug("asking spacr_accel plugin %r whether it can run here", name)
                    question = start(functools.partial(_ask_one, name, describer), f"backend_info {name}")
                    snapshot.questions[name] = question
                if question is not None:
                    questions[name] = question
        deadline = None if timeout is None else time.monotonic() + timeout
        for name, (outcome, done) in questions.items():
            finished = done.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
            with self._lock:
                plugin = snapshot.plugins[name]
                if plugin.asked:
                    continue  # judged by another thread that waited for the same question
                snapshot.plugins[name] = judge(plugin, outcome.value, outcome.error, not finished, timeout,
                                               snapshot.manager)
                snapshot.order_cache.clear()

    def _ask(self, snapshot: _Snapshot, name: str) -> Plugin:
        """One plugin, asked (once per process, bounded) if it has not answered yet."""
        if not snapshot.plugins[name].asked:
            self._ask_all(snapshot, [name])
        return snapshot.plugins[name]

    def _ranked(self, snapshot: _Snapshot) -> tuple[str, ...]:
        """Backends best first, floor last (what each declared; nothing is asked)."""
        ranked = snapshot.ranked
        if ranked is None:
            ranked = tuple(p.name for p in sorted(snapshot.plugins.values(), key=rank_key)
                           if p.operations and p.declaration is not None and p.status in ("ok", "unusable"))
            snapshot.ranked = ranked
            logger.debug("spacr_accel backends ranked: %s", ", ".join(ranked) or "(none)")
        return ranked

    # ---- queries ---------------------------------------------------------------------------

    def plugins(self) -> tuple[PluginStatus, ...]:
        """Every plugin seen, best first, with status and reason (what the doctor prints).

        Asks every plugin that has not yet said whether it can run here (bounded, together)."""
        snapshot = self._state()
        self._ranked(snapshot)
        self._ask_all(snapshot, list(snapshot.plugins))
        with self._lock:
            faults_seen = dict(self._faults)
        return status_rows([*sorted(snapshot.plugins.values(), key=priority_key), *snapshot.duplicates], faults_seen)

    def hookimpls(self, hook: str) -> tuple[tuple[str, Callable[..., Any]], ...]:
        """``(plugin name, call)`` for every loaded plugin implementing ``hook``, best first.

        How the accelerator walks its probers without knowing any vendor: priority order, ties
        by name, and a blocked, faulty or incompatible plugin is simply absent. Each ``call``
        takes the hook's arguments by keyword and passes the implementation only those it
        declares, as pluggy does.

        :param hook: a hook name, e.g. ``"spacr_accel_probe"``.
        """
        snapshot = self._state()
        self._ranked(snapshot)
        found = {h.plugin_name: by_name(h.function, h.argnames)
                 for h in getattr(snapshot.manager.hook, hook).get_hookimpls()}
        return tuple((p.name, found[p.name]) for p in sorted(snapshot.plugins.values(), key=priority_key)
                     if p.loaded and p.name in found)

    def blocked(self) -> tuple[str, ...]:
        """Plugins named in ``SPACR_ACCEL_DISABLE`` that are installed (so never imported)."""
        return tuple(p.name for p in self._state().plugins.values() if p.status == "blocked")

    def installed(self) -> tuple[str, ...]:
        """Every plugin name seen, whatever its status, sorted."""
        return tuple(sorted(self._state().plugins))

    def environment(self) -> Config:
        """The settings the environment gave at discovery (names no plugin has dropped)."""
        return self._state().environment

    def floor(self) -> str | None:
        """The loaded backend declaring ``try_last`` (the one that always runs), or ``None``."""
        return self._state().floor

    def declared_settings(self) -> tuple[tuple[str, Setting], ...]:
        """``(plugin, setting)`` for every setting a loaded plugin declares, best plugin first."""
        plugins = sorted(self._state().plugins.values(), key=priority_key)
        return tuple((p.name, s) for p in plugins if p.declaration is not None for s in p.declaration.settings)

    def restriction(self, operation: str | None = None) -> tuple[str, ...] | None:
        """The order in force for this context (and ``operation``): an override first, else the environment."""
        snapshot = self._state()
        settings = self._settings(snapshot, self._checked_override(snapshot))
        return settings.order_for(operation) if operation is not None else settings.backends

    def backend_names(self, gpu: bool = True, operation: str | None = None) -> tuple[str, ...]:
        """Usable backend names, best first, under the order in force; the floor last.

        Asks each candidate that has not yet said whether it can run here (``gpu=False`` never
        asks an accelerated one)."""
        snapshot = self._state()
        settings = self._settings(snapshot, self._checked_override(snapshot))
        restriction = settings.order_for(operation) if operation is not None else settings.backends
        names = []
        for name in in_force(self._ranked(snapshot), restriction, snapshot.plugins, settings.only):
            plugin = snapshot.plugins[name]
            if plugin.status != "ok" or (not gpu and plugin.accelerated):
                continue
            if operation is not None and operation not in plugin.operations:
                continue
            if self._ask(snapshot, name).status == "ok":
                names.append(name)
        return tuple(names)

    @staticmethod
    def _settings(snapshot: _Snapshot, override: config.Changes | None) -> Config:
        return snapshot.environment if override is None else override.over(snapshot.environment)

    def _checked_override(self, snapshot: _Snapshot) -> config.Changes | None:
        """The context's changes in force, refused if they name a backend that is not installed."""
        override = _override.get()
        if override is not None:
            unknown = list(dict.fromkeys(n for n in override.names() if n not in snapshot.plugins))
            if unknown:
                raise ValueError(
                    f"use()/config.override() names backends that are not installed: "
                    f"{', '.join(map(repr, unknown))}; installed: {', '.join(sorted(snapshot.plugins)) or 'none'}")
        return override

    def last_dispatch(self) -> Dispatch | None:
        """Which backend served the last call on this thread, and why each one above it did not."""
        call = self._last.call
        if call is None:
            return None
        operation, served, declined, skipped, waiting = call
        snapshot = self._snapshot
        if snapshot is None or served not in snapshot.plugins:
            return Dispatch(operation, served, tuple(declined), tuple(waiting))
        bar = rank_key(snapshot.plugins[served])
        above = tuple(row for row in skipped
                      if row[0] in snapshot.plugins and operation in snapshot.plugins[row[0]].operations
                      and rank_key(snapshot.plugins[row[0]]) < bar)
        return Dispatch(operation, served, (*declined, *above), tuple(waiting))

    def last_backend(self) -> str | None:
        """:meth:`last_dispatch`'s backend alone, without building its record (ten microseconds)."""
        call = self._last.call
        return None if call is None else call[1]

    def last_waiting(self) -> tuple[str, ...]:
        """:attr:`Dispatch.waiting` of the last call alone, as cheaply as :meth:`last_backend`."""
        call = self._last.call
        return () if call is None or not call[4] else tuple(call[4])

    # ---- dispatch --------------------------------------------------------------------------

    def _order(self, snapshot: _Snapshot, operation: str, gpu: bool) -> _Order:
        """The plugins to try, best first, and why the others are passed over; cached per
        (operation, gpu[, override in force]).

        Built under the lock so that an order computed just before a fault cleared the cache
        cannot be stored after it and bring the quarantined plugin back."""
        override = self._checked_override(snapshot)
        key = (operation, gpu) if override is None else (operation, gpu, override)
        ranked = self._ranked(snapshot)
        settings = self._settings(snapshot, override)
        with self._lock:
            order = snapshot.order_cache.get(key)
            if order is not None:
                return order
            restriction = settings.order_for(operation)
            names = in_force(ranked, restriction, snapshot.plugins, settings.only)
            skipped: list[tuple[str, str]] = []
            out_of_line: list[tuple[str, str]] = []
            for plugin in sorted(snapshot.plugins.values(), key=priority_key):
                if plugin.status == "ok" and not plugin.operations:
                    continue  # a prober, not a backend
                why = passed_over(plugin, operation, gpu, restriction, self._faults, settings.only)
                if why is not None:
                    in_line = restriction is None or plugin.name in restriction or (plugin.floor and not settings.only)
                    (skipped if in_line else out_of_line).append((plugin.name, why))
            passed = {name for name, _ in skipped + out_of_line}
            impls = tuple(_Impl(n, snapshot.calls[operation][n], not snapshot.plugins[n].asked)
                          for n in names if n not in passed)
            order = (impls, tuple(skipped), tuple(out_of_line), settings.only)
            snapshot.order_cache[key] = order
        return order

    def _fault(self, snapshot: _Snapshot, plugin: str, operation: str, what: str) -> None:
        floor = snapshot.plugins[plugin].floor if plugin in snapshot.plugins else False
        with self._lock:
            first = (plugin, operation) not in self._warned
            self._warned.add((plugin, operation))
            if not floor:
                self._faults[(plugin, operation)] = what
                current = self._snapshot
                if current is not None:
                    current.order_cache.clear()
        if not first:
            return
        if floor:
            # The floor is never quarantined: a fault there is about one input, and without it
            # nothing would answer again.
            logger.warning("spacr_accel backend %r failed in %s on this input: %s", plugin, operation, what)
        else:
            logger.warning("spacr_accel backend %r is faulty in %s and is skipped from now on: %s",
                           plugin, operation, what)

    def _warn_once(self, plugin: str, operation: str, message: str, *args: object) -> None:
        key = (plugin, f"{operation}:memory")
        with self._lock:
            first = key not in self._warned
            self._warned.add(key)
        logger.log(logging.WARNING if first else logging.DEBUG, message, *args)

    def dispatch(self, operation: str, named: Mapping[str, Any], *, gpu: bool, backend: str | None,
                 expected: Any) -> Any:
        """Run ``operation`` on the best backend that serves it.

        The per-tile path: one snapshot read, one cached order lookup, the call and the
        operation's result check.

        :param operation: a name in the operation table.
        :param named: the validated, normalised arguments of the primitive hook, by the spec's names
            (put in the spec's order here, so a caller cannot pass them in another).
        :param gpu: ``False`` refuses accelerated backends.
        :param backend: force one backend; its failure is raised, not swallowed.
        :param expected: what the operation's result check compares against (the shape, say).
        """
        snapshot = self._snapshot or self._state()
        table = OPERATIONS[operation]
        args, check = table.positional(named), table.check
        if backend is not None:
            return self._forced(snapshot, operation, args, gpu, backend, check, expected)
        override = _override.get()  # the key built inline: this is the per-tile path
        order = snapshot.order_cache.get((operation, gpu) if override is None else (operation, gpu, override))
        if order is None:
            order = self._order(snapshot, operation, gpu)
        impls, skipped, out_of_line, only = order
        declined: list[tuple[str, str]] = []
        waiting: list[str] = []
        first_warming: tuple[_Impl, BackendWarming] | None = None
        for impl in impls:
            if impl.ask:
                plugin = self._ask(snapshot, impl.plugin)
                if plugin.status != "ok":
                    declined.append((impl.plugin, f"{plugin.status}: {plugin.reason}"))
                    continue
            try:
                result = impl.function(*args)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # judged off the per-tile path: only a failed call pays
                declined.append((impl.plugin, self._why_not(snapshot, impl.plugin, operation, exc)))
                if isinstance(exc, BackendWarming):
                    waiting.append(impl.plugin)
                    if first_warming is None:
                        first_warming = (impl, exc)
                continue
            problem = check(result, expected)
            if problem is not None:
                self._fault(snapshot, impl.plugin, operation, problem)
                declined.append((impl.plugin, f"faulty: {problem}"))
                continue
            self._last.call = (operation, impl.plugin, declined, skipped, waiting)
            if declined and _debug_enabled(logging.DEBUG):  # each fall-through is logged; a first answer is not
                logger.debug("%s served by %r after %s declined", operation, impl.plugin,
                             [name for name, _ in declined])
            return result
        if only and first_warming is not None and self._settings(snapshot, self._checked_override(snapshot)).wait:
            return self._waited_in_line(snapshot, operation, args, check, expected, *first_warming)
        raise NoBackendError(operation, [*declined, *skipped, *out_of_line],
                             hint=fix_hint(snapshot.plugins, snapshot.floor, only))

    def _waited_in_line(self, snapshot: _Snapshot, operation: str, args: tuple[Any, ...],
                        check: Callable[[Any, Any], str | None], expected: Any, impl: _Impl,
                        first: BackendWarming) -> Any:
        """Under ``only``, every backend in line declined and one of them is still building what the
        call needs: nothing after it may answer, so that one is waited for (bounded by the probe
        timeout), as a forced backend is. After the bound :func:`when_ready` raises
        :class:`BackendUnavailable` naming the backend, never :class:`BackendWarming`."""
        result = when_ready(snapshot.manager, impl.plugin, functools.partial(impl.function, *args), first)
        problem = check(result, expected)
        if problem is not None:
            self._fault(snapshot, impl.plugin, operation, problem)
            raise PluginFault(f"backend {impl.plugin!r} broke the {operation} contract: {problem}")
        self._last.call = (operation, impl.plugin, [], (), [impl.plugin])
        return result

    def _why_not(self, snapshot: _Snapshot, plugin: str, operation: str, exc: BaseException) -> str:
        """The reason a backend's raise gives for falling through, logged by what it means.

        A ``RuntimeError`` is "not me, not now" (DEBUG for the expected kinds, INFO otherwise); a
        ``MemoryError`` is memory that may fit later (warned once: the backend should translate
        it); anything else, ``SystemExit`` included, is a fault that quarantines the backend."""
        what = _describe(exc)
        if isinstance(exc, _EXPECTED_DECLINES):
            logger.debug("%s: backend %r declined: %s", operation, plugin, what)
            return what
        if isinstance(exc, RuntimeError):
            logger.info("%s: backend %r raised %s; trying the next", operation, plugin, what)
            return what
        if isinstance(exc, MemoryError):
            self._warn_once(plugin, operation, "%s: backend %r ran out of memory (untranslated MemoryError): %s",
                            operation, plugin, what)
            return f"out of memory: {what}"
        self._fault(snapshot, plugin, operation, f"raised {what}")
        return f"faulty: raised {what}"

    def _forced(self, snapshot: _Snapshot, operation: str, args: tuple[Any, ...], gpu: bool,
                backend: str, check: Callable[[Any, Any], str | None], expected: Any) -> Any:
        plugin = snapshot.plugins.get(backend)
        if plugin is None:
            raise BackendUnavailable(
                f"no spacr_accel backend named {backend!r} is installed "
                f"(installed: {', '.join(sorted(snapshot.plugins)) or 'none'})"
            )
        function = snapshot.calls[operation].get(backend)
        if plugin.status not in ("ok", "unusable"):
            raise BackendUnavailable(f"backend {backend!r} cannot run {operation}: it is "
                                     f"{plugin.status}: {plugin.reason}")
        if function is None:
            raise BackendUnavailable(f"backend {backend!r} does not implement {operation}")
        token = _cpu_forced.set(not gpu)  # gpu=False with a forced backend: run it on the CPU
        try:
            result = self._forced_call(snapshot, operation, backend, function, args)
        finally:
            _cpu_forced.reset(token)
        problem = check(result, expected)
        if problem is not None:
            self._fault(snapshot, backend, operation, problem)
            raise PluginFault(f"backend {backend!r} broke the {operation} contract: {problem}")
        self._last.call = (operation, backend, [], (), [])
        return result

    def _forced_call(self, snapshot: _Snapshot, operation: str, backend: str, function: Callable[..., Any],
                     args: tuple[Any, ...]) -> Any:
        """One forced call; a backend still building what it builds lazily is waited for, once."""
        try:
            try:
                return function(*args)
            except BackendWarming as exc:  # building the piece this call needs: waited for, bounded
                return when_ready(snapshot.manager, backend, functools.partial(function, *args), exc)
            except BackendDeclined:
                if not waited_for(snapshot.manager, backend):
                    raise
                return function(*args)
        except (RuntimeError, MemoryError, KeyboardInterrupt):
            raise  # "not me, not now" (or memory, or the user): the caller forced it, so it gets it as is
        except BaseException as exc:  # any other exception breaks the contract, as in automatic dispatch
            what = f"raised {_describe(exc)}"
            self._fault(snapshot, backend, operation, what)
            raise PluginFault(f"backend {backend!r} broke the {operation} contract: {what}") from exc

    def record_served(self, operation: str, backend: str = "core", declined: tuple[tuple[str, str], ...] = (),
                      waiting: tuple[str, ...] = ()) -> None:
        """Note that ``operation`` was computed by ``backend`` after ``declined`` (composed of
        dispatches; ``waiting``: those of them still building), or by the core itself (an empty
        input, a window of one pixel)."""
        self._last.call = (operation, backend, list(declined), (), list(waiting))


_REGISTRIES: weakref.WeakSet[Registry] = weakref.WeakSet()

def _reset_locks_after_fork() -> None:
    for registry in list(_REGISTRIES):
        registry._after_fork_in_child()  # the module owns its registries


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_reset_locks_after_fork)

REGISTRY = Registry()
"""The process-wide registry every module-level function uses."""
on_declared(REGISTRY.forget_hooks)
__all__ = ["REGISTRY", "Registry", "cpu_requested", "use"]
