"""Finding the plugins and learning what each one is: entry points, de-duplication, loading.

WHAT A PLUGIN IS, APART FROM WHETHER IT CAN RUN NOW. Name, priority and ``accelerated`` decide
where a plugin stands in line; whether it is usable here needs its library (``import torch`` costs
a second and 200 MiB on a CPU-only laptop only to learn there is no GPU). So a plugin may declare
what it is as a static attribute, ``SPACR_ACCEL_BACKEND = BackendInfo(...)``, read here without a
call, and its ``spacr_accel_backend_info`` is asked later, lazily, by the registry. A plugin
without the declaration is described by calling ``spacr_accel_backend_info`` (the earlier form of
the contract), bounded like a probe.

THE SHIPPED BACKENDS ARE FOUND AS THEMSELVES. An entry point is a name anybody can declare: a
distribution earlier on ``sys.path`` that declares ``numpy`` must not replace the floor. So a
shipped name is taken from its own distribution whatever the metadata order, and any other
distribution declaring it is reported as a conflict; for every other name the first on ``sys.path``
wins, the rule Python itself applies to two modules of one name, and the other is reported.
"""

from __future__ import annotations

import importlib.metadata
import logging
import math
import numbers
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Final

import numpy as np
import pluggy

from ._errors import describe
from ._markers import API_VERSION, ENTRY_POINT_GROUP
from ._records import BackendInfo, Status

logger = logging.getLogger("spacr_accel_core")

OPERATIONS: Final = ("maximum_filter", "matmul", "nearest_neighbours")
SPEC_ARGS: Final = {
    "maximum_filter": ("field", "size"),
    "matmul": ("first", "second"),
    "nearest_neighbours": ("source", "target", "chunk"),
}
"""Each primitive's arguments in the order the core passes them (the hookspec's order)."""

SHIPPED: Final = {
    "numpy": ("spacr-accel-numpy", "spacr_accel_numpy._plugin"),
    "torch": ("spacr-accel-torch", "spacr_accel_torch._plugin"),
    "cupy": ("spacr-accel-cupy", "spacr_accel_cupy._plugin"),
}
"""The backends this project ships: entry point name -> (distribution, plugin module)."""

FLOOR_MODULE: Final = SHIPPED["numpy"][1]
"""The plugin that always answers is the shipped NumPy backend, recognised by what it is."""

DECLARATION: Final = "SPACR_ACCEL_BACKEND"
"""The attribute on a plugin that declares, without a call, its name, priority and ``accelerated``."""

FIELD_DTYPES_DECLARATION: Final = "SPACR_ACCEL_FIELD_DTYPES"
"""The attribute on a plugin naming the integer field dtypes its ``maximum_filter`` takes as they are."""

ZEROS_DECLARATION: Final = "SPACR_ACCEL_POSITIVE_ZEROS"
"""The attribute on a plugin saying, with ``True``, that its ``maximum_filter`` never returns
``-0.0``: the core then skips the ``+0.0`` pass it otherwise makes over that plugin's results."""

NARROW_FIELDS: Final = frozenset(np.dtype(name) for name in ("uint8", "int8", "uint16", "int16"))
"""The field dtypes the core may pass to ``maximum_filter`` unconverted: camera dtypes, every value
exact in float32 and the cast order-preserving, so a window maximum commutes with the cast and a
plugin may filter in the narrow type (a half or a quarter of the bytes) and cast once. Every other
field, and every field for a plugin that does not name its dtype, arrives as float32."""

_F32: Final = np.dtype(np.float32)

ENV_DISABLE: Final = "SPACR_ACCEL_DISABLE"
ENV_BACKENDS: Final = "SPACR_ACCEL_BACKENDS"
IN_PROCESS: Final = "(in-process)"


