"""spacr-accel's core: a pluggy registry of compute backends and device probers.

The core knows no vendor. Backends (NumPy, torch, CuPy, or a third party's) and device probers are
separate distributions that plug in through the entry-point group ``spacr_accel``; they are
discovered once per process, ranked by priority and walked best first, falling through to the next
when one raises :class:`RuntimeError`. See :mod:`spacr_accel_core.ops` for the operations and
:mod:`spacr_accel_core.accelerator` for what this machine is.

THE LAYOUT. The top-level modules are the public faces (``ops``, a package whose family modules
declare each operation once with its row; ``table``, the operation table's door; ``accelerator``,
``config``, ``dask``, ``toolkit``, ``testing``, ``reference``, and ``exact``, ``tiling``,
``separable``: the kit's arithmetic, passes and tiling, named for backend authors); importing the
package declares the core's operations, so the table is whole before anything reads it. The
folders hold the parts,
each importing only the folders below it: ``contract`` (what a plugin is and is told), then
``kit`` and ``operations`` (the backend author's machinery; the operation table), then
``dispatch`` (settings, discovery, ranking, the registry), then ``devices`` (what this machine
is), then the faces, then ``commands`` and ``testing``. ``tests/registry_layout`` checks it.
"""

from __future__ import annotations

import sys

from . import config  # noqa: F401  (spacr_accel_core.config without importing it, as ever)
from . import ops as _ops  # noqa: F401  (the core's operations declared: their rows in the table)
from .contract._declaration import Declaration, Setting
from .contract._errors import (
    BackendDeclined,
    BackendOutOfMemory,
    BackendUnavailable,
    BackendWarming,
    NoBackendError,
    PluginFault,
)
from .contract._markers import API_VERSION, ENTRY_POINT_GROUP, PROJECT_NAME, hookimpl, hookspec
from .contract._records import BackendInfo, Dispatch, HostDevice, PluginStatus, WarmState
from .contract._registration import Registration
from .dispatch._registry import REGISTRY, Registry, cpu_requested, use

__all__ = [
    "API_VERSION",
    "ENTRY_POINT_GROUP",
    "PROJECT_NAME",
    "BackendDeclined",
    "BackendInfo",
    "BackendOutOfMemory",
    "BackendUnavailable",
    "BackendWarming",
    "Declaration",
    "Dispatch",
    "HostDevice",
    "NoBackendError",
    "PluginFault",
    "PluginStatus",
    "Registration",
    "Registry",
    "Setting",
    "WarmState",
    "backends_above_floor",
    "cpu_requested",
    "hookimpl",
    "hookspec",
    "last_dispatch",
    "last_served",
    "plugins",
    "refresh",
    "register",
    "unregister",
    "use",
    "warm_up",
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
    from .devices import _machine  # local: keep the accelerator out of `import spacr_accel_core`

    _machine._forget()


def register(plugin: object, name: str) -> None:
    """Add an in-process plugin (a module or object with hookimpls) under ``name``.

    What its hooks could change is forgotten (the accelerator, the host devices, the neural
    engines), as dispatch forgets its order: the next question sees the plugin.

    :param plugin: the object holding the hookimpls.
    :param name: the plugin's name, as an entry point's name would be.
    """
    REGISTRY.register(plugin, name)
    _forget_accelerator()


def unregister(name: str) -> None:
    """Remove an in-process plugin added with :func:`register`.

    :param name: the name it was registered under.
    """
    REGISTRY.unregister(name)
    _forget_accelerator()


def _forget_accelerator() -> None:
    """Forget the accelerator's cached answers, if it was ever asked (never import it for this)."""
    machine = sys.modules.get(f"{__name__}.devices._machine")
    if machine is not None:
        machine._forget()


def last_dispatch() -> Dispatch | None:
    """Which backend served the last operation on this thread, and why the ones above declined."""
    return REGISTRY.last_dispatch()


def last_served() -> tuple[str | None, tuple[str, ...]]:
    """Which backend served the last operation on this thread, and which faster ones were still
    building then: :func:`last_dispatch`'s ``backend`` and ``waiting`` without building its record
    (which costs about ten microseconds), for a caller that asks after every call. spaCR's patch
    counts each served call under its backend this way.

    :returns: ``(backend, waiting)``: ``backend`` is ``"core"`` for an answer the core gave itself
        and ``None`` before any operation on this thread; ``waiting`` is empty unless a faster
        backend was still building what the call needed.
    """
    return REGISTRY.last_backend(), REGISTRY.last_waiting()


def backends_above_floor(operation: str, gpu: bool = True) -> tuple[str, ...]:
    """The backends above the floor that can serve ``operation`` here, best first, under the order
    in force (an enclosing :func:`use` or ``config.override``, then the environment).

    For a caller with a way of its own that is as fast as the floor: it wants an answer only from
    a faster backend, and otherwise keeps its own (spaCR's patch leaves such calls to spaCR). Each
    candidate that has not yet said whether it can run here is asked, as
    :func:`spacr_accel_core.ops.accelerated_backends` asks.

    :param operation: an operation's name, e.g. ``"gaussian_filter"``.
    :param gpu: ``False`` leaves out the accelerated backends without asking them anything.
    :returns: the names, the floor (the plugin declaring ``try_last``) left out; empty where only
        the floor serves ``operation``.
    """
    floor = REGISTRY.floor()
    return tuple(name for name in REGISTRY.backend_names(gpu=gpu, operation=operation) if name != floor)


def warm_up(*backends: str, timeout: float = 120.0) -> dict[str, bool]:
    """Have backends build now what they build lazily, and wait for it (``spacr_accel_warm_up``).

    A backend that compiles its kernels in the background (numba) declines calls until they are
    ready, and the next backend answers: right for a pipeline, wrong for a benchmark or a test of
    that backend. Never raises: a plugin whose hook raises, or does not answer within ``timeout``
    (plus a grace of 5 s), is reported not ready.

    :param backends: only these plugins; none given: every plugin that implements the hook.
    :param timeout: seconds each plugin may wait.
    :returns: ``{plugin name: ready}`` for each plugin that implements the hook (the others build
        nothing lazily, so they are absent).
    """
    from functools import partial

    from .dispatch._bounded import bounded

    ready: dict[str, bool] = {}
    for name, call in REGISTRY.hookimpls("spacr_accel_warm_up"):
        if backends and name not in backends:
            continue
        outcome = bounded(partial(call, timeout=timeout), timeout + 5.0, f"warm_up {name}")
        ready[name] = not outcome.timed_out and outcome.error is None and outcome.value is True
    return ready
