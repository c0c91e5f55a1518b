"""One primitive call with a library's errors put in the contract's words: the loop every device
backend's hookimpls share (torch's and CuPy's), written once. Imports nothing of the core."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")


def call_translated(translate: Callable[[BaseException, str], BaseException], what: str,
                    work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)``, with an exception it raises replaced by ``translate``'s answer.

    A device library says "out of memory" or "the driver went away" in its own exception types
    (CuPy's out-of-memory is a :class:`MemoryError`); dispatch understands only the contract's
    (:class:`~spacr_accel_core.BackendOutOfMemory`, :class:`~spacr_accel_core.BackendUnavailable`).
    An exception ``translate`` returns unchanged is raised as it was: not the device's, a fault.

    :param translate: ``translate(exc, what)``: the contract's exception for ``exc``, or ``exc``.
    :param what: the operation, for the message (``"maximum_filter"``).
    :param work: the primitive.
    :param args: its arguments.
    """
    try:
        return work(*args)
    except Exception as exc:
        translated = translate(exc, what)
        if translated is exc:
            raise
        raise translated from exc
