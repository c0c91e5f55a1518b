"""The dispatch order: who is tried, in which order, and why each other plugin is passed over.

The rules in one place: best priority first, ties by name (so the order never depends on the
install order), the NumPy floor last whatever its priority (it always answers, so anything after it
would never be reached), a ``use()``/``SPACR_ACCEL_BACKENDS`` order taken as given with the floor
appended (unless ``only`` is in force), and ``gpu=False`` refusing accelerated plugins without
asking them anything. "The floor" is whatever declares ``try_last``; the core knows no name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..contract._install import install_command
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
    numpy = plugins.get("numpy")
    if numpy is not None and numpy.status == "blocked":
        return (f"Fix: remove numpy from {ENV_DISABLE}; the NumPy backend is the floor that always "
                "runs. See `spacr-accel doctor`.")
    if floor is None:
        return (f"Fix: `{install_command()}` installs the NumPy backend, which always runs; "
                "see `spacr-accel doctor`.")
    return f"Fix: check {ENV_BACKENDS} / {ENV_DISABLE} and `spacr-accel doctor`."
