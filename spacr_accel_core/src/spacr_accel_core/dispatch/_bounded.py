"""How a call into a plugin, a driver or a library is bounded in time: the one home of that rule.

A thread cannot be killed, so a call that hangs (a driver that never answers, a plugin whose
``spacr_accel_backend_info`` waits for ever) is ABANDONED, not stopped: it stays blocked in a
daemon thread, which never holds the interpreter open at exit, and whatever it returns later is
ignored. That is the only portable way to bound a call into a driver. The registry bounds each
plugin's self-description with it; the accelerator bounds every probe; plugins bound their own
driver queries with :func:`call_bounded`.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..contract._errors import BackendUnavailable, describe
from ._settings import ENV_PROBE_TIMEOUT, probe_timeout

_T = TypeVar("_T")

logger = logging.getLogger(__name__)

@dataclass
class Outcome:
    """What a bounded call produced; filled in by the worker thread."""

    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    pending: threading.Event | None = None
    """On a time-out: set once the abandoned work has finished."""
    bound: float | None = None
    """On a time-out: the seconds waited, for the note."""


def start(work: Callable[[], Any], what: str) -> tuple[Outcome, threading.Event]:
    """Start ``work`` in a daemon thread; the event is set when it has finished.

    ``work`` runs in a copy of the caller's context, so what is context-local (the backend order
    of :func:`spacr_accel_core.use`) is what the caller sees, not a new thread's empty context.
    Every exception but :class:`KeyboardInterrupt` is recorded for the caller (a plugin's
    ``sys.exit()`` included); an interrupt belongs to the main thread, not to a worker's outcome.
    """
    outcome = Outcome()
    done = threading.Event()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome.value = context.run(work)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # recorded for the caller; SystemExit from an import included
            outcome.error = exc
        finally:
            done.set()

    try:
        threading.Thread(target=run, name=f"spacr-accel {what}", daemon=True).start()
    except RuntimeError:  # no thread to be had (interpreter shutting down): run it here, unbounded
        run()
    return outcome, done


def bounded(work: Callable[[], Any], timeout: float | None, what: str) -> Outcome:
    """Run ``work`` in a daemon thread and wait at most ``timeout`` seconds for it.

    :param work: the call to bound.
    :param timeout: seconds, or ``None`` to wait forever.
    :param what: what it is, for the thread's name.
    """
    outcome, done = start(work, what)
    if not done.wait(timeout):
        return Outcome(timed_out=True, pending=done, bound=timeout)
    return outcome


class Stuck:
    """Registry work abandoned past its bound and not yet finished, if any.

    Discovery builds the registry under the registry's lock, so while an abandoned discovery is
    still running every other registry query would queue behind it and wait out a bound of its
    own. Remembering it lets those answer at once ("did not finish") until it is done.
    """

    __slots__ = ("bound", "done")

    def __init__(self) -> None:
        self.done: threading.Event | None = None
        self.bound: float | None = None


STUCK = Stuck()


def discovering(work: Callable[[], Any], timeout: float | None, what: str) -> Outcome:
    """Run a registry query (which may have to discover the plugins first) under ``timeout``.

    While a discovery abandoned earlier is still running, answers a time-out at once instead of
    waiting again: a process whose plugin import hangs pays the bound once, not once per query.
    """
    done, bound = STUCK.done, STUCK.bound
    if done is not None and not done.is_set():
        return Outcome(timed_out=True, pending=done, bound=bound)
    outcome = bounded(work, timeout, what)
    if outcome.timed_out:
        STUCK.done, STUCK.bound = outcome.pending, outcome.bound
    return outcome


def discovery_note(outcome: Outcome) -> str:
    """What a registry query that timed out says: discovery is what hangs behind it."""
    return (f"plugin discovery did not finish within {outcome.bound:g} s and was abandoned "
            f"(raise {ENV_PROBE_TIMEOUT} if this machine is just slow)")


def call_bounded(work: Callable[[], _T], what: str) -> _T:
    """Run ``work`` under the bound the core puts on a probe (:data:`ENV_PROBE_TIMEOUT`).

    For plugins whose ``spacr_accel_backend_info`` must ask a driver whether a device is there: a
    hung driver then makes the plugin unusable, with a note, instead of hanging discovery.

    :param work: the call into the driver or library.
    :param what: what it is, for the message ("the cupy device count").
    :returns: what ``work`` returned.
    :raises RuntimeError: ``work``'s own ``RuntimeError``, unchanged (a plugin's "not here").
    :raises BackendUnavailable: ``work`` did not answer in time, or raised anything else
        (an ``ImportError``, a ``SystemExit`` from a broken import), chained to it.
    """
    timeout = probe_timeout()
    outcome = bounded(work, timeout, what)
    if outcome.timed_out:
        raise BackendUnavailable(f"{what} did not answer within {timeout:g} s "
                                 f"(raise {ENV_PROBE_TIMEOUT} if this machine is just slow)")
    error = outcome.error
    if isinstance(error, RuntimeError):
        raise error
    if error is not None:
        raise BackendUnavailable(f"{what} failed: {describe(error)}") from error
    value: _T = outcome.value
    return value
