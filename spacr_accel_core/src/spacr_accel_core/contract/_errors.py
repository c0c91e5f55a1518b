"""The exceptions of the plugin contract.

A hookimpl says "not me, not now" by raising :class:`RuntimeError`. The three subclasses here are
the EXPECTED reasons, logged at DEBUG when the dispatcher falls through; any other exception from a
plugin is a fault, logged at WARNING once, because it means the plugin is broken rather than busy.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._install import install_command


def describe(exc: BaseException) -> str:
    """An exception as one line, ``Type: first line``: for logs, the doctor and final errors.

    A driver's message can span a paragraph; the first line is the one that names the cause.

    :param exc: the exception to describe.
    """
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def first_line(exc: BaseException) -> str:
    """An exception's first line without its class name, for a reason a person reads after a
    phrase that already says what failed ("the device failed: ..."); the class name when the
    message is empty.

    :param exc: the exception to describe.
    """
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


class BackendUnavailable(RuntimeError):
    """The backend cannot run here: its library is missing, or there is no device for it."""


class BackendDeclined(RuntimeError):
    """The backend could run but chooses not to for this input (too small to pay for a transfer)."""


class BackendWarming(BackendDeclined):
    """The backend is still building what it builds lazily (numba compiling its kernels): the next
    backend answers meanwhile, and :attr:`~spacr_accel_core.Dispatch.waiting` names this one."""


class BackendOutOfMemory(RuntimeError):
    """The device ran out of memory, even after the backend retried with smaller pieces.

    A card shared with another job is the common case, so this is a reason to try the next
    backend, never a reason to fail the plate.
    """


class PluginFault(RuntimeError):
    """A forced backend broke the contract (wrong shape or dtype, or a non-RuntimeError)."""


class NoBackendError(RuntimeError):
    """Every backend declined an operation; the message names each one and its reason.

    It begins with the words "no usable backend", which callers (spaCR's own tests among them)
    match on.

    :param operation: the operation that could not be served.
    :param reasons: ``(plugin name, reason)`` for every plugin that was considered.
    :param hint: the last line: how to fix it.
    """

    def __init__(self, operation: str, reasons: Sequence[tuple[str, str]], hint: str = "") -> None:
        self.operation = operation
        self.reasons = tuple(reasons)
        lines = [f"no usable backend for {operation}:"]
        lines += [f"  - {name}: {reason}" for name, reason in self.reasons] or ["  (no plugins are installed)"]
        lines.append(hint or f"Fix: `{install_command()}` installs the NumPy backend, which always runs; "
                     "check SPACR_ACCEL_BACKENDS / SPACR_ACCEL_DISABLE and `spacr-accel doctor`.")
        super().__init__("\n".join(lines))
