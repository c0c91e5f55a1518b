"""Where an operation of the torch backend runs, shared by every family's hooks.

Each hook runs its primitive on the device :func:`spacr_accel_core.accelerator.resolve` names, and on
the CPU when a caller forced torch with ``gpu=False``, and translates the device's errors for
dispatch. Cheap to import: the runtime (:mod:`._runtime`) is imported at the first call, so the
plugin's import never pays for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from spacr_accel_core import cpu_requested
from spacr_accel_core.toolkit import call_translated

_T = TypeVar("_T")


def run(what: str, work: Callable[..., _T], *args: Any) -> _T:
    """Run one primitive on the resolved device (the CPU when the call forced torch with
    ``gpu=False``), translating the device's errors for dispatch."""
    from ._runtime import cpu_target, target, translate

    device = cpu_target() if cpu_requested() else target()
    return call_translated(translate, what, work, *args, device)
