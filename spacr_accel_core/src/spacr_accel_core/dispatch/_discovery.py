"""Finding the plugins and learning what each one is: entry points, de-duplication, loading.

WHAT A PLUGIN IS, APART FROM WHETHER IT CAN RUN NOW. Name, priority and ``accelerated`` decide
where a plugin stands in line; whether it is usable here needs its library (``import torch`` costs
a second and 200 MiB on a CPU-only laptop only to learn there is no GPU). So a plugin declares what
it is in one record, ``SPACR_ACCEL_PLUGIN = Declaration(...)``, read and validated here without a
call, and its ``spacr_accel_backend_info`` is asked later, lazily, by the registry.

A NAME BELONGS TO THE DISTRIBUTION NAMED AFTER IT. An entry point is a name anybody can declare:
a distribution earlier on ``sys.path`` that declares ``numpy`` must not replace the floor. So the
entry point ``<name>`` of the distribution ``spacr-accel-<name>`` (this project's backends, and a
third party's that follows the same naming) is taken whatever the metadata order, and any other
distribution declaring the name is reported as a conflict; for a name no such distribution
declares, the first on ``sys.path`` wins, the rule Python itself applies to two modules of one
name, and the other is reported. The core holds no backend's name or module path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

import pluggy

from ..contract._declaration import ATTRIBUTE, Declaration, _short, validated
from ..contract._errors import describe
from ..contract._markers import API_VERSION, ENTRY_POINT_GROUP
from ..contract._records import BackendInfo, Status
from ..operations._operations import OPERATIONS
from ._settings import ENV_DISABLE, ENV_PROBE_TIMEOUT

if TYPE_CHECKING:  # importlib.metadata costs ~10 ms: imported by discovery, not by `import ops`
    import importlib.metadata

logger = logging.getLogger(__name__)

OWNER_PREFIX: Final = "spacr-accel-"
"""The distribution ``spacr-accel-<name>`` owns the entry point ``<name>``."""

IN_PROCESS: Final = "(in-process)"

UNHONOURED_OPTIONS: Final = ("tryfirst", "trylast", "wrapper", "hookwrapper")
"""pluggy hookimpl options this registry would not honour: it orders plugins by their declared
priority (and ``try_last``) and calls each implementation itself, so these are refused at load."""


@dataclass(frozen=True)
class Plugin:
    """One plugin as the registry knows it. Replaced, never mutated, as more is learnt.

    :param declaration: what it is, validated (``None`` until loaded, or when it is not ``ok``).
    :param operations: the primitives it implements (from the operation table).
    :param describer: its ``spacr_accel_backend_info`` implementation, if it has one.
    :param asked: whether it has been asked if it can run here now (or need not be).
    :param note: its answer's note once asked (what it runs on, when usable).
    """

    name: str
    obj: object | None
    distribution: str
    version: str
    status: Status
    reason: str = ""
    declaration: Declaration | None = None
    operations: tuple[str, ...] = ()
    describer: Callable[[], Any] | None = None
    asked: bool = True
    note: str = ""

    @property
    def loaded(self) -> bool:
        """Registered with the plugin manager: its non-primitive hooks (probes) may be called."""
        return self.obj is not None and self.status in ("ok", "unusable")

    @property
    def floor(self) -> bool:
        """Declared ``try_last``: tried after every other backend, never quarantined."""
        return self.declaration is not None and self.declaration.try_last

    @property
    def priority(self) -> float:
        return self.declaration.priority if self.declaration is not None else 0.0

    @property
    def accelerated(self) -> bool:
        return self.declaration is None or self.declaration.accelerated


def read_entry_points() -> tuple[list[importlib.metadata.EntryPoint], list[Plugin]]:
    """The ``spacr_accel`` entry points, and a faulty row for each distribution whose metadata
    cannot be read.

    ``entry_points(group=...)`` parses every installed distribution's ``entry_points.txt``, and one
    malformed line anywhere (a broken third-party wheel) makes it raise; that must cost that
    distribution, not every call. So on failure the distributions are read one at a time.
    """
    import importlib.metadata

    try:
        return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)), []
    except Exception:  # a malformed entry_points.txt somewhere: find it below
        logger.debug("reading entry points failed; reading each distribution in turn", exc_info=True)
    found: list[importlib.metadata.EntryPoint] = []
    broken: list[Plugin] = []
    for dist in importlib.metadata.distributions():
        try:
            found.extend(ep for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP)
        except Exception as exc:
            name = dist.metadata["Name"] or "(unnamed)"
            logger.warning("the entry points of %s cannot be read: %s", name, describe(exc))
            broken.append(Plugin(f"({name})", None, name, dist.version or "", "faulty",
                                 f"its entry_points.txt cannot be read: {describe(exc)}"))
    return found, broken


def _origin(ep: importlib.metadata.EntryPoint) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "(unknown)", ""
    return str(dist.metadata["Name"] or "(unnamed)"), str(dist.version or "")


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _is_owned(ep: importlib.metadata.EntryPoint) -> bool:
    """Whether ``ep`` is declared by the distribution named after it (``numpy`` by ``spacr-accel-numpy``)."""
    return _canonical(_origin(ep)[0]) == OWNER_PREFIX + _canonical(ep.name)


def entry_point_plugins(disabled: tuple[str, ...]) -> Iterator[Plugin]:
    """Every entry point as a :class:`Plugin`: imported, blocked, faulty, or a losing duplicate.

    Each import is logged at DEBUG BEFORE it happens, so a plugin that ends the interpreter while
    being imported (``os._exit`` in a C extension's init) is named by the last line of
    ``spacr-accel doctor -vv``, and a site can block it with ``SPACR_ACCEL_DISABLE``.
    """
    found, broken = read_entry_points()
    yield from broken
    claims: dict[str, list[importlib.metadata.EntryPoint]] = {}
    for ep in found:
        claims.setdefault(ep.name, []).append(ep)
    for name in sorted(claims):
        # sorted() is stable: after the owning distribution, sys.path order decides.
        ranked = sorted(claims[name], key=lambda ep: not _is_owned(ep))
        winner = ranked[0]
        dist_name, version = _origin(winner)
        seen = {(winner.value, _canonical(dist_name))}
        for loser in ranked[1:]:
            loser_dist, loser_version = _origin(loser)
            if (loser.value, _canonical(loser_dist)) in seen:
                continue  # the same distribution found twice on sys.path (editable + regular): harmless
            seen.add((loser.value, _canonical(loser_dist)))
            if winner.value == loser.value:
                reason = f"{dist_name} also provides {loser.value!r}; {dist_name}'s is used"
                logger.debug("spacr_accel entry point %r: %s", name, reason)
                continue  # two distributions pointing at the same module: one module, no conflict
            reason = (f"entry point {name!r} = {loser.value!r} (from {loser_dist}) conflicts with "
                      f"{winner.value!r} from {dist_name}, which is used")
            logger.warning("spacr_accel %s", reason)
            yield Plugin(name, None, loser_dist, loser_version, "duplicate", reason)
        if name in disabled:
            yield Plugin(name, None, dist_name, version, "blocked", f"named in {ENV_DISABLE}")
            continue
        logger.debug("importing spacr_accel plugin %r: %s from %s %s", name, winner.value, dist_name, version)
        try:
            obj = winner.load()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # a plugin must never break discovery, SystemExit included
            logger.warning("spacr_accel plugin %r failed to import: %s", name, describe(exc))
            yield Plugin(name, None, dist_name, version, "faulty", f"import failed: {describe(exc)}")
            continue
        yield Plugin(name, obj, dist_name, version, "ok")


def by_name(function: Callable[..., Any], argnames: tuple[str, ...]) -> Callable[..., Any]:
    """``function`` callable with keyword arguments, receiving only those it declares (pluggy's rule)."""

    def call(**kwargs: Any) -> Any:
        return function(*[kwargs[name] for name in argnames])

    return call


def _hook_options(manager: pluggy.PluginManager, name: str) -> str | None:
    """Why the plugin's hook options cannot be honoured here (pluggy's wording), or ``None``."""
    for caller in manager.get_hookcallers(manager.get_plugin(name)) or ():
        for impl in caller.get_hookimpls():
            if impl.plugin_name != name:
                continue
            used = [option for option in UNHONOURED_OPTIONS if getattr(impl, option, False)]
            if used:
                return (f"hook {caller.name!r} of plugin {name!r} is marked {'/'.join(used)}, which "
                        "spacr_accel does not honour: plugins are ordered by their declared priority "
                        "(Declaration.priority, try_last), and each implementation is called on its own")
    return None


def load(manager: pluggy.PluginManager, plugin: Plugin) -> Plugin:
    """Register one imported plugin and learn what it is from its declaration, without calling it.

    :returns: the plugin, ``incompatible`` (no declaration, or one for another plugin API) or
        ``faulty`` (a malformed declaration, a hook option that cannot be honoured, a primitive
        whose signature lacks a required argument) with a reason; else ``ok`` with its declaration
        (``asked=False`` when it has a ``spacr_accel_backend_info`` to ask later).
    """
    if plugin.obj is None:
        return plugin
    declared = getattr(plugin.obj, ATTRIBUTE, None)
    if declared is None:
        reason = (f"declares no {ATTRIBUTE} record: it was written for another version of the plugin "
                  f"API (this spacr-accel-core speaks {API_VERSION}; see docs/plugins.md)")
        logger.warning("spacr_accel plugin %r is incompatible: %s", plugin.name, reason)
        return replace(plugin, obj=None, status="incompatible", reason=reason)
    declaration, problem = validated(declared, plugin.name, OPERATIONS)
    if declaration is None:
        status: Status = "incompatible" if "plugin API" in (problem or "") else "faulty"
        logger.warning("spacr_accel plugin %r is %s: %s", plugin.name, status, problem)
        return replace(plugin, obj=None, status=status, reason=problem or "")
    try:
        manager.register(plugin.obj, name=plugin.name)
    except Exception as exc:  # pluggy validation errors, a name already registered
        logger.warning("spacr_accel plugin %r was refused: %s", plugin.name, describe(exc))
        return replace(plugin, obj=None, status="faulty", reason=f"refused: {describe(exc)}")
    problem = _hook_options(manager, plugin.name)
    if problem is not None:
        return _refuse(manager, plugin, problem)
    operations = []
    for operation in OPERATIONS.values():
        impls = [h for h in getattr(manager.hook, operation.hook).get_hookimpls() if h.plugin_name == plugin.name]
        if impls and operation.missing(impls[0].argnames):
            return _refuse(manager, plugin, f"its {operation.hook} does not take "
                           f"{', '.join(operation.missing(impls[0].argnames))}")
        if impls:
            operations.append(operation.name)
    hooks = {h.plugin_name: h for h in manager.hook.spacr_accel_backend_info.get_hookimpls()}
    describer = hooks[plugin.name].function if plugin.name in hooks else None
    return replace(plugin, declaration=declaration, operations=tuple(operations), describer=describer,
                   asked=describer is None)


def _refuse(manager: pluggy.PluginManager, plugin: Plugin, reason: str) -> Plugin:
    logger.warning("spacr_accel plugin %r is faulty: %s", plugin.name, reason)
    manager.unregister(name=plugin.name)
    return replace(plugin, obj=None, status="faulty", reason=reason)


def judge(plugin: Plugin, value: Any, error: BaseException | None, timed_out: bool, bound: float | None,
          manager: pluggy.PluginManager) -> Plugin:
    """The plugin once its ``spacr_accel_backend_info`` has answered (or not) within its bound.

    A ``RuntimeError`` or a time-out makes it unusable with that reason (asked again only after
    ``refresh()``); anything else, ``SystemExit`` included, or an answer that is not a
    :class:`BackendInfo`, makes it faulty.
    """
    if timed_out:
        reason = (f"spacr_accel_backend_info did not answer within {bound:g} s and was abandoned "
                  f"(asked again after spacr_accel_core.refresh(); raise {ENV_PROBE_TIMEOUT} if "
                  "this machine is just slow)")
        logger.warning("spacr_accel plugin %r: %s", plugin.name, reason)
        return replace(plugin, status="unusable", reason=reason, asked=True)
    if isinstance(error, RuntimeError):
        logger.debug("spacr_accel plugin %r is unusable: %s", plugin.name, describe(error))
        return replace(plugin, status="unusable", reason=describe(error), asked=True)
    problem = None
    if error is not None:
        problem = f"backend_info raised {describe(error)}"
    elif not isinstance(value, BackendInfo) or not isinstance(value.usable, bool) \
            or not isinstance(value.note, str):
        problem = f"backend_info returned {_short(value)}, not BackendInfo(usable=bool, note=str)"
    if problem is not None:
        logger.warning("spacr_accel plugin %r is faulty: %s", plugin.name, problem)
        manager.unregister(name=plugin.name)
        return replace(plugin, obj=None, status="faulty", reason=problem, asked=True)
    return replace(plugin, status="ok" if value.usable else "unusable",
                   reason="" if value.usable else value.note, note=value.note, asked=True)
