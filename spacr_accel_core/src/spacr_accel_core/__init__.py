"""spacr-accel's core: a pluggy registry of compute backends and device probers.

The core knows no vendor. Backends (NumPy, torch, CuPy, or a third party's) and device probers are
separate distributions that plug in through the entry-point group ``spacr_accel``; they are
discovered once per process, ranked by priority and walked best first, falling through to the next
when one raises :class:`RuntimeError`. See :mod:`spacr_accel_core.ops` for the operations and
:mod:`spacr_accel_core.accelerator` for what this machine is.
"""

from __future__ import annotations

from ._errors import (
    BackendDeclined,
    BackendOutOfMemory,
    BackendUnavailable,
    NoBackendError,
    PluginFault,
)
from ._markers import API_VERSION, ENTRY_POINT_GROUP, PROJECT_NAME, hookimpl, hookspec
from ._records import BackendInfo, Dispatch, PluginStatus
from ._registry import REGISTRY, Registry, use

__all__ = [
    "API_VERSION",
    "ENTRY_POINT_GROUP",
    "PROJECT_NAME",
    "BackendDeclined",
    "BackendInfo",
    "BackendOutOfMemory",
    "BackendUnavailable",
    "Dispatch",
    "NoBackendError",
    "PluginFault",
    "PluginStatus",
    "Registry",
    "hookimpl",
    "hookspec",
    "last_dispatch",
    "plugins",
    "refresh",
    "register",
    "unregister",
    "use",
]


def plugins() -> tuple[PluginStatus, ...]:
    """Every plugin seen, best first: name, priority, accelerated, distribution, version, status
    (``ok``, ``unusable``, ``faulty``, ``blocked``, ``incompatible``, ``duplicate``) and why."""
    return REGISTRY.plugins()


def refresh() -> None:
    """Discover again on the next call: for plugins installed after the first call, a changed
    ``SPACR_ACCEL_BACKENDS``/``SPACR_ACCEL_DISABLE``, or to give a faulty plugin another chance.
    Also forgets the cached accelerator."""
    REGISTRY.refresh()
    from . import accelerator  # local: keep the accelerator out of `import spacr_accel_core`

    accelerator._forget()


def register(plugin: object, name: str) -> None:
    """Add an in-process plugin (a module or object with hookimpls) under ``name``.

    :param plugin: the object holding the hookimpls.
    :param name: the plugin's name, as an entry point's name would be.
    """
    REGISTRY.register(plugin, name)


def unregister(name: str) -> None:
    """Remove an in-process plugin added with :func:`register`.

    :param name: the name it was registered under.
    """
    REGISTRY.unregister(name)


def last_dispatch() -> Dispatch | None:
    """Which backend served the last operation on this thread, and why the ones above declined."""
    return REGISTRY.last_dispatch()
