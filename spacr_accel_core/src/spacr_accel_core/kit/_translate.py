"""A primitive's work with a library's errors put in the contract's words: what every device
backend's hookimpls share (torch's and CuPy's), written once. Imports nothing of the core."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

_T = TypeVar("_T")


@contextmanager
def translated_errors(translate: Callable[[BaseException, str], BaseException], what: str) -> Iterator[None]:
    """The body's exception replaced by ``translate``'s answer.

    A device library says "out of memory" or "the driver went away" in its own exception types
    (CuPy's out-of-memory is a :class:`MemoryError`); dispatch understands only the contract's
    (:class:`~spacr_accel_core.BackendOutOfMemory`, :class:`~spacr_accel_core.BackendUnavailable`).
    An exception ``translate`` returns unchanged is raised as it was: not the device's, a fault.

    WHY A ``with`` BLOCK. The hook calls its own primitive inside it (``with translated_errors(...):
    return primitive(...)``): the fields go from the hook to the primitive directly, never through
    the kit and back (as :func:`call_translated`, handed the primitive, takes them).

    :param translate: ``translate(exc, what)``: the contract's exception for ``exc``, or ``exc``.
    :param what: the operation, for the message (``"maximum_filter"``).
    """
    try:
        yield
    except Exception as exc:
        translated = translate(exc, what)
        if translated is exc:
            raise
        raise translated from exc


def call_translated(translate: Callable[[BaseException, str], BaseException], what: str,
                    work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)``, with an exception it raises replaced by ``translate``'s answer
    (:func:`translated_errors` around one call, for a hook that hands its primitive over).

    A device library says "out of memory" or "the driver went away" in its own exception types
    (CuPy's out-of-memory is a :class:`MemoryError`); dispatch understands only the contract's
    (:class:`~spacr_accel_core.BackendOutOfMemory`, :class:`~spacr_accel_core.BackendUnavailable`).
    An exception ``translate`` returns unchanged is raised as it was: not the device's, a fault.

    :param translate: ``translate(exc, what)``: the contract's exception for ``exc``, or ``exc``.
    :param what: the operation, for the message (``"maximum_filter"``).
    :param work: the primitive.
    :param args: its arguments.
    """
    with translated_errors(translate, what):
        return work(*args)