@dataclass(frozen=True)
class Plugin:
    """One plugin as the registry knows it. Replaced, never mutated, as more is learnt.

    :param info: priority and ``accelerated`` once known (declared, or described); ``usable`` and
        ``note`` are meaningful only once ``asked``.
    :param describer: its ``spacr_accel_backend_info`` implementation, if it has one.
    :param asked: whether it has been asked if it can run here now (or need not be).
    :param floor: the shipped NumPy backend: tried last whatever its priority, never quarantined.
    :param field_dtypes: the :data:`NARROW_FIELDS` its ``maximum_filter`` declared it takes as they
        are (``SPACR_ACCEL_FIELD_DTYPES``); any other field is cast to float32 for it.
    :param positive_zeros: its ``maximum_filter`` declared (``SPACR_ACCEL_POSITIVE_ZEROS``) that a
        maximum of zero it returns is always ``+0.0``.
    """

    name: str
    obj: object | None
    distribution: str
    version: str
    status: Status
    reason: str = ""
    info: BackendInfo | None = None
    operations: tuple[str, ...] = ()
    describer: Callable[[], Any] | None = None
    asked: bool = True
    floor: bool = False
    field_dtypes: frozenset[np.dtype[Any]] = frozenset()
    positive_zeros: bool = False

    @property
    def loaded(self) -> bool:
        """Registered with the plugin manager: its non-primitive hooks (probes) may be called."""
        return self.obj is not None and self.status in ("ok", "unusable")


def malformed_info(info: object) -> tuple[BackendInfo | None, str | None]:
    """A plugin's :class:`BackendInfo` with its priority normalised to a float, or what is wrong.

    Checked per plugin because one bad field would otherwise break every call: a string priority
    makes the ranking sort raise, a NaN one makes the order depend on the install order, and
    ``10**400`` overflows the conversion. NumPy scalars (``np.int64(600)``) are numbers like any.
    """
    if not isinstance(info, BackendInfo):
        return None, f"returned {type(info).__name__}, not BackendInfo"
    fields: dict[str, object] = vars(info)  # as given: the annotations are a plugin's promise only
    if not isinstance(fields["name"], str) or not isinstance(fields["note"], str):
        return None, "has a name or note that is not a string"
    priority = fields["priority"]
    if isinstance(priority, bool) or not isinstance(priority, numbers.Real):
        return None, f"has priority {_short(priority)}, not a finite number"
    try:
        value = float(priority)
    except (OverflowError, ValueError, TypeError):
        return None, f"has priority {_short(priority)}, too large for a float"
    if not math.isfinite(value):
        return None, f"has priority {_short(priority)}, not a finite number"
    if not isinstance(fields["accelerated"], bool) or not isinstance(fields["usable"], bool):
        return None, "has accelerated/usable flags that are not bools"
    return replace(info, priority=value, note=str(info.note), name=str(info.name)), None


def declared_field_dtypes(value: object) -> tuple[frozenset[np.dtype[Any]], str | None]:
    """A plugin's ``SPACR_ACCEL_FIELD_DTYPES`` as dtypes, or what is wrong with it.

    A tuple (or list, set) of dtype names from :data:`NARROW_FIELDS`; ``"float32"`` may be named and
    changes nothing (every plugin takes float32). A name outside the set is refused rather than
    dropped: a plugin declaring ``"float64"`` expects input the core never sends, and would learn so
    only from wrong answers.
    """
    if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list, set, frozenset)):
        return frozenset(), f"is {_short(value)}, not a tuple of dtype names"
    accepted = set()
    for name in value:
        try:
            dtype = np.dtype(name) if isinstance(name, str) else None
        except TypeError:
            dtype = None
        if dtype is None or (dtype not in NARROW_FIELDS and dtype != _F32):
            allowed = ", ".join(sorted(map(str, NARROW_FIELDS)))
            return frozenset(), f"names {_short(name)}; the core passes as they are only {allowed}"
        if dtype != _F32:
            accepted.add(dtype)
    return frozenset(accepted), None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def read_entry_points() -> tuple[list[importlib.metadata.EntryPoint], list[Plugin]]:
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


def _is_shipped(ep: importlib.metadata.EntryPoint) -> bool:
    """Whether ``ep`` is one of this project's own backends, declared by its own distribution."""
    shipped = SHIPPED.get(ep.name)
    return shipped is not None and _canonical(_origin(ep)[0]) == shipped[0] and ep.value == shipped[1]


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
        # sorted() is stable: after the shipped distribution, sys.path order decides.
        ranked = sorted(claims[name], key=lambda ep: not _is_shipped(ep))
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


def by_position(function: Callable[..., Any], argnames: tuple[str, ...], spec: tuple[str, ...]) -> Callable[..., Any]:
    """``function`` callable with the spec's arguments in the spec's order, as pluggy would call it.

    pluggy passes each implementation the arguments IT declares (``hookimpl.argnames``), in its
    own order, and a subset is valid. The core's hot path passes the spec's arguments by position,
    so an implementation that declares exactly those is called as it is (no wrapper, no cost), and
    only one that reorders or drops arguments gets a small adapter.
    """
    if argnames == spec:
        return function
    picks = tuple(spec.index(name) for name in argnames)

    def adapted(*args: Any) -> Any:
        return function(*[args[i] for i in picks])

    return adapted


