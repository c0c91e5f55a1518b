"""Where an operation of the torch backend runs, shared by every family's hooks.

Each hook runs its primitive on the device :func:`spacr_accel_core.accelerator.resolve` names, and on
the CPU when a caller forced torch with ``gpu=False``, and translates the device's errors for
dispatch. Cheap to import: the runtime (:mod:`._runtime`) is imported at the first call, so the
plugin's import never pays for it.

A hook either calls its primitive itself inside :func:`on_device` (the fields go from the hook to
the primitive, never through this module and back), or hands it to :func:`run`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from spacr_accel_core import cpu_requested
from spacr_accel_core.toolkit import translated_errors

if TYPE_CHECKING:
    from ._runtime import Device

_T = TypeVar("_T")


@contextmanager
def on_device(what: str) -> Iterator[Device]:
    """The resolved device (the CPU when the call forced torch with ``gpu=False``), the body's
    errors translated for dispatch (``with on_device("phase_correlate") as device: ...``)."""
    from ._runtime import cpu_target, target, translate

    device = cpu_target() if cpu_requested() else target()
    with translated_errors(translate, what):
        yield device


def run(what: str, work: Callable[..., _T], *args: Any) -> _T:
    """Run one primitive on the resolved device (the CPU when the call forced torch with
    ``gpu=False``), translating the device's errors for dispatch: ``work(*args, device)`` inside
    :func:`on_device`."""
    with on_device(what) as device:
        return work(*args, device)
