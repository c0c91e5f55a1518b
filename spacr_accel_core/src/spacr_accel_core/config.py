"""Every setting of spacr-accel in one typed object: defaults from the environment, overrides per context.

WHY ONE OBJECT. A lab sets the order once for a process (``SPACR_ACCEL_BACKENDS`` in a job
script), a pipeline step narrows it for one block of code (``with config.override(...)``), and a
CI job must be able to prove the card ran (``only=True``: a decline is an error, not a quiet
answer from the CPU). Reading those in one place, with one precedence (a context override, then
the environment, then the default), is what keeps them from disagreeing. Plugins declare their own
variables (:class:`~spacr_accel_core.Setting` in their declaration); :func:`variables` lists the
core's and theirs, and the doctor prints them, so the core names no vendor.

Context overrides live in a :mod:`contextvars` variable, so threads and asyncio tasks do not see
each other's choice. The environment is read at discovery (:func:`spacr_accel_core.refresh` reads
it again).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from .contract._declaration import Setting
from .dispatch._registry import REGISTRY
from .dispatch._settings import (
    _CORE_VARIABLES,
    DEFAULT_PROBE_TIMEOUT,
    ENV_BACKENDS,
    ENV_DEVICE,
    ENV_DISABLE,
    ENV_ONLY,
    ENV_OPERATION_PREFIX,
    ENV_PROBE_TIMEOUT,
    Changes,
    Config,
    _changes,
    _checked,
    _context,
    core_variables,
    cpu_requested,
    environment,
    known,
    overridden,
    split_names,
    use,
)

__all__ = ["Config", "cpu_requested", "current", "environment", "override", "use", "variables"]
__all__ += ["DEFAULT_PROBE_TIMEOUT", "ENV_BACKENDS", "ENV_DEVICE", "ENV_DISABLE", "ENV_ONLY",
            "ENV_OPERATION_PREFIX", "ENV_PROBE_TIMEOUT", "Changes", "core_variables", "known", "overridden",
            "split_names"]


def current() -> Config:
    """The configuration in force here: this context's override, else the environment's."""
    changes = _context.get()
    return REGISTRY.environment() if changes is None else changes.over(REGISTRY.environment())


@contextmanager
def override(*, backends: tuple[str, ...] | list[str] | None = None, only: bool | None = None,
             operations: Mapping[str, tuple[str, ...] | list[str]] | None = None,
             wait: bool | None = None) -> Iterator[Config]:
    """Change the settings for this context only: ``with config.override(only=True, backends=["cupy"]):``.

    Settings not given keep their value in force, except that ``backends=`` without ``operations=``
    replaces the per-operation orders too (``use("numpy")`` means NumPy for every operation). A
    name no installed plugin has makes the calls inside the context raise ``ValueError`` listing
    those that are installed.

    :param backends: backends to use, best first.
    :param only: ``True``: no fall-through beyond the named backends.
    :param operations: ``{operation: (name, ...)}``, an order per operation.
    :param wait: ``True`` (the default in force): under ``only``, a named backend still building
        what the call needs (numba compiling in the background) is waited for, bounded by
        ``SPACR_ACCEL_PROBE_TIMEOUT``, and an error after the bound names it. ``False``: the call
        ends at once with the decline, for a caller with a fallback of its own (spaCR's patch hands
        such a call to spaCR's own function).
    :raises TypeError: a name that is not a non-empty string, or ``only`` or ``wait`` that is not a bool.
    :raises ValueError: an unknown operation. (``only=True`` where no backend is named anywhere,
        here or in the environment, restricts nothing: there is no list to keep to.)
    """
    with _changes(_checked(backends, only, operations, wait)):
        yield current()


def variables() -> tuple[tuple[str, Setting], ...]:
    """Every environment variable spacr-accel reads: ``("core", setting)`` for the core's own, then
    ``(plugin name, setting)`` for each that a loaded plugin declares (what the doctor prints)."""
    return (*(("core", s) for s in _CORE_VARIABLES), *REGISTRY.declared_settings())
