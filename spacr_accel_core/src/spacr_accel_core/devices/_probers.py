"""The prober walk: asking every ``spacr_accel_probe`` plugin, best first, and judging the answers.

The core knows no vendor: this module only walks what the plugins say, bounds each question
(:mod:`._bounded`), and turns a missing, broken or slow prober into a CPU answer with a note. The
cache of the answer, and the public functions built on it, are in :mod:`.accelerator`.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from ..contract._errors import describe as _describe
from ..contract._errors import first_line as _first_line
from ..contract._install import install_command
from ..contract._records import KINDS, Accelerator
from ..dispatch._bounded import Outcome as _Outcome
from ..dispatch._bounded import bounded as _bounded
from ..dispatch._bounded import discovering, discovery_note
from ..dispatch._registry import REGISTRY
from ..dispatch._settings import ENV_DEVICE, ENV_PROBE_TIMEOUT, device_text
from ..dispatch._settings import probe_timeout as _probe_timeout

logger = logging.getLogger(__name__)


CPU_WORDS: Final = frozenset({"cpu", "none", "off", "0", "false", "no"})
"""Values of :data:`ENV_DEVICE` that force the CPU. The core honours them before any prober runs,
so a machine whose driver hangs when asked can still be told to leave it alone."""

_NAMED: Final = re.compile(r"([a-z]+)(?::(\d+))?")
"""A device named the way torch spells one: a family, then optionally ``:`` and an index."""


@dataclass(frozen=True)
class DeviceRequest:
    """What :data:`ENV_DEVICE` asks for, read one way by the core and by every backend.

    The core honours only the CPU words (before any prober runs); which families a name may
    take is each backend's to judge (torch drives ``cuda``, ``rocm``, ``mps``, ``xpu`` and
    ``directml``; CuPy only ``cuda``), so an unknown family is parsed here, not refused.

    :param text: the value as the user wrote it, stripped (``""`` when unset): what a note quotes.
    :param cpu: the value is one of :data:`CPU_WORDS` (any case): the CPU is forced.
    :param auto: unset, empty or ``auto`` (any case): the device is chosen by probing.
    :param family: the lower-case name of a ``family[:N]`` value (``"cuda"`` for ``CUDA:1``);
        ``None`` for the CPU words, ``auto``, and a value of no such shape (``cuda:x``).
    :param index: the ``N`` of ``family:N``; ``None`` when the value gives none.
    """

    text: str
    cpu: bool
    auto: bool
    family: str | None
    index: int | None


def device_request() -> DeviceRequest:
    """:data:`ENV_DEVICE` as it is set now, parsed (read at every call: a test or a user may change it)."""
    return parse_device(device_text())


def parse_device(value: str) -> DeviceRequest:
    """A value of :data:`ENV_DEVICE`, parsed.

    :param value: the value as set (surrounding blanks and case do not matter).
    """
    text = value.strip()
    lowered = text.lower()
    cpu = lowered in CPU_WORDS
    auto = lowered in ("", "auto")
    match = None if cpu or auto else _NAMED.fullmatch(lowered)
    family = match.group(1) if match is not None else None
    index = int(match.group(2)) if match is not None and match.group(2) is not None else None
    return DeviceRequest(text, cpu, auto, family, index)


def _cpu(note: str = "") -> Accelerator:
    return Accelerator(kind="cpu", device="cpu", label="CPU", note=note)




@dataclass(frozen=True)
class _NoPlugins:
    """Why the plugins implementing a hook could not be had."""

    note: str
    pending: tuple[threading.Event, ...] = ()
    """Set once the abandoned discovery has finished (empty when nothing was abandoned)."""


def _hookimpls(hook: str, timeout: float | None) -> tuple[tuple[str, Callable[..., Any]], ...] | _NoPlugins:
    """The plugins implementing ``hook`` best first, or why they could not be had.

    Discovery imports every plugin, so it is bounded like a probe: a plugin whose import hangs
    must not hang the accelerator.
    """
    outcome = discovering(lambda: REGISTRY.hookimpls(hook), timeout, "plugin discovery")
    if outcome.timed_out:
        return _NoPlugins(discovery_note(outcome), _pending(outcome))
    if outcome.error is not None:
        return _NoPlugins(f"plugin discovery failed: {_describe(outcome.error)}")
    found: tuple[tuple[str, Callable[..., Any]], ...] = outcome.value
    return found


def _pending(outcome: _Outcome) -> tuple[threading.Event, ...]:
    return (outcome.pending,) if outcome.pending is not None else ()


def _stale(pending: tuple[threading.Event, ...]) -> bool:
    """Whether an answer cached because work timed out can be asked again: all of it has finished.

    Work that never finishes (a hung driver) keeps its answer for the process, so a real hang
    costs the bound once; work that was merely slow gets asked again once it is done.
    """
    return bool(pending) and all(done.is_set() for done in pending)


_WARNED: set[tuple[str, str, str]] = set()


def _warn_once(hook: str, plugin: str, problem: str, message: str, *args: object) -> None:
    """A WARNING the first time a plugin misbehaves in a given way, DEBUG afterwards.

    ``capabilities()`` and ``empty_cache()`` are not cached, so a broken plugin would otherwise
    repeat its warning on every call. :func:`spacr_accel_core.refresh` forgets what was said.
    """
    key = (hook, plugin, problem)
    level = logging.DEBUG if key in _WARNED else logging.WARNING
    _WARNED.add(key)
    logger.log(level, message, *args)



def _malformed(answer: Accelerator) -> str | None:
    if answer.kind not in KINDS:
        return f"kind {answer.kind!r} is not one of {KINDS}"
    if answer.usable and not answer.detected:
        return "answered usable=True for hardware it did not detect"
    return None


def _off_device(answer: Accelerator) -> Accelerator:
    """A detected-but-unusable answer as the report keeps it: found, and running on the CPU."""
    return replace(answer, device="cpu", float64=True, autocast=True, fallback=False, bfloat16=True)


_Walked = tuple[Accelerator, tuple[threading.Event, ...]]
"""An answer, and the work abandoned on the way to it (see :func:`_stale`)."""


def _walk(torch: Any, device_names: bool, include_cuda: bool) -> _Walked:
    """Ask every prober, best first; never raises."""
    try:
        forced = device_request()
        if forced.cpu:
            return _cpu(f"forced by {ENV_DEVICE}={forced.text}"), ()
        timeout = _probe_timeout()
        probers = _hookimpls("spacr_accel_probe", timeout)
        if isinstance(probers, _NoPlugins):
            return _cpu(probers.note), probers.pending
        if not probers:
            blocked = REGISTRY.blocked()
            if blocked:
                return _cpu(f"no device prober is loaded: SPACR_ACCEL_DISABLE blocks {', '.join(blocked)}"), ()
            return _cpu(f"no device prober is installed (`{install_command('torch')}` adds one)"), ()
        kwargs = {"torch": torch, "device_names": device_names, "include_cuda": include_cuda}
        return _ask(probers, kwargs, timeout)
    except Exception as exc:  # the promise is "never raises", so the walk itself is guarded too
        logger.warning("accelerator resolution failed: %s", _describe(exc), exc_info=True)
        return _cpu(f"accelerator resolution failed: {_describe(exc)}"), ()


def _ask(probers: tuple[tuple[str, Callable[..., Any]], ...], kwargs: Mapping[str, Any],
         timeout: float | None) -> _Walked:
    """The first usable answer; else the first detected one; else the CPU with every reason."""
    notes: list[tuple[str, str, bool]] = []
    unusable: Accelerator | None = None
    for name, function in probers:
        outcome = _bounded(functools.partial(function, **kwargs), timeout, f"probe {name}")
        if outcome.timed_out:
            logger.warning("the %r device probe did not answer within %s s; abandoned it", name, timeout)
            return _cpu(f"the {name!r} device probe did not answer within {timeout:g} s and was "
                        f"abandoned (raise {ENV_PROBE_TIMEOUT} if this machine is just slow)"), _pending(outcome)
        answer, problem = _judge(name, outcome)
        if problem:
            expected = isinstance(outcome.error, RuntimeError) or (
                outcome.error is None and isinstance(outcome.value, Accelerator)
                and not _malformed(outcome.value))
            notes.append((name, problem, expected))
        if answer is None:
            continue
        if answer.usable:
            return answer, ()
        if answer.detected and unusable is None:
            unusable = _off_device(answer)
    if unusable is not None:
        return unusable, ()
    return _cpu(_nothing_found(notes)), ()


def _nothing_found(notes: list[tuple[str, str, bool]]) -> str:
    """The CPU's note when no prober found anything: each prober's reason, plainly.

    One expected reason reads ``no accelerator found: PyTorch is not installed``; several, or a
    prober that broke, name their prober: ``no accelerator found: torch: ...; other: ...``.

    :param notes: ``(prober name, reason, expected)``; ``expected`` is False for a prober that
        raised something other than a ``RuntimeError`` or answered malformed.
    """
    if not notes:
        return "no accelerator found"
    if len(notes) == 1 and notes[0][2]:
        return f"no accelerator found: {notes[0][1]}"
    return "no accelerator found: " + "; ".join(f"{name}: {problem}" for name, problem, _ in notes)


def _judge(name: str, outcome: _Outcome) -> tuple[Accelerator | None, str]:
    """One prober's answer if it is well formed, and what to say about it otherwise."""
    if outcome.error is not None:
        # RuntimeError is a prober's "not here" (torch missing, no device); anything else is a
        # prober that broke while being ASKED, which is the half-installed case.
        level = logging.DEBUG if isinstance(outcome.error, RuntimeError) else logging.WARNING
        logger.log(level, "the %r device probe raised %s", name, _describe(outcome.error))
        # The expected "not here" reads as its message; a broken prober keeps its class name.
        return None, (_first_line(outcome.error) if isinstance(outcome.error, RuntimeError)
                      else _describe(outcome.error))
    answer = outcome.value
    if answer is None:
        return None, ""
    if not isinstance(answer, Accelerator):
        problem = f"returned {type(answer).__name__}, not an Accelerator"
    else:
        problem = _malformed(answer) or ""
        if not problem:
            if answer.usable or answer.detected:
                return answer, ""  # a detected answer carries its own note
            return None, answer.note  # nothing found, but perhaps a reason worth reporting
    logger.warning("the %r device probe %s; ignored", name, problem)
    return None, problem



