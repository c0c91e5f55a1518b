"""One answer to "what should this run on, and what is it called".

spaCR grew up on NVIDIA, so roughly forty-five call sites ask ``torch.cuda.is_available()`` and
most of them mean "is there a GPU?". Those are DIFFERENT QUESTIONS on every machine that is not
NVIDIA, and conflating them is what makes a perfectly good card read as "no GPU":

* ROCm answers ``torch.cuda.is_available()`` **True** and wants ``device="cuda"``. Code that then
  prints "CUDA" is naming a vendor that is not there; code that prints "no NVIDIA GPU" is denying
  one that is.
* Apple's Metal answers it **False** and wants ``device="mps"``. MPS is *Metal*, not an
  Apple-Silicon feature: on an Intel iMac it drives an AMD Radeon Pro 5300 (measured 16x on conv2d
  inference against the same machine's CPU), and ROCm has no macOS build, so Metal is the ONLY
  route to an AMD card on a Mac.

So this module answers both questions separately, and a third that matters more than either: what
is this device UNABLE to do? On Metal, float64 raises ``TypeError``, ``autocast`` raises
``RuntimeError`` and some operators are missing; each is reported as a field of
:class:`Accelerator` so a caller branches instead of crashing.

DETECTED AND USABLE ARE REPORTED SEPARATELY. A setup screen announcing an accelerator spaCR will
never dispatch to is worse than one that says nothing, because the user then blames their hardware
for CPU speed. Neural engines (the Apple Neural Engine, Intel AI Boost, Qualcomm Hexagon) are real
silicon with no portable torch device, so they are named as FOUND and never selected.

NOTHING HERE RAISES, AND NOTHING HERE HANGS. A half-installed ROCm, a broken driver, a torch whose
import itself fails, a probe that never answers: all resolve to the CPU with a note. The machines
most likely to have a strange accelerator are the least able to afford a traceback at import time.

HOW IT IS BUILT. This module knows no vendor and never imports one at import time. The probing
lives in plugins (``spacr_accel_probe`` hookimpls; the torch distribution ships the CUDA, ROCm,
Metal, XPU and DirectML one), walked best first by plugin priority: the first usable answer wins,
and a detected-but-unusable one is kept for the report when nothing better turns up.
:func:`resolve` passes ``torch=None`` so each prober imports its own library; :func:`inspect_torch`
passes the module to ask, so the two run the same probes in the same order and cannot drift.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import platform
import re
import threading
from collections.abc import Iterator
from typing import Any

from ._bounded import DEFAULT_PROBE_TIMEOUT, ENV_PROBE_TIMEOUT, call_bounded
from ._bounded import STUCK as _STUCK
from ._bounded import bounded as _bounded
from ._bounded import discovering as _discovering
from ._bounded import discovery_note as _discovery_note
from ._bounded import probe_timeout as _probe_timeout
from ._errors import describe as _describe
from ._probers import (
    _WARNED,
    CPU_WORDS,
    ENV_DEVICE,
    DeviceRequest,
    _capability_rows,
    _cpu,
    _engine_names,
    _hookimpls,
    _NoPlugins,
    _pending,
    _stale,
    _walk,
    _warn_once,
    device_request,
    parse_device,
)
from ._records import KINDS, Accelerator, HostDevice
from ._tasks import _PRIMITIVES, SPACR_TASKS, _backdrop_row, _cuml_row, _model_rows, _primitive_rows

__all__ = [
    "CPU_WORDS",
    "DEFAULT_PROBE_TIMEOUT",
    "ENV_DEVICE",
    "ENV_PROBE_TIMEOUT",
    "KINDS",
    "SPACR_TASKS",
    "Accelerator",
    "DeviceMemory",
    "DeviceRequest",
    "HostDevice",
    "autocast_device_type",
    "call_bounded",
    "capabilities",
    "cellpose_gpu",
    "cellpose_kwargs",
    "describe",
    "device_request",
    "device_string",
    "empty_cache",
    "forget",
    "host_devices",
    "inspect_torch",
    "is_cuda",
    "is_gpu",
    "memory",
    "neural_engines",
    "override",
    "parse_device",
    "resolve",
    "supports_autocast",
    "supports_bfloat16",
    "supports_float64",
    "torch_device",
]

logger = logging.getLogger(__name__)

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


def _plugin_rows(found: Accelerator) -> list[tuple[str, bool, str]]:
    timeout = _probe_timeout()
    hook = "spacr_accel_capabilities"
    impls = _hookimpls(hook, timeout)
    if isinstance(impls, _NoPlugins):
        return []
    rows = []
    for name, function in impls:
        # A plugin's row is a courtesy: its failure, or its hang, must not cost ours.
        outcome = _bounded(functools.partial(_capability_rows, function, found), timeout,
                           f"capabilities {name}")
        if outcome.timed_out:
            _warn_once(hook, name, "timeout", "plugin %r did not report capabilities within %s s",
                       name, timeout)
            continue
        if outcome.error is not None:
            _warn_once(hook, name, "error", "plugin %r failed to report capabilities: %s",
                       name, _describe(outcome.error))
            continue
        good, refused = outcome.value
        for row in refused:
            _warn_once(hook, name, f"row {row!r:.200}", "plugin %r gave a capability row that is not a "
                       "(str, bool, str) triple: %r; ignored", name, row)
        rows += good
    return rows


def capabilities(found: Accelerator | None = None) -> tuple[tuple[str, bool, str], ...]:
    """``(task, accelerated, detail)`` for what this machine can actually do.

    WHAT THE SETUP SCREEN IS FOR. "Compatible GPU" on its own answers a question nobody asked:
    users want to know whether THE SLOW STEP will be slow. So this reports per task, and it reports
    the truth per backend rather than one verdict for all of them: on Metal the segmentation and
    the classifier are accelerated while the cuML reductions are not, and a single green tick would
    be a lie about the second.

    THE FIRST FIVE ROWS ARE spaCR's OWN, in its words and order (:data:`SPACR_TASKS`): its setup
    screen and README generator match on them. Then this project's: the three primitives name
    the backend that will run each (from the registry) and why the ones above it will not; plugins
    append rows through the ``spacr_accel_capabilities`` hook. Segmentation leads because it is
    what the acceleration is worth most to: 444 s for one 256x256 image on an Intel iMac's CPU,
    3.2 s on its AMD Radeon Pro 5300 under Metal. Never raises.

    :param found: optional existing accelerator snapshot. Providing it avoids another resolution
        (and its dtype-probe allocations) when the caller already holds the answer, as the
        doctor does.
    :returns: task, accelerated flag and explanation for each capability.
    """
    if not isinstance(found, Accelerator):
        found = resolve()
    rows = _model_rows(found)
    rows.append(_backdrop_row(platform.system(), os.environ,
                              sum(1 for device in host_devices() if device.kind == "gpu")))
    rows.append(_cuml_row(found))
    ranked = _discovering(_primitive_rows, _probe_timeout(), "backend ranking")
    if ranked.timed_out:  # the registry queues behind a discovery that has not finished
        rows += [(task, False, f"unknown: {_discovery_note(ranked)}") for _, task in _PRIMITIVES]
    elif ranked.error is not None:  # the registry is guarded itself; this keeps the promise regardless
        logger.warning("could not rank the backends for the capabilities: %s", _describe(ranked.error))
    else:
        rows += ranked.value
    try:
        rows += _plugin_rows(found)
    except Exception as exc:  # belt and braces: _plugin_rows guards each plugin already
        logger.warning("could not gather plugin capabilities: %s", _describe(exc))
    return tuple(rows)


def describe() -> str:
    """One line for a log or a console: what was found and whether it runs.

    Written for a person: no exception class names (the prober's reason is shown as its message)
    and no parentheses inside parentheses, e.g. ``CPU (no accelerator found: PyTorch is not
    installed)``. The doctor keeps the full detail.
    """
    found = resolve()
    note = _one_level(found.note)
    if found.is_gpu:
        line = f"{found.label} (in use)"
    elif found.detected and found.kind != "cpu":
        line = f"{found.label}: found, not used" + (f" ({note})" if note else "")
    else:
        line = "CPU" + (f" ({note})" if note else "")
    engines = neural_engines()
    if engines:
        line += f"; found, not used: {', '.join(engines)}"
    return line


_PARENTHESIS = re.compile(r"\s*\(([^()]*)\)")


def _one_level(note: str) -> str:
    """A note without parentheses of its own, so ``describe`` can put it in one pair.

    ``abandoned (raise X if slow)`` reads ``abandoned, raise X if slow``; innermost first, so a
    note nested twice still comes out flat.

    :param note: an :class:`Accelerator` note.
    """
    previous = None
    while previous != note:
        previous, note = note, _PARENTHESIS.sub(r", \1", note)
    return note


# ---- the shorthands call sites actually want -----------------------------------------------


def torch_device() -> Any:
    """``torch.device`` for the resolved accelerator.

    The direct replacement for ``torch.device("cuda:0" if torch.cuda.is_available() else "cpu")``.
    """
    return resolve().torch_device


def device_string() -> str:
    """The resolved device as a string, e.g. ``"cuda:0"``, ``"mps"``."""
    return resolve().device


def is_gpu() -> bool:
    """Is there a usable accelerator of any vendor.

    What a call site means when it writes ``torch.cuda.is_available()`` to decide whether to use a
    GPU at all.
    """
    return resolve().is_gpu


def is_cuda() -> bool:
    """Is the resolved accelerator genuinely NVIDIA CUDA.

    For the places that legitimately need CUDA specifically: memory interrogation, ``nvidia-smi``
    advice, CUDA version reporting.
    """
    return resolve().is_cuda


def supports_float64() -> bool:
    """Whether double precision may be sent to the device."""
    return resolve().float64


def supports_bfloat16() -> bool:
    """Whether ``torch.bfloat16`` tensors may be put on the device."""
    return resolve().bfloat16


def supports_autocast() -> bool:
    """Whether ``torch.autocast`` accepts this device type.

    Answered for the accelerator only: on the CPU this is ``False`` even though torch accepts
    ``autocast("cpu")``, because bfloat16 on a CPU is usually emulated and slower than float32
    (the same reason Cellpose gets float32 weights there).
    """
    found = resolve()
    return found.is_gpu and found.autocast


def autocast_device_type() -> str | None:
    """The string for ``torch.autocast(device_type=...)``, or None.

    None means "do not use mixed precision here", which is a different answer from "use it on the
    CPU" and has to stay distinguishable. ROCm answers ``"cuda"``: it is torch's CUDA device type.
    """
    found = resolve()
    if not (found.is_gpu and found.autocast):
        return None
    return "cuda" if found.kind in ("cuda", "rocm") else found.device.split(":")[0]


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


# Defined in their own modules (each reads resolve() from here), public here.
from ._cellpose import cellpose_gpu, cellpose_kwargs  # noqa: E402  (they import resolve from this module)
from ._memory import DeviceMemory, empty_cache, memory  # noqa: E402  (likewise)
