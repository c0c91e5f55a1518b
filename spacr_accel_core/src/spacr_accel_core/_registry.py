"""Discovery, ranking and dispatch: the one place that knows which plugin runs.

WHY A SNAPSHOT. Discovery (reading entry points, importing plugins, asking each whether it can run
here) happens once per process under a lock and produces an immutable :class:`_Snapshot`; a
dispatch only reads the current snapshot and a small per-(operation, gpu, restriction) order
cache, so the per-tile call the ops are made for costs microseconds, not an import attempt.
"""

from __future__ import annotations

import contextvars
import importlib.metadata
import logging
import math
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import pluggy

from . import _hookspecs
from ._errors import (
    BackendDeclined,
    BackendOutOfMemory,
    BackendUnavailable,
    NoBackendError,
    PluginFault,
)
from ._errors import describe as _describe
from ._markers import API_VERSION, ENTRY_POINT_GROUP, PROJECT_NAME
from ._records import BackendInfo, Dispatch, PluginStatus, Status

logger = logging.getLogger("spacr_accel_core")

OPERATIONS = ("maximum_filter", "matmul", "nearest_neighbours")
FLOOR = "numpy"
"""The backend that always runs; appended after any restriction so a call never lacks one."""

ENV_BACKENDS = "SPACR_ACCEL_BACKENDS"
ENV_DISABLE = "SPACR_ACCEL_DISABLE"

_debug_enabled = logger.isEnabledFor  # bound once: checked on every dispatch

_EXPECTED_DECLINES = (BackendUnavailable, BackendDeclined, BackendOutOfMemory)

_override: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar(
    "spacr_accel_use", default=None
)


class _LastCall(threading.local):
    """Per-thread record of the last dispatch, kept raw so recording it costs nanoseconds."""

    call: tuple[str, str, list[tuple[str, str]]] | None = None


@dataclass(frozen=True)
class _Impl:
    """One plugin's implementation of one operation, ready to call."""

    plugin: str
    function: Callable[..., Any]
    accelerated: bool


@dataclass
class _Plugin:
    name: str
    obj: object | None
    distribution: str
    version: str
    status: Status
    reason: str = ""
    info: BackendInfo | None = None
    operations: tuple[str, ...] = ()


@dataclass
class _Snapshot:
    plugins: dict[str, _Plugin]
    manager: pluggy.PluginManager
    impls: dict[str, dict[str, _Impl]]  # operation -> plugin name -> impl
    ranked: tuple[str, ...]  # usable plugins with backend info, best first
    restriction: tuple[str, ...] | None  # from SPACR_ACCEL_BACKENDS
    duplicates: tuple[_Plugin, ...]  # conflicting entry points that lost to an earlier one
    order_cache: dict[tuple[object, ...], tuple[_Impl, ...]] = field(default_factory=dict)


def _order_key(operation: str, gpu: bool, override: tuple[str, ...] | None) -> tuple[object, ...]:
    # Without a use() override (the per-tile case) the key is a pair: cheaper to build and hash.
    return (operation, gpu) if override is None else (operation, gpu, override)


def _split_names(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))


def _priority_key(plugin: _Plugin) -> tuple[float, str]:
    priority = plugin.info.priority if plugin.info is not None else 0.0
    return (-priority, plugin.name)


def _malformed_info(info: object) -> str | None:
    """What is wrong with a plugin's :class:`BackendInfo`, or ``None``.

    Checked at load because one bad field would otherwise break every call: a string priority
    makes the ranking sort raise, and a NaN one makes the order depend on the install order.
    """
    if not isinstance(info, BackendInfo):
        return f"returned {type(info).__name__}, not BackendInfo"
    fields: dict[str, object] = vars(info)  # as given: the annotations are a plugin's promise only
    if not isinstance(fields["name"], str) or not isinstance(fields["note"], str):
        return "has a name or note that is not a string"
    priority = fields["priority"]
    if isinstance(priority, bool) or not isinstance(priority, (int, float)) or not math.isfinite(priority):
        return f"has priority {priority!r}, not a finite number"
    if not isinstance(fields["accelerated"], bool) or not isinstance(fields["usable"], bool):
        return "has accelerated/usable flags that are not bools"
    return None