def _engine_names(function: Callable[..., Any]) -> tuple[list[str], list[object]]:
    """One plugin's whole contribution, read in the bounded thread: names kept, entries refused.

    Raises whatever the plugin, or iterating its answer, raises (a generator may fail half way):
    the caller then drops the contribution whole rather than keeping half of it.
    """
    answer = function()
    if answer is None:
        return [], []
    entries: Iterable[object] = (answer,) if isinstance(answer, str) else answer
    names: list[str] = []
    refused: list[object] = []
    for entry in entries:
        if not isinstance(entry, str):
            refused.append(entry)
        elif entry.strip():
            names.append(str(entry).strip())  # str(): a numpy str_ is a str, but should not leak out
    return names, refused



def _capability_rows(function: Callable[..., Any], found: Accelerator
                     ) -> tuple[list[tuple[str, bool, str]], list[object]]:
    """One plugin's rows, read in the bounded thread: the ``(str, bool, str)`` triples, and the rest.

    Raises whatever the plugin, or iterating its answer, raises; the caller drops it whole.
    """
    answer = function(found=found)
    rows: list[tuple[str, bool, str]] = []
    refused: list[object] = []
    for row in answer if answer is not None else ():
        if (isinstance(row, tuple | list) and len(row) == 3 and isinstance(row[0], str)
                and isinstance(row[1], bool) and isinstance(row[2], str)):
            rows.append((str(row[0]), bool(row[1]), str(row[2])))
        else:
            refused.append(row)
    return rows, refused


