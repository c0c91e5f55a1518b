"""The machine as the probers answer it, cached once per process: :func:`resolve` (the device
spaCR computes on), :func:`inspect_torch`, :func:`neural_engines`, :func:`host_devices`, and the
cache's locks (renewed in a forked child). Public through :mod:`spacr_accel_core.accelerator`;
Cellpose's arguments and the memory report read the device from here.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

from ..contract._errors import describe as _describe
from ..contract._records import Accelerator, HostDevice
from ..dispatch._bounded import STUCK as _STUCK
from ..dispatch._bounded import bounded as _bounded
from ..dispatch._settings import probe_timeout as _probe_timeout
from ._probers import _WARNED, _cpu, _engine_names, _hookimpls, _NoPlugins, _pending, _stale, _walk, _warn_once

logger = logging.getLogger("spacr_accel_core.accelerator")  # the name users filter on: this is the accelerator's body

# ---- resolution ----------------------------------------------------------------------------


class _Cache:
    """The process's answers. Resolved once: probing costs a CUDA context on some drivers, and the
    answer cannot change inside a process (until :func:`spacr_accel_core.refresh`)."""

    __slots__ = ("accelerator", "engines", "engines_pending", "hosts", "hosts_pending", "pending")

    def __init__(self) -> None:
        self.accelerator: Accelerator | None = None
        # Work abandoned while producing the cached answer: once it has all finished, the answer
        # is asked again (see _stale). Written before the answer it belongs to, read after it.
        self.pending: tuple[threading.Event, ...] = ()
        self.engines: tuple[str, ...] | None = None
        self.engines_pending: tuple[threading.Event, ...] = ()
        self.hosts: tuple[HostDevice, ...] | None = None
        self.hosts_pending: tuple[threading.Event, ...] = ()


_LOCK = threading.Lock()
_HOST_LOCK = threading.Lock()
_CACHE = _Cache()


def resolve(refresh: bool = False) -> Accelerator:
    """The accelerator spaCR will use. Cached; never raises.

    The first call walks the probers (each bounded by :data:`ENV_PROBE_TIMEOUT`); every later call
    is one global read. Thread-safe: concurrent first calls probe once and share the answer.

    An answer given because discovery or a probe timed out is cached too, but only until the
    abandoned work finishes: the first call after that walks again, so a slow laptop whose cold
    ``import torch`` overran the bound once is not left on the CPU for the whole process, while a
    probe that really hangs (and so never finishes) costs the bound once.

    :param refresh: probe again instead of answering from the cache. For tests, which fake the
        probes.
    :returns: the accelerator; the CPU, with a note, whenever nothing better is usable.
    """
    found = _CACHE.accelerator
    if found is not None and not refresh and not (_CACHE.pending and _stale(_CACHE.pending)):
        return found
    return _resolve_locked(refresh)


def _resolve_locked(refresh: bool) -> Accelerator:
    with _LOCK:
        found = _CACHE.accelerator
        if found is None or refresh or _stale(_CACHE.pending):
            found, pending = _walk(None, device_names=True, include_cuda=True)
            logger.debug("accelerator resolved to %s (%s)", found.device, found.label)
            _CACHE.pending = pending
            _CACHE.accelerator = found
        return found


def _forget() -> None:
    """Drop the cached accelerator and neural engines (:func:`spacr_accel_core.refresh`)."""
    with _LOCK:
        _CACHE.accelerator = None
        _CACHE.pending = ()
        _CACHE.engines = None
        _CACHE.engines_pending = ()
        _CACHE.hosts = None
        _CACHE.hosts_pending = ()
        _WARNED.clear()
        if _STUCK.done is not None and _STUCK.done.is_set():
            _STUCK.done = None


def forget() -> None:
    """Forget the chosen accelerator, so the next :func:`resolve` probes again.

    For a worker process that has just narrowed what it may see (``CUDA_VISIBLE_DEVICES`` set to
    its own card after it started): the parent's answer names a device the worker no longer has.
    Unlike :func:`spacr_accel_core.refresh` the plugins are not discovered again. Never raises.
    """
    _forget()


@contextlib.contextmanager
def override(found: Accelerator) -> Iterator[Accelerator]:
    """Make :func:`resolve` (and everything built on it) answer ``found`` inside a ``with`` block.

    The public way for a test, or a setup screen's preview, to show what a machine it is not
    running on would report: ``capabilities()``, ``describe()``, ``cellpose_kwargs()`` and the
    other shorthands all answer from ``found``. Process-wide (the answer is the process's), and
    the previous answer is restored on leaving, whatever happened inside.

    :param found: the accelerator to answer; typically built by the test, or returned by
        :func:`inspect_torch` for a stand-in torch.
    :raises TypeError: ``found`` is not an :class:`Accelerator`.
    """
    if not isinstance(found, Accelerator):
        raise TypeError(f"override() found must be an Accelerator, not {type(found).__name__}")
    with _LOCK:
        saved = (_CACHE.accelerator, _CACHE.pending)
        _CACHE.accelerator, _CACHE.pending = found, ()
    try:
        yield found
    finally:
        with _LOCK:
            _CACHE.accelerator, _CACHE.pending = saved


def inspect_torch(torch: Any, *, device_names: bool = True, include_cuda: bool = True) -> Accelerator:
    """Resolve against a SPECIFIC torch module, without touching the cache.

    For callers that already hold a torch handle and must be answered about that one: the doctor
    imports torch through its own indirection so the diagnosis can be exercised against a
    stand-in, and a cached answer about the real machine would defeat that entirely. Same probes
    and same order as :func:`resolve`, so the two cannot drift. This function does not allocate
    dtype-probe tensors: ``float64`` and ``bfloat16`` are the backend's declared support.

    :param torch: torch module whose availability metadata should be inspected.
    :param device_names: ``False`` avoids CUDA/XPU property queries that can initialise their
        runtime. Availability queries still run.
    :param include_cuda: ``False`` skips CUDA/ROCm entirely, for a process whose environment
        deliberately hides those devices. Other backends remain eligible.
    :returns: accelerator described by the supplied torch module.
    """
    if torch is None:
        return _cpu("no torch module was given to inspect")
    return _walk(torch, bool(device_names), bool(include_cuda))[0]


# ---- what the machine can do ---------------------------------------------------------------


def neural_engines() -> tuple[str, ...]:
    """Inference silicon that is present and that spaCR will NOT use.

    Reported so the setup slide can say "found, not used" rather than leaving a user to wonder why
    their Neural Engine is idle. There is no portable torch device for any of these (the ANE is
    reachable only through CoreML, Intel's AI Boost only through OpenVINO), so naming one as a
    compute device would be a promise nothing behind it can keep. Gathered from every plugin's
    ``spacr_accel_neural_engines`` hook (a string, or an iterable of strings; other entries are
    dropped with a warning, and a plugin that fails while answering or being read contributes
    nothing); cached like :func:`resolve`, time-outs included. Never raises.
    """
    engines = _CACHE.engines
    if engines is None or _stale(_CACHE.engines_pending):
        try:
            engines, pending = _gather_engines()
        except Exception as exc:  # the plugins are guarded one by one; this keeps the promise regardless
            logger.warning("could not gather the neural engines: %s", _describe(exc))
            return ()
        with _LOCK:
            _CACHE.engines_pending = pending
            _CACHE.engines = engines
    return engines


def _each_plugins_list(hook: str, read: Any, what: str, kind: str) -> tuple[list[Any], tuple[threading.Event, ...]]:
    """Every plugin's list for ``hook``, each read by ``read`` under the probe bound; a plugin that
    overruns, raises or lists entries of the wrong kind is warned about once and loses only those.

    :param read: ``read(function) -> (good, refused)``, run in the bounded thread.
    :param what: the list in words, for the warnings (``"neural engines"``).
    :param kind: what a good entry is, for the warning about the others (``"strings"``).
    """
    timeout = _probe_timeout()
    impls = _hookimpls(hook, timeout)
    if isinstance(impls, _NoPlugins):
        return [], impls.pending
    found: list[Any] = []
    pending: list[threading.Event] = []
    for name, function in impls:
        outcome = _bounded(functools.partial(read, function), timeout, f"{what} {name}")
        if outcome.timed_out:
            pending += _pending(outcome)
            _warn_once(hook, name, "timeout", "plugin %r did not list its %s within %s s", name, what, timeout)
            continue
        if outcome.error is not None:
            _warn_once(hook, name, "error", "plugin %r could not list %s: %s", name, what, _describe(outcome.error))
            continue
        good, refused = outcome.value
        if refused:
            _warn_once(hook, name, "entry", "plugin %r listed %s that are not %s: %r; ignored",
                       name, what, kind, refused[:3])
        found += good
    return found, tuple(pending)


def _gather_engines() -> tuple[tuple[str, ...], tuple[threading.Event, ...]]:
    names, pending = _each_plugins_list("spacr_accel_neural_engines", _engine_names, "neural engines", "strings")
    return tuple(dict.fromkeys(names)), pending


def host_devices() -> tuple[HostDevice, ...]:
    """The GPUs and NPUs present here, as the operating system lists them, plus what plugins add.

    "Detected" comes from here, "usable" from the framework: a card listed here that
    :func:`resolve` does not use is a card torch cannot reach (a CPU-only wheel, a driver too
    old), and the report says so instead of calling the machine GPU-less. The core's own source is
    the OS inventory (Linux sysfs, macOS ``system_profiler``, the Windows registry); every
    ``spacr_accel_host_devices`` hook adds its own, each under the probe bound (a plugin that
    raises, overruns or answers something that is not a :class:`HostDevice` contributes nothing,
    with one WARNING). Nothing here initialises a device or imports a vendor library. Cached like
    :func:`resolve` (``refresh()`` forgets it); never raises.
    """
    hosts = _CACHE.hosts
    if hosts is None or _stale(_CACHE.hosts_pending):
        try:
            hosts, pending = _gather_hosts()
        except Exception as exc:  # each source is guarded already; this keeps the promise regardless
            logger.warning("could not list the host devices: %s", _describe(exc))
            return ()
        # Not under _LOCK: the torch prober asks for the host devices while resolve() holds it.
        with _HOST_LOCK:
            _CACHE.hosts_pending = pending
            _CACHE.hosts = hosts
    return hosts


def _host_entries(function: Any) -> tuple[list[HostDevice], list[object]]:
    """One plugin's records, read in the bounded thread: the good ones and the refused."""
    answer = function()
    good: list[HostDevice] = []
    refused: list[object] = []
    for entry in answer if answer is not None else ():
        (good if isinstance(entry, HostDevice) else refused).append(entry)
    return good, refused


def _gather_hosts() -> tuple[tuple[HostDevice, ...], tuple[threading.Event, ...]]:
    from ._host import os_devices  # local: the inventory is read only when asked

    found: list[HostDevice] = list(os_devices())
    added, pending = _each_plugins_list("spacr_accel_host_devices", _host_entries, "host devices",
                                        "HostDevice records")
    for device in added:
        # The same card seen by the OS and by a plugin is one card: same address, or same
        # vendor and name where either lacks an address.
        if not any(_same_device(device, known) for known in found):
            found.append(device)
    return tuple(found), pending


def _same_device(one: HostDevice, other: HostDevice) -> bool:
    if one.address and other.address:
        return one.address == other.address
    return (one.vendor, one.name, one.kind) == (other.vendor, other.name, other.kind)


def _after_fork_in_child() -> None:
    """Give a forked child fresh locks.

    A lock held by another thread at the moment of ``fork()`` stays held forever in the child,
    where that thread does not exist; spaCR forks workers through multiprocessing on Linux, so a
    worker's first ``resolve()`` would deadlock. The child's cache is a copy of the parent's and
    stays valid: a walk the parent had in progress simply never completed in the child, which then
    walks on its own.
    """
    global _LOCK, _HOST_LOCK  # noqa: PLW0603  (the module's locks are replaced, not mutated: that is the fix)
    _LOCK = threading.Lock()
    _HOST_LOCK = threading.Lock()
    # Work the parent abandoned (a timed-out probe or discovery) has no thread in the child, so
    # its "done" event would never be set: forget it, and any answer that was waiting on it.
    _STUCK.done, _STUCK.bound = None, None
    if _CACHE.pending:
        _CACHE.accelerator, _CACHE.pending = None, ()
    if _CACHE.engines_pending:
        _CACHE.engines, _CACHE.engines_pending = None, ()
    if _CACHE.hosts_pending:
        _CACHE.hosts, _CACHE.hosts_pending = None, ()


if hasattr(os, "register_at_fork"):  # POSIX only; Windows has no fork to survive
    os.register_at_fork(after_in_child=_after_fork_in_child)
