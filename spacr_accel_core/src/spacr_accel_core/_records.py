"""Frozen records exchanged between the core, its plugins and its users."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Status = Literal["ok", "unusable", "faulty", "blocked", "incompatible", "duplicate"]


@dataclass(frozen=True)
class BackendInfo:
    """What a plugin says about itself, from its ``spacr_accel_backend_info`` hook.

    :param name: the plugin's name; should equal its entry point's name.
    :param priority: higher runs first. The defaults follow the seed's order: torch 300,
        cupy 200, numpy 100 (the floor). Equal priorities break ties by name.
    :param accelerated: it needs a device, so ``gpu=False`` refuses it outright.
    :param usable: it can serve automatic dispatch here, now. A plugin that is not usable is
        skipped by automatic dispatch but may still be forced with ``backend=``.
    :param note: why it is not usable (empty when it is), or what it will run on.
    """

    name: str
    priority: float
    accelerated: bool
    usable: bool = True
    note: str = ""


@dataclass(frozen=True)
class PluginStatus:
    """One row of :func:`spacr_accel_core.plugins`: a plugin as the registry sees it.

    :param name: the plugin's (entry point's) name.
    :param priority: its priority, or ``0.0`` when it did not say.
    :param accelerated: whether it needs a device.
    :param distribution: the installed distribution it came from, or ``"(in-process)"``.
    :param version: that distribution's version, or ``""``.
    :param status: ``ok``, ``unusable``, ``faulty`` (failed to load, broke the contract),
        ``blocked`` (named in ``SPACR_ACCEL_DISABLE``; never imported), ``incompatible``
        (built for another plugin API) or ``duplicate`` (a second entry point with a taken name).
    :param reason: why it is not ``ok``; empty otherwise.
    :param operations: the primitives it implements.
    :param faults: operations it broke at run time, with what it did; those are skipped
        for the rest of the process (until :func:`spacr_accel_core.refresh`).
    """

    name: str
    priority: float
    accelerated: bool
    distribution: str
    version: str
    status: Status
    reason: str = ""
    operations: tuple[str, ...] = ()
    faults: tuple[tuple[str, str], ...] = field(default=())

    @property
    def usable(self) -> bool:
        """Whether automatic dispatch will consider it."""
        return self.status == "ok"


@dataclass(frozen=True)
class Dispatch:
    """Which backend served a call, and why the ones ranked above it did not.

    :param operation: ``maximum_filter``, ``matmul`` or ``nearest_neighbours``.
    :param backend: the plugin that answered; ``"core"`` when the answer needed no backend
        (an empty input, a window of one pixel).
    :param declined: ``(plugin, reason)`` for each plugin tried before it, best first.
    """

    operation: str
    backend: str
    declined: tuple[tuple[str, str], ...] = ()
