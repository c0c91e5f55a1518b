"""The dispatch order: who is tried, in which order, and why each other plugin is passed over.

The rules in one place: best priority first, ties by name (so the order never depends on the
install order), the NumPy floor last whatever its priority (it always answers, so anything after it
would never be reached), a ``use()``/``SPACR_ACCEL_BACKENDS`` order taken as given with the floor
appended (unless ``only`` is in force), and ``gpu=False`` refusing accelerated plugins without
asking them anything. "The floor" is whatever declares ``try_last``; the core knows no name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..contract._install import install_command
from ..contract._records import PluginStatus
from ._discovery import Plugin
from ._settings import ENV_BACKENDS, ENV_DISABLE, ENV_ONLY


def priority_key(plugin: Plugin) -> tuple[float, str]:
    """Best first, ties by name, so the order never depends on the install order."""
    return (-plugin.priority, plugin.name)


def rank_key(plugin: Plugin) -> tuple[bool, float, str]:
    """The dispatch order: by priority, and the floor last whatever its priority (it always answers)."""
    return (plugin.floor, *priority_key(plugin))


def passed_over(plugin: Plugin, operation: str, gpu: bool, restriction: tuple[str, ...] | None,
                faults: dict[tuple[str, str], str], only: bool = False) -> str | None:
    """Why ``plugin`` is not tried for ``operation`` (``None``: it is, perhaps after being asked)."""
    if plugin.status != "ok":
        return f"{plugin.status}: {plugin.reason}"
    if operation not in plugin.operations:
        return f"does not implement {operation}"
    if not gpu and plugin.accelerated:
        return "accelerated, and gpu=False refuses it"
    if restriction is not None and plugin.name not in restriction and (only or not plugin.floor):
        return f"not in the backends in force {list(restriction)}{' (only)' if only else ''}"
    if (plugin.name, operation) in faults and not plugin.floor:
        return f"quarantined: {faults[(plugin.name, operation)]}"
    return None


def in_force(ranked: Sequence[str], restriction: tuple[str, ...] | None,
             plugins: Mapping[str, Plugin], only: bool = False) -> list[str]:
    """``ranked`` under a restriction: the restriction's order, then the floor; else ``ranked``.

    :param ranked: backends best first, the floor last.
    :param restriction: names best first, or ``None``.
    :param plugins: name -> plugin, to recognise the floor.
    :param only: nothing beyond the restriction, not even the floor.
    """
    if restriction is None:
        return list(ranked)
    if only:
        return [n for n in restriction if n in ranked]
    return ([n for n in restriction if n in ranked and not plugins[n].floor]
            + [n for n in ranked if plugins[n].floor])


def fix_hint(plugins: Mapping[str, Plugin], floor: str | None, only: bool = False) -> str:
    """The last line of the error when nothing served a call: how to fix it, for this install."""
    if only:
        return (f"Fix: only the named backends may run ({ENV_ONLY} or config.override(only=True)); "
                "name another, or drop only, to let the next backend answer.")
    if floor is None:
        blocked = sorted(name for name, plugin in plugins.items() if plugin.status == "blocked")
        if blocked:
            return (f"Fix: no floor (the backend declaring try_last, which always runs) is loaded and "
                    f"{ENV_DISABLE} blocks {', '.join(blocked)}: remove the floor from it. "
                    "See `spacr-accel doctor`.")
        return (f"Fix: `{install_command()}` installs the floor (the backend that always runs); "
                "see `spacr-accel doctor`.")
    return f"Fix: check {ENV_BACKENDS} / {ENV_DISABLE} and `spacr-accel doctor`."


def status_rows(plugins: Iterable[Plugin], faults: Mapping[tuple[str, str], str]) -> tuple[PluginStatus, ...]:
    """One :class:`~spacr_accel_core.PluginStatus` per plugin, in the order given (what the doctor prints).

    :param faults: ``(plugin, operation) -> what was wrong`` for every quarantine so far.
    """
    rows = []
    for plugin in plugins:
        declared = plugin.declaration
        rows.append(PluginStatus(
            name=plugin.name,
            priority=declared.priority if declared is not None else 0.0,
            accelerated=declared.accelerated if declared is not None else False,
            distribution=plugin.distribution,
            version=plugin.version,
            status=plugin.status,
            reason=plugin.reason,
            operations=plugin.operations,
            faults=tuple((op, what) for (name, op), what in sorted(faults.items()) if name == plugin.name),
        ))
    return tuple(rows)