def _read_entry_points() -> tuple[list[importlib.metadata.EntryPoint], list[_Plugin]]:
    """The ``spacr_accel`` entry points, and a faulty row for each distribution whose metadata
    cannot be read.

    ``entry_points(group=...)`` parses every installed distribution's ``entry_points.txt``, and one
    malformed line anywhere (a broken third-party wheel) makes it raise; that must cost that
    distribution, not every call. So on failure the distributions are read one at a time.
    """
    try:
        return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)), []
    except Exception:  # a malformed entry_points.txt somewhere: find it below
        logger.debug("reading entry points failed; reading each distribution in turn", exc_info=True)
    found: list[importlib.metadata.EntryPoint] = []
    broken: list[_Plugin] = []
    for dist in importlib.metadata.distributions():
        try:
            found.extend(ep for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP)
        except Exception as exc:
            name = dist.metadata["Name"] or "(unnamed)"
            logger.warning("the entry points of %s cannot be read: %s", name, _describe(exc))
            broken.append(_Plugin(f"({name})", None, name, dist.version or "", "faulty",
                                  f"its entry_points.txt cannot be read: {_describe(exc)}"))
    return found, broken


class Registry:
    """The plugin registry. One per process (:data:`REGISTRY`); tests may build their own.

    :param discover: read the ``spacr_accel`` entry points. ``False`` gives an empty registry
        that only sees plugins passed to :meth:`register` (how the fault-injection tests
        isolate themselves from what is installed).
    """

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

    # ---- discovery -------------------------------------------------------------------------

    def _state(self) -> _Snapshot:
        snapshot = self._snapshot
        if snapshot is None:
            with self._lock:
                snapshot = self._snapshot
                if snapshot is None:
                    if self._building:
                        # Only the discovering thread gets here (it holds the lock): a plugin's
                        # backend_info called the ops. Say so, instead of recursing into discovery.
                        raise BackendUnavailable(
                            "the spacr_accel registry is still discovering plugins: a plugin's "
                            "spacr_accel_backend_info must not call the ops or accelerator.resolve()"
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
        environment. Run-time faults are forgotten too: a re-installed plugin gets a new chance.
        """
        with self._lock:
            self._snapshot = None
            self._faults.clear()
            self._warned.clear()

    def register(self, plugin: object, name: str) -> None:
        """Add an in-process plugin (a module or object holding hookimpls) under ``name``.

        For embedding applications and tests; installed plugins arrive through entry points.
        A name already taken by an entry point is replaced by this plugin.
        """
        with self._lock:
            self._in_process[name] = plugin
            self._snapshot = None

    def unregister(self, name: str) -> None:
        """Remove an in-process plugin added with :meth:`register`."""
        with self._lock:
            self._in_process.pop(name, None)
            self._snapshot = None

    def _entry_points(self, disabled: tuple[str, ...]) -> Iterator[_Plugin]:
        seen: dict[str, str] = {}
        found, broken = _read_entry_points()
        yield from broken
        for ep in found:
            dist = getattr(ep, "dist", None)
            dist_name = dist.metadata["Name"] if dist is not None else "(unknown)"
            version = dist.version if dist is not None else ""
            if ep.name in seen:
                # The same distribution found twice on sys.path (an editable install beside a
                # regular one) is harmless: keep the first. A different target is a conflict.
                if seen[ep.name] != ep.value:
                    logger.warning("spacr_accel entry point %r = %r (from %s) conflicts with %r; the first wins",
                                   ep.name, ep.value, dist_name, seen[ep.name])
                    yield _Plugin(
                        ep.name, None, dist_name, version, "duplicate",
                        f"entry point {ep.value!r} conflicts with {seen[ep.name]!r}; the first wins",
                    )
                continue
            seen[ep.name] = ep.value
            if ep.name in disabled:
                yield _Plugin(ep.name, None, dist_name, version, "blocked", f"named in {ENV_DISABLE}")
                continue
            try:
                obj = ep.load()
            except (Exception, SystemExit) as exc:  # a plugin must never break discovery
                logger.warning("spacr_accel plugin %r failed to import: %s", ep.name, _describe(exc))
                yield _Plugin(ep.name, None, dist_name, version, "faulty", f"import failed: {_describe(exc)}")
                continue
            yield _Plugin(ep.name, obj, dist_name, version, "ok")

    def _build(self) -> _Snapshot:
        disabled = _split_names(os.environ.get(ENV_DISABLE))
        restriction = _split_names(os.environ.get(ENV_BACKENDS)) or None
        manager = pluggy.PluginManager(PROJECT_NAME)
        manager.add_hookspecs(_hookspecs)

        candidates: dict[str, _Plugin] = {}
        duplicates: list[_Plugin] = []
        found = list(self._entry_points(disabled)) if self._discover_entry_points else []
        for plugin in found:
            if plugin.status == "duplicate":
                duplicates.append(plugin)
            else:
                candidates[plugin.name] = plugin
        for name, obj in self._in_process.items():
            if name in disabled:
                candidates[name] = _Plugin(name, None, "(in-process)", "", "blocked", f"named in {ENV_DISABLE}")
            else:
                candidates[name] = _Plugin(name, obj, "(in-process)", "", "ok")
        plugins: dict[str, _Plugin] = {}
        for plugin in candidates.values():
            plugins[plugin.name] = self._load(manager, plugin)

        impls = self._collect_impls(manager, plugins)
        ranked = tuple(
            p.name
            for p in sorted(plugins.values(), key=_priority_key)
            if p.status == "ok" and p.info is not None and p.info.usable and p.name != FLOOR
            and p.operations  # a prober that states a priority is not a backend
        )
        if FLOOR in plugins and plugins[FLOOR].status == "ok":
            ranked += (FLOOR,)  # the floor is tried last whatever its priority: it always answers
        if restriction is not None:
            unknown = [n for n in restriction if n not in plugins]
            if unknown:
                logger.warning("%s names unknown backends %s; installed: %s",
                               ENV_BACKENDS, unknown, sorted(plugins))
        logger.debug("spacr_accel plugins ranked: %s", ", ".join(ranked) or "(none)")
        return _Snapshot(plugins, manager, impls, ranked, restriction, tuple(duplicates))

    @staticmethod
    def _collect_impls(manager: pluggy.PluginManager, plugins: dict[str, _Plugin]) -> dict[str, dict[str, _Impl]]:
        """operation -> plugin name -> the function to call, for every loaded plugin."""
        impls: dict[str, dict[str, _Impl]] = {op: {} for op in OPERATIONS}
        for op in OPERATIONS:
            for hookimpl in getattr(manager.hook, f"spacr_accel_{op}").get_hookimpls():
                owner = plugins.get(hookimpl.plugin_name)
                if owner is None or owner.obj is None:
                    continue
                # A plugin that could not say (its backend_info raised) is assumed to need a
                # device, so gpu=False still refuses it.
                accelerated = owner.info.accelerated if owner.info is not None else True
                impls[op][owner.name] = _Impl(owner.name, hookimpl.function, accelerated)
        return impls

    def _load(self, manager: pluggy.PluginManager, plugin: _Plugin) -> _Plugin:
        if plugin.obj is None:
            return plugin
        declared = getattr(plugin.obj, "SPACR_ACCEL_API_VERSION", API_VERSION)
        if declared != API_VERSION:
            reason = f"built for plugin API {declared!r}; this spacr-accel-core speaks {API_VERSION}"
            logger.warning("spacr_accel plugin %r is incompatible: %s", plugin.name, reason)
            return replace(plugin, obj=None, status="incompatible", reason=reason)
        try:
            manager.register(plugin.obj, name=plugin.name)
        except Exception as exc:  # pluggy validation errors, a name already registered
            logger.warning("spacr_accel plugin %r was refused: %s", plugin.name, _describe(exc))
            return replace(plugin, obj=None, status="faulty", reason=f"refused: {_describe(exc)}")
        operations = tuple(
            op for op in OPERATIONS
            if any(h.plugin_name == plugin.name
                   for h in getattr(manager.hook, f"spacr_accel_{op}").get_hookimpls())
        )
        plugin = replace(plugin, operations=operations)
        info_impls = [h for h in manager.hook.spacr_accel_backend_info.get_hookimpls()
                      if h.plugin_name == plugin.name]
        if not info_impls:
            if operations:
                reason = "implements primitives but not spacr_accel_backend_info"
                manager.unregister(name=plugin.name)
                return replace(plugin, obj=None, status="faulty", reason=reason)
            return plugin  # a prober or capability plugin: no backend to rank
        try:
            info = info_impls[0].function()
        except RuntimeError as exc:
            return replace(plugin, status="unusable", reason=_describe(exc))
        except (Exception, SystemExit) as exc:  # a plugin's sys.exit() must not end the caller's process
            logger.warning("spacr_accel plugin %r failed to describe itself: %s", plugin.name, _describe(exc))
            manager.unregister(name=plugin.name)
            return replace(plugin, obj=None, status="faulty", reason=f"backend_info raised {_describe(exc)}")
        problem = _malformed_info(info)
        if problem is not None or not isinstance(info, BackendInfo):
            logger.warning("spacr_accel plugin %r described itself badly: %s", plugin.name, problem)
            manager.unregister(name=plugin.name)
            return replace(plugin, obj=None, status="faulty", reason=f"backend_info {problem}")

        if info.name != plugin.name:
            logger.debug("plugin %r calls itself %r; the entry point's name wins", plugin.name, info.name)
            info = replace(info, name=plugin.name)
        status: Status = "ok" if info.usable else "unusable"
        return replace(plugin, info=info, status=status, reason="" if info.usable else info.note)

    # ---- queries ---------------------------------------------------------------------------

    def plugins(self) -> tuple[PluginStatus, ...]:
        """Every plugin seen, best first, with status and reason (what the doctor prints)."""
        snapshot = self._state()
        with self._lock:
            faults_seen = dict(self._faults)
        rows = []
        for plugin in [*sorted(snapshot.plugins.values(), key=_priority_key), *snapshot.duplicates]:
            faults = tuple((op, what) for (name, op), what in sorted(faults_seen.items())
                           if name == plugin.name)
            info = plugin.info
            rows.append(PluginStatus(
                name=plugin.name,
                priority=info.priority if info is not None else 0.0,
                accelerated=info.accelerated if info is not None else False,
                distribution=plugin.distribution,
                version=plugin.version,
                status=plugin.status,
                reason=plugin.reason,
                operations=plugin.operations,
                faults=faults,
            ))
        return tuple(rows)

    def plugin_manager(self) -> pluggy.PluginManager:
        """The pluggy manager holding every loaded plugin (for the non-primitive hooks)."""
        return self._state().manager

    def ordered_plugin_objects(self) -> tuple[tuple[str, object], ...]:
        """Loaded plugins best first, including those that are not usable backends (probers)."""
        snapshot = self._state()
        return tuple((p.name, p.obj) for p in sorted(snapshot.plugins.values(), key=_priority_key)
                     if p.obj is not None)

    def hookimpls(self, hook: str) -> tuple[tuple[str, Callable[..., Any]], ...]:
        """``(plugin name, function)`` for every loaded plugin implementing ``hook``, best first.

        How the accelerator walks its probers without knowing any vendor: priority order, ties
        by name, and a blocked, faulty or incompatible plugin is simply absent.

        :param hook: a hook name, e.g. ``"spacr_accel_probe"``.
        """
        snapshot = self._state()
        found = {h.plugin_name: h.function for h in getattr(snapshot.manager.hook, hook).get_hookimpls()}
        return tuple((p.name, found[p.name]) for p in sorted(snapshot.plugins.values(), key=_priority_key)
                     if p.obj is not None and p.name in found)

    def restriction(self) -> tuple[str, ...] | None:
        """The order in force for this context: ``use(...)`` first, else the environment."""
        return _override.get() or self._state().restriction

    def backend_names(self, gpu: bool = True) -> tuple[str, ...]:
        """Usable backend names, best first, under the restriction in force; ends in ``numpy``."""
        snapshot = self._state()
        names = [n for n in self._restricted(snapshot, snapshot.ranked, self.restriction())
                 if gpu or not snapshot.plugins[n].info.accelerated]  # type: ignore[union-attr]  # ranked plugins have info
        if FLOOR not in names:
            names.append(FLOOR)
        return tuple(names)

    def last_dispatch(self) -> Dispatch | None:
        """Which backend served the last call on this thread, and why those above declined."""
        call = self._last.call
        if call is None:
            return None
        return Dispatch(call[0], call[1], tuple(call[2]))

    # ---- dispatch --------------------------------------------------------------------------

    @staticmethod
    def _restricted(snapshot: _Snapshot, ranked: Sequence[str],
                    restriction: tuple[str, ...] | None) -> list[str]:
        if restriction is None:
            return list(ranked)
        chosen = [n for n in restriction if n in ranked and n != FLOOR]
        if FLOOR in ranked:
            chosen.append(FLOOR)  # the floor is last: below it nothing would ever be reached
        return chosen

    def _order(self, snapshot: _Snapshot, operation: str, gpu: bool) -> tuple[_Impl, ...]:
        """The plugins to try, best first; cached per (operation, gpu[, use() override]).

        Built under the lock so that an order computed just before a fault cleared the cache
        cannot be stored after it and bring the quarantined plugin back.
        """
        restriction = _override.get()
        key = _order_key(operation, gpu, restriction)
        with self._lock:
            order = snapshot.order_cache.get(key)
            if order is None:
                available = snapshot.impls[operation]
                names = self._restricted(snapshot, snapshot.ranked, restriction or snapshot.restriction)
                order = tuple(
                    available[n] for n in names
                    if n in available and (gpu or not available[n].accelerated)
                    # The floor is never quarantined: a fault there is about one input (and
                    # is raised to that caller), and without it nothing would answer again.
                    and (n == FLOOR or (n, operation) not in self._faults)
                )
                snapshot.order_cache[key] = order
        return order

    def _skipped(self, snapshot: _Snapshot, operation: str, gpu: bool,
                 tried: Iterable[str]) -> list[tuple[str, str]]:
        """Why each plugin that was not tried was passed over (for the final error)."""
        tried = set(tried)
        reasons = []
        restriction = self.restriction()
        for plugin in sorted(snapshot.plugins.values(), key=_priority_key):
            if plugin.name in tried:
                continue
            if plugin.status != "ok":
                reasons.append((plugin.name, f"{plugin.status}: {plugin.reason}"))
            elif operation not in plugin.operations:
                reasons.append((plugin.name, f"does not implement {operation}"))
            elif (plugin.name, operation) in self._faults:
                reasons.append((plugin.name, f"faulty: {self._faults[(plugin.name, operation)]}"))
            elif not gpu and plugin.info is not None and plugin.info.accelerated:
                reasons.append((plugin.name, "accelerated, and gpu=False refuses it"))
            elif restriction is not None and plugin.name not in restriction and plugin.name != FLOOR:
                reasons.append((plugin.name, f"not in the backends in force {list(restriction)}"))
        return reasons

    def _fault(self, plugin: str, operation: str, what: str) -> None:
        with self._lock:
            self._faults[(plugin, operation)] = what
            snapshot = self._snapshot
            if snapshot is not None:
                snapshot.order_cache.clear()
            first = (plugin, operation) not in self._warned
            self._warned.add((plugin, operation))
        if first:
            logger.warning("spacr_accel backend %r is faulty in %s and is skipped from now on: %s",
                           plugin, operation, what)

    def dispatch(self, operation: str, args: tuple[Any, ...], *, gpu: bool, backend: str | None,
                 check: Callable[[Any, Any], str | None], expected: Any) -> Any:
        """Run ``operation`` on the best backend that serves it.

        The per-tile path: one snapshot read, one cached order lookup, the call and a shape check.

        :param operation: one of :data:`OPERATIONS`.
        :param args: the validated, normalised arguments of the primitive hook.
        :param gpu: ``False`` refuses accelerated backends.
        :param backend: force one backend; its failure is raised, not swallowed.
        :param check: ``check(result, expected)`` says what is wrong with a result, or ``None``.
        :param expected: what ``check`` compares against (the result's shape, say).
        """
        snapshot = self._snapshot or self._state()
        if backend is not None:
            return self._forced(snapshot, operation, args, gpu, backend, check, expected)
        override = _override.get()  # the key built inline: this is the per-tile path
        order = snapshot.order_cache.get((operation, gpu) if override is None else (operation, gpu, override))
        if order is None:
            order = self._order(snapshot, operation, gpu)
        declined: list[tuple[str, str]] = []
        for impl in order:
            try:
                result = impl.function(*args)
            except _EXPECTED_DECLINES as exc:
                logger.debug("%s: backend %r declined: %s", operation, impl.plugin, _describe(exc))
                declined.append((impl.plugin, _describe(exc)))
                continue
            except RuntimeError as exc:
                logger.info("%s: backend %r raised %s; trying the next", operation, impl.plugin,
                            _describe(exc))
                declined.append((impl.plugin, _describe(exc)))
                continue
            except MemoryError as exc:
                # Host or device memory ran out. Not a broken plugin (the same call may fit
                # later), so it is not quarantined, but the backend should have translated it.
                logger.warning("%s: backend %r ran out of memory (untranslated MemoryError): %s",
                               operation, impl.plugin, _describe(exc))
                declined.append((impl.plugin, f"out of memory: {_describe(exc)}"))
                continue
            except Exception as exc:
                what = f"raised {_describe(exc)}"
                self._fault(impl.plugin, operation, what)
                declined.append((impl.plugin, f"faulty: {what}"))
                continue
            problem = check(result, expected)
            if problem is not None:
                self._fault(impl.plugin, operation, problem)
                declined.append((impl.plugin, f"faulty: {problem}"))
                continue
            self._last.call = (operation, impl.plugin, declined)
            if _debug_enabled(logging.DEBUG):
                logger.debug("%s served by %r%s", operation, impl.plugin,
                             f" after {[name for name, _ in declined]} declined" if declined else "")
            return result
        raise NoBackendError(
            operation,
            declined + self._skipped(snapshot, operation, gpu, (name for name, _ in declined)),
        )

    def _forced(self, snapshot: _Snapshot, operation: str, args: tuple[Any, ...], gpu: bool,
                backend: str, check: Callable[[Any, Any], str | None], expected: Any) -> Any:
        impl = snapshot.impls[operation].get(backend)
        if impl is None:
            plugin = snapshot.plugins.get(backend)
            if plugin is None:
                raise BackendUnavailable(
                    f"no spacr_accel backend named {backend!r} is installed "
                    f"(installed: {', '.join(sorted(snapshot.plugins)) or 'none'}); "
                    f"`pip install spacr-accel[{backend}]` may provide it"
                )
            why = plugin.reason if plugin.status != "ok" else f"it does not implement {operation}"
            raise BackendUnavailable(f"backend {backend!r} cannot run {operation}: {plugin.status}: {why}")
        if not gpu and impl.accelerated:
            raise ValueError(
                f"backend={backend!r} is accelerated but gpu=False refuses accelerated backends; "
                "drop one of the two"
            )
        try:
            result = impl.function(*args)
        except (RuntimeError, MemoryError):
            raise  # "not me, not now" (or memory): the caller forced it, so it gets it as is
        except Exception as exc:  # any other exception breaks the contract, as in automatic dispatch
            what = f"raised {_describe(exc)}"
            self._fault(backend, operation, what)
            raise PluginFault(f"backend {backend!r} broke the {operation} contract: {what}") from exc
        problem = check(result, expected)
        if problem is not None:
            self._fault(backend, operation, problem)
            raise PluginFault(f"backend {backend!r} broke the {operation} contract: {problem}")
        self._last.call = (operation, backend, [])
        return result

    def record_core(self, operation: str) -> None:
        """Note that the core answered ``operation`` itself (an empty input needs no backend)."""
        self._last.call = (operation, "core", [])


_REGISTRIES: weakref.WeakSet[Registry] = weakref.WeakSet()


def _reset_locks_after_fork() -> None:
    for registry in list(_REGISTRIES):
        registry._after_fork_in_child()  # the module owns its registries


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_reset_locks_after_fork)

REGISTRY = Registry()
"""The process-wide registry every module-level function uses."""


@contextmanager
def use(*names: str) -> Iterator[None]:
    """Restrict and order the backends for this context: ``with use("cupy", "numpy"): ...``.

    Context-local (a :mod:`contextvars` variable), so threads and asyncio tasks do not see each
    other's choice. Like ``SPACR_ACCEL_BACKENDS`` it names backends best first; the NumPy floor
    stays at the end so a call still runs when every named backend declines. Use ``backend=``
    on a call to run exactly one backend.

    :param names: backend names, best first.
    """
    if not names or not all(isinstance(n, str) and n for n in names):
        raise TypeError("use() takes one or more backend names, e.g. use('numpy')")
    token = _override.set(tuple(dict.fromkeys(names)))
    try:
        yield
    finally:
        _override.reset(token)
