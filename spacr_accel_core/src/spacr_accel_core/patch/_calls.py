"""One patched call: served or handed to spaCR, counted, and in check mode compared with spaCR's own.

A seam never takes a call down. Whatever goes wrong on the way to the registry's answer (a backend
that every plugin declines, an argument the registry refuses) becomes a pass-through with that
reason, and spaCR's own function answers, raising spaCR's own errors for spaCR's own bad input.
Only the two modes a user asks for raise: ``check`` on a difference, ``strict`` on a pass-through.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._answers import first_difference
from ._outcome import PassThrough
from ._report import Tally

__all__ = ["Modes", "PatchMismatch", "make_wrapper"]

LOG = logging.getLogger("spacr_accel_core.patch")


class PatchMismatch(AssertionError):
    """A patched call's answer differs from spaCR's own (``check``), or a call could not be served
    (``strict``). The message names the seam, the arguments' shapes and dtypes and what differed."""


@dataclass
class Modes:
    """What the patch does besides serving: ``check`` runs spaCR's own function beside every served
    call and compares; ``strict`` raises where a call would go to spaCR; ``report`` prints the
    report at exit."""

    check: bool = False
    strict: bool = False
    report: bool = False


def _describe(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    def one(value: Any) -> str:
        if isinstance(value, np.ndarray):
            return f"{value.dtype}{list(value.shape)}"
        text = repr(value)
        return text if len(text) <= 40 else f"{type(value).__name__}(...)"

    return ", ".join([*(one(value) for value in args), *(f"{key}={one(value)}" for key, value in kwargs.items())])


_IN_REFERENCE: contextvars.ContextVar[bool] = contextvars.ContextVar("spacr_accel_patch_reference", default=False)
"""Set while ``check`` runs spaCR's own function as the reference: every seam reached from it then
calls spaCR's original at once (not served, not counted, not checked), so the reference is spaCR's
code throughout. A context variable, so another thread's calls meanwhile are served as usual."""

_GENERATORS = (np.random.Generator, np.random.BitGenerator, np.random.RandomState)
"""The stateful random sources a spaCR call may draw from (``seed=`` takes any of them)."""

_DEPTH = 3
"""How deep :func:`_fork` and :func:`_one_shot` look into plain lists, tuples and dicts."""


def _one_shot(value: Any, depth: int = _DEPTH) -> str | None:
    """The type of the first one-shot iterator in ``value`` (itself, or inside plain containers)."""
    if isinstance(value, Iterator):
        return type(value).__name__
    if depth and type(value) in (list, tuple):
        return next(filter(None, (_one_shot(item, depth - 1) for item in value)), None)
    if depth and type(value) is dict:
        return next(filter(None, (_one_shot(item, depth - 1) for item in value.values())), None)
    return None


def _fork(value: Any, copies: dict[int, tuple[Any, Any]], depth: int = _DEPTH) -> Any:
    """``value`` with every random generator in it replaced by a copy (the same copy for the same
    generator), recorded in ``copies`` as ``id -> (caller's, copy)``; everything else as given."""
    if isinstance(value, _GENERATORS):
        if id(value) not in copies:
            copies[id(value)] = (value, copy.deepcopy(value))
        return copies[id(value)][1]
    if depth and type(value) in (list, tuple):
        items = [_fork(item, copies, depth - 1) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else type(value)(items)
    if depth and type(value) is dict:
        forked = {key: _fork(item, copies, depth - 1) for key, item in value.items()}
        return value if all(forked[key] is item for key, item in value.items()) else forked
    return value


def _state(generator: Any) -> Any:
    if isinstance(generator, np.random.Generator):
        return generator.bit_generator.state
    if isinstance(generator, np.random.RandomState):
        return generator.get_state(legacy=False)
    return generator.state


def _generator_difference(copies: dict[int, tuple[Any, Any]]) -> str | None:
    for caller, served in copies.values():
        if first_difference(_state(served), _state(caller)) is not None:
            return f"the served call left a {type(caller).__name__} in another state than spaCR's own draws leave it"
    return None


_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("spacr_accel_patch_quiet", default=False)
"""Set while ``check`` runs the served call: what spaCR's loggers record in this context is dropped
(spaCR's own reference records it once, for the caller)."""


class _QuietInContext(logging.Filter):
    """Drops a record made in a context where :data:`_QUIET` is set; every other thread's pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _QUIET.get()


_QUIET_FILTER = _QuietInContext()
_quiet_lock = threading.Lock()
_quiet_loggers: list[logging.Logger] = []  # the loggers holding the filter while a served call is checked
_quiet_count = [0]


@contextlib.contextmanager
def _served_quietly() -> Iterator[None]:
    """The served call of a check: its warnings recorded and dropped, and the records of spaCR's
    loggers (``spacr`` and below: spaCR warns through both) made in this context dropped.

    ``warnings.catch_warnings`` is the interpreter's one way to take a call's warnings; before
    Python 3.14 it is process-wide, so a warning another thread raises meanwhile is dropped with
    them (check mode is a diagnostic run). The loggers' filter is per context: it is on spaCR's
    loggers only while some check's served call runs, and passes every other thread's records.
    """
    with _quiet_lock:
        _quiet_count[0] += 1
        if _quiet_count[0] == 1:
            _quiet_loggers[:] = [logger for name, logger in logging.Logger.manager.loggerDict.items()
                               if (name == "spacr" or name.startswith("spacr.")) and isinstance(logger, logging.Logger)]
            for logger in _quiet_loggers:
                logger.addFilter(_QUIET_FILTER)
    token = _QUIET.set(True)
    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")  # recorded, never shown: no warning registry is marked
            yield
    finally:
        _QUIET.reset(token)
        with _quiet_lock:
            _quiet_count[0] -= 1
            if _quiet_count[0] == 0:
                for logger in _quiet_loggers:
                    logger.removeFilter(_QUIET_FILTER)
                _quiet_loggers.clear()


def _exception(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"


@dataclass(frozen=True)
class _Seam:
    """What one seam's replacement closes over.

    :param name: the seam's report name.
    :param serve: its way of serving (its row's ``serve`` in :mod:`._table`).
    :param original: spaCR's own function.
    :param context: the extra keywords the way is given.
    :param tally: the report's counters.
    :param modes: the modes in force (read at each call: ``install`` sets them anew).
    """

    name: str
    serve: Callable[..., tuple[Any, str]]
    original: Callable[..., Any]
    context: dict[str, Any]
    tally: Tally
    modes: Modes


def _passed(seam: _Seam, reason: str, started: float, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """spaCR's own function answers (``strict`` raises instead), counted with ``reason``."""
    if seam.modes.strict:
        raise PatchMismatch(f"{seam.name}({_describe(args, kwargs)}) could not be served: {reason}")
    LOG.debug("spacr-accel patch: %s passed to spaCR's own: %s", seam.name, reason)
    try:
        return seam.original(*args, **kwargs)
    finally:  # counted even when spaCR refuses its own bad input
        seam.tally.passed(seam.name, reason, time.perf_counter() - started)


def _checked(seam: _Seam, started: float, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``check``: served on copies of the caller's random generators, its warnings and spaCR's log
    records dropped; then spaCR's own function on the caller's own objects, with every seam it reaches
    going straight to spaCR (:data:`_IN_REFERENCE`). The caller gets spaCR's warnings once and its
    generators in the state spaCR's own draws leave them; the served call must match the answer,
    the generators' states, and spaCR's raising (docs/decisions.md)."""
    one_shot = _one_shot((args, kwargs))
    if one_shot is not None:  # only spaCR's own may read it, and only once
        return _passed(seam, f"a one-shot {one_shot} among the arguments (check runs spaCR's own alone)",
                       started, args, kwargs)
    copies: dict[int, tuple[Any, Any]] = {}
    served_args, served_kwargs = _fork(args, copies), _fork(kwargs, copies)
    try:
        with _served_quietly():  # the reference's warnings and log records are the ones the caller sees
            answer, backend = seam.serve(*served_args, **served_kwargs, **seam.context)
    except PassThrough as why:
        return _passed(seam, str(why), started, args, kwargs)
    except Exception as error:  # a seam never takes a call down: spaCR answers
        LOG.debug("spacr-accel patch: %s could not be served", seam.name, exc_info=True)
        return _passed(seam, _exception(error)[:120], started, args, kwargs)
    token = _IN_REFERENCE.set(True)
    try:
        expected = seam.original(*args, **kwargs)
    except Exception as error:
        raise PatchMismatch(f"{seam.name}({_describe(args, kwargs)}): served an answer where spaCR's own "
                            f"raises {_exception(error)}") from error
    finally:
        _IN_REFERENCE.reset(token)
    found = first_difference(answer, expected) or _generator_difference(copies)
    if found:
        raise PatchMismatch(f"{seam.name}({_describe(args, kwargs)}): {found}")
    seam.tally.served(seam.name, backend, time.perf_counter() - started)
    return answer


def make_wrapper(tally: Tally, modes: Modes) -> Callable[..., Callable[..., Any]]:
    """The installer's ``wrap``: one seam's replacement from its way of serving and spaCR's original."""

    def wrap(name: str, serve: Callable[..., tuple[Any, str]], original: Callable[..., Any],
             context: dict[str, Any]) -> Callable[..., Any]:
        seam = _Seam(name, serve, original, context, tally, modes)

        def patched(*args: Any, **kwargs: Any) -> Any:
            if _IN_REFERENCE.get():  # inside check's reference: spaCR's own code throughout
                return original(*args, **kwargs)
            started = time.perf_counter()
            if modes.check:
                return _checked(seam, started, args, kwargs)
            try:
                answer, backend = seam.serve(*args, **kwargs, **context)
            except PassThrough as why:
                reason = str(why)
            except Exception as error:  # a seam never takes a call down: spaCR answers
                reason = _exception(error)[:120]
                LOG.debug("spacr-accel patch: %s could not be served", name, exc_info=True)
            else:
                tally.served(name, backend, time.perf_counter() - started)
                return answer
            return _passed(seam, reason, started, args, kwargs)

        functools.update_wrapper(patched, original)
        return patched

    return wrap