def casting_fields(function: Callable[..., Any], accepted: frozenset[np.dtype[Any]]) -> Callable[..., Any]:
    """``function`` (a spec-order ``maximum_filter`` call) handed every field it can take.

    The core passes a camera field (:data:`NARROW_FIELDS`) unconverted; a plugin that did not name
    that dtype in ``SPACR_ACCEL_FIELD_DTYPES`` (every plugin written when the hook took float32
    only) gets the float32 cast instead, made here, per plugin, once per call. A plugin that takes
    every narrow dtype (the NumPy floor) is called as it is, with no wrapper.

    :param accepted: the narrow dtypes the plugin declared.
    """
    if accepted >= NARROW_FIELDS:
        return function
    takes = frozenset({_F32, *accepted})

    def cast(field: np.ndarray, size: int) -> Any:
        if field.dtype not in takes:  # a camera field it did not declare: the float32 it expects
            field = field.astype(_F32)
            field.setflags(write=False)  # as read-only as every other input a plugin gets
        return function(field, size)

    return cast


_ZERO: Final = np.float32(0.0)


def settling_zeros(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` (a spec-order ``maximum_filter`` call) with the contract's sign of zero applied.

    One rule, made here so that no backend (ours or a third party's) can differ from another: a
    maximum of zero is ``+0.0``. Adding ``+0.0`` changes nothing else, NaN included; scipy keeps
    whichever zero its scan met first, which no other backend can mimic. An integer or bool field
    holds no ``-0.0`` (its float32 cast gives ``+0.0``) and a maximum is one of its inputs, so there
    the pass is skipped (2048^2 uint16, size 5: 8.3 ms -> 7.0 ms measured). A plugin that declares
    ``SPACR_ACCEL_POSITIVE_ZEROS = True`` is called as it is: the pass costs 5-8 ms on a 4096^2 field.
    """

    def settle(field: np.ndarray, size: int) -> Any:
        result = function(field, size)
        if field.dtype.kind in "biu" or not isinstance(result, np.ndarray):  # the shape check judges the latter
            return result
        if result.flags.writeable and not np.may_share_memory(result, field):
            np.add(result, _ZERO, out=result)
            return result
        return result + _ZERO  # a read-only or aliased result (a careless plugin) is not written to

    return settle


def by_name(function: Callable[..., Any], argnames: tuple[str, ...]) -> Callable[..., Any]:
    """``function`` callable with keyword arguments, receiving only those it declares (pluggy's rule)."""

    def call(**kwargs: Any) -> Any:
        return function(*[kwargs[name] for name in argnames])

    return call


def _is_floor(plugin: Plugin) -> bool:
    module = getattr(plugin.obj, "__name__", None)
    if plugin.name != "numpy" or module != FLOOR_MODULE:
        return False
    return plugin.distribution == IN_PROCESS or _canonical(plugin.distribution) == SHIPPED["numpy"][0]


def load(manager: pluggy.PluginManager, plugin: Plugin) -> Plugin:
    """Register one imported plugin and learn what it is without calling it.

    :returns: the plugin, ``incompatible``/``faulty`` with a reason, or ``ok`` with its declared
        :class:`BackendInfo` (``asked=False`` when it has a ``spacr_accel_backend_info`` to ask
        later; ``info=None`` when it declares nothing and must be described by that hook).
    """
    if plugin.obj is None:
        return plugin
    declared_api = getattr(plugin.obj, "SPACR_ACCEL_API_VERSION", API_VERSION)
    if declared_api != API_VERSION:
        reason = f"built for plugin API {declared_api!r}; this spacr-accel-core speaks {API_VERSION}"
        logger.warning("spacr_accel plugin %r is incompatible: %s", plugin.name, reason)
        return replace(plugin, obj=None, status="incompatible", reason=reason)
    try:
        manager.register(plugin.obj, name=plugin.name)
    except Exception as exc:  # pluggy validation errors, a name already registered
        logger.warning("spacr_accel plugin %r was refused: %s", plugin.name, describe(exc))
        return replace(plugin, obj=None, status="faulty", reason=f"refused: {describe(exc)}")
    hooks = {h.plugin_name: h for h in manager.hook.spacr_accel_backend_info.get_hookimpls()}
    operations = tuple(op for op in OPERATIONS
                       if any(h.plugin_name == plugin.name
                              for h in getattr(manager.hook, f"spacr_accel_{op}").get_hookimpls()))
    describer = hooks[plugin.name].function if plugin.name in hooks else None
    plugin = replace(plugin, operations=operations, describer=describer, floor=_is_floor(plugin))
    field_dtypes = getattr(plugin.obj, FIELD_DTYPES_DECLARATION, None)
    if field_dtypes is not None:
        accepted, problem = declared_field_dtypes(field_dtypes)
        if problem is not None:
            return _refuse(manager, plugin, f"{FIELD_DTYPES_DECLARATION} {problem}")
        plugin = replace(plugin, field_dtypes=accepted)
    positive_zeros = getattr(plugin.obj, ZEROS_DECLARATION, False)
    if not isinstance(positive_zeros, bool):
        return _refuse(manager, plugin, f"{ZEROS_DECLARATION} must be True or False, not {positive_zeros!r}")
    plugin = replace(plugin, positive_zeros=positive_zeros)
    declared = getattr(plugin.obj, DECLARATION, None)
    if declared is not None:
        info, problem = malformed_info(declared)
        if info is None:
            return _refuse(manager, plugin, f"{DECLARATION} {problem}")
        return replace(plugin, info=replace(info, name=plugin.name, usable=True, note=""),
                       asked=describer is None)
    if describer is None:
        if operations:
            return _refuse(manager, plugin, f"implements primitives but neither declares {DECLARATION} "
                           "nor implements spacr_accel_backend_info")
        return plugin  # a prober or capability plugin: no backend to rank
    return replace(plugin, asked=False)


def _refuse(manager: pluggy.PluginManager, plugin: Plugin, reason: str) -> Plugin:
    logger.warning("spacr_accel plugin %r is faulty: %s", plugin.name, reason)
    manager.unregister(name=plugin.name)
    return replace(plugin, obj=None, status="faulty", reason=reason)


def judge(plugin: Plugin, value: Any, error: BaseException | None, timed_out: bool, bound: float | None,
          manager: pluggy.PluginManager) -> Plugin:
    """The plugin once its ``spacr_accel_backend_info`` has answered (or not) within its bound.

    A declared plugin keeps its declared priority and ``accelerated`` and takes only ``usable`` and
    ``note`` from the answer; an undeclared one takes everything. A ``RuntimeError`` or a time-out
    makes it unusable with that reason (asked again only after ``refresh()``); anything else,
    ``SystemExit`` included, makes it faulty.
    """
    if timed_out:
        reason = (f"spacr_accel_backend_info did not answer within {bound:g} s and was abandoned "
                  "(asked again after spacr_accel_core.refresh(); raise SPACR_ACCEL_PROBE_TIMEOUT if "
                  "this machine is just slow)")
        logger.warning("spacr_accel plugin %r: %s", plugin.name, reason)
        return replace(plugin, status="unusable", reason=reason, asked=True)
    if isinstance(error, RuntimeError):
        logger.debug("spacr_accel plugin %r is unusable: %s", plugin.name, describe(error))
        return replace(plugin, status="unusable", reason=describe(error), asked=True)
    if error is not None:
        logger.warning("spacr_accel plugin %r failed to describe itself: %s", plugin.name, describe(error))
        manager.unregister(name=plugin.name)
        return replace(plugin, obj=None, status="faulty", reason=f"backend_info raised {describe(error)}",
                       asked=True)
    info, problem = malformed_info(value)
    if info is None:
        logger.warning("spacr_accel plugin %r described itself badly: %s", plugin.name, problem)
        manager.unregister(name=plugin.name)
        return replace(plugin, obj=None, status="faulty", reason=f"backend_info {problem}", asked=True)
    if plugin.info is not None:  # declared: where it stands in line is not the hook's to change
        info = replace(plugin.info, usable=info.usable, note=info.note)
    elif info.name != plugin.name:
        logger.debug("plugin %r calls itself %r; the entry point's name wins", plugin.name, info.name)
    info = replace(info, name=plugin.name)
    return replace(plugin, info=info, status="ok" if info.usable else "unusable",
                   reason="" if info.usable else info.note, asked=True)
