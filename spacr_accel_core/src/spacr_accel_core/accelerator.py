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
import importlib
import importlib.metadata
import logging
import os
import platform
import re
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
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

logger = logging.getLogger("spacr_accel_core.accelerator")

# ---- resolution ----------------------------------------------------------------------------


class _Cache:
    """The process's answers. Resolved once: probing costs a CUDA context on some drivers, and the
    answer cannot change inside a process (until :func:`spacr_accel_core.refresh`)."""

    __slots__ = ("accelerator", "engines", "engines_pending", "flow_patch_applied", "hosts", "hosts_pending",
                 "pending")

    def __init__(self) -> None:
        self.accelerator: Accelerator | None = None
        # Work abandoned while producing the cached answer: once it has all finished, the answer
        # is asked again (see _stale). Written before the answer it belongs to, read after it.
        self.pending: tuple[threading.Event, ...] = ()
        self.engines: tuple[str, ...] | None = None
        self.engines_pending: tuple[threading.Event, ...] = ()
        self.flow_patch_applied = False  # set once _keep_cellpose_flows_off_metal has run
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


def _gather_engines() -> tuple[tuple[str, ...], tuple[threading.Event, ...]]:
    timeout = _probe_timeout()
    hook = "spacr_accel_neural_engines"
    impls = _hookimpls(hook, timeout)
    if isinstance(impls, _NoPlugins):
        return (), impls.pending
    found: dict[str, None] = {}
    pending: list[threading.Event] = []
    for name, function in impls:
        outcome = _bounded(functools.partial(_engine_names, function), timeout, f"neural engines {name}")
        if outcome.timed_out:
            pending += _pending(outcome)
            _warn_once(hook, name, "timeout", "plugin %r did not list its neural engines within %s s",
                       name, timeout)
            continue
        if outcome.error is not None:
            _warn_once(hook, name, "error", "plugin %r could not list neural engines: %s",
                       name, _describe(outcome.error))
            continue
        names, refused = outcome.value
        if refused:
            _warn_once(hook, name, "entry", "plugin %r listed neural engines that are not strings: %r; "
                       "ignored", name, refused[:3])
        found.update(dict.fromkeys(names))
    return tuple(found), tuple(pending)


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
    timeout = _probe_timeout()
    hook = "spacr_accel_host_devices"
    impls = _hookimpls(hook, timeout)
    pending: list[threading.Event] = []
    if isinstance(impls, _NoPlugins):
        return tuple(found), impls.pending
    for name, function in impls:
        outcome = _bounded(functools.partial(_host_entries, function), timeout, f"host devices {name}")
        if outcome.timed_out:
            pending += _pending(outcome)
            _warn_once(hook, name, "timeout", "plugin %r did not list its host devices within %s s",
                       name, timeout)
            continue
        if outcome.error is not None:
            _warn_once(hook, name, "error", "plugin %r could not list host devices: %s",
                       name, _describe(outcome.error))
            continue
        good, refused = outcome.value
        if refused:
            _warn_once(hook, name, "entry", "plugin %r listed host devices that are not HostDevice "
                       "records: %r; ignored", name, refused[:3])
        for device in good:
            # The same card seen by the OS and by a plugin is one card: same address, or same
            # vendor and name where either lacks an address.
            if not any(_same_device(device, known) for known in found):
                found.append(device)
    return tuple(found), tuple(pending)


def _same_device(one: HostDevice, other: HostDevice) -> bool:
    if one.address and other.address:
        return one.address == other.address
    return (one.vendor, one.name, one.kind) == (other.vendor, other.name, other.kind)


@dataclass(frozen=True)
class DeviceMemory:
    """Free and total memory of one device, in bytes; ``None`` where it cannot be known.

    :param device: the torch device string (``"cuda:0"``), or the host device's address or name
        when only the operating system knows the card.
    :param name: what the user recognises (``"NVIDIA GeForce RTX 4090"``).
    :param free: bytes free now, ``None`` when unknown (a card torch does not use, Metal).
    :param total: bytes in all, ``None`` when unknown.
    :param source: where the numbers came from (``"torch.accelerator"``, ``"torch.cuda"``,
        ``"sysfs"``), so a surprising figure can be checked.
    """

    device: str
    name: str
    free: int | None
    total: int | None
    source: str = ""


def memory() -> tuple[DeviceMemory, ...]:
    """Free and total memory per device: the one in use, then the other cards the OS lists.

    NEVER INITIALISES A DEVICE THAT DISCOVERY WOULD NOT, and never imports torch: the device in
    use is asked through torch only when :func:`resolve` chose it as usable (its kernel check has
    already created the context) and torch is already imported. ``torch.accelerator.get_memory_info``
    answers where torch has it, ``torch.cuda``/``torch.xpu.mem_get_info`` otherwise, and Metal
    reports its recommended working set as the total (it has no "free"). Other cards get what
    the OS reports without a vendor library (AMD's VRAM size), else ``None``. Never raises.
    """
    try:
        found = resolve()
        rows: list[DeviceMemory] = []
        if found.is_gpu:
            rows.append(_torch_memory(found))
        for device in host_devices():
            if found.is_gpu and found.name and device.name == found.name and len(rows) == 1:
                continue  # the card in use is already reported, with torch's figures
            rows.append(DeviceMemory(device.address or device.name, device.name, None, device.memory_total,
                                     "sysfs" if device.memory_total is not None else ""))
        return tuple(rows)
    except Exception as exc:  # the promise is "never raises"
        logger.debug("memory() failed: %s", _describe(exc))
        return ()


def _torch_memory(found: Accelerator) -> DeviceMemory:
    """The usable device's memory through the torch the process already imported."""
    name = found.name or found.label
    torch = sys.modules.get("torch")
    if torch is None:
        return DeviceMemory(found.device, name, None, None)
    index = int(found.device.split(":")[1]) if ":" in found.device else 0
    attempts: list[tuple[str, Any]] = [("torch.accelerator",
                                        getattr(getattr(torch, "accelerator", None), "get_memory_info", None))]
    family = {"cuda": "cuda", "rocm": "cuda", "xpu": "xpu"}.get(found.kind)
    if family:
        attempts.append((f"torch.{family}", getattr(getattr(torch, family, None), "mem_get_info", None)))
    for source, query in attempts:
        if query is None:
            continue
        try:
            free, total = query(index)
            return DeviceMemory(found.device, name, int(free), int(total), source)
        except Exception as exc:  # an older torch, or a backend without the query: try the next
            logger.debug("%s could not report memory: %s", source, _describe(exc))
    if found.kind == "mps":
        try:
            return DeviceMemory(found.device, name, None, int(torch.mps.recommended_max_memory()), "torch.mps")
        except Exception as exc:
            logger.debug("torch.mps could not report memory: %s", _describe(exc))
    return DeviceMemory(found.device, name, None, None)


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


def cellpose_gpu() -> bool:
    """What to pass cellpose as ``gpu=``.

    Cellpose does its own device resolution and already knows about MPS: ``assign_device(gpu=True)``
    answers ``mps`` on a Metal machine. What it cannot do is guess, so it must be TOLD there is a
    GPU. Passing ``torch.cuda.is_available()`` here pins a Mac to the CPU when no explicit device
    is supplied. An explicit Cellpose device takes precedence.
    """
    found = resolve()
    if found.kind == "mps" and found.usable:
        _keep_cellpose_flows_off_metal()
    return found.is_gpu


def cellpose_kwargs() -> dict[str, Any]:
    """Consistent device and weight precision for CellposeModel inference.

    THREE ARGUMENTS THAT HAVE TO AGREE, which is why they are produced together rather than spelled
    out at six call sites:

    * ``gpu``: controls Cellpose's selection when no explicit device is supplied, including callers
      that deliberately drop ``device`` below.
    * ``device``: from the one resolver, so cellpose and spaCR cannot disagree about the same
      machine; an explicit device takes precedence.
    * ``use_bfloat16``: cpsam loads its weights in bfloat16 by default and Metal on torch 2.2 has no
      bfloat16, so the default is ``TypeError: BFloat16 is not supported on MPS`` at construction.
      float32 weights work there and cost VRAM, the right trade for a card that otherwise sits
      idle. CPU inference also uses float32: bfloat16 support does not imply native arithmetic, and
      emulation can be substantially slower. float32 arithmetic need not produce identical
      predictions to bfloat16.

    Callers that pass ``device=None`` on purpose (letting cellpose resolve it) should take ``gpu``
    and ``use_bfloat16`` from here and drop ``device``.

    ONLY WHAT THE INSTALLED CELLPOSE ACCEPTS: ``use_bfloat16`` arrived with Cellpose 4 (cpsam), and
    Cellpose 3's ``CellposeModel`` raises ``TypeError`` on it, so it is left out below 4. The
    version is read from the installed distribution's metadata, without importing Cellpose (which
    imports torch); with no Cellpose installed, all three are given (the current Cellpose's set).

    :returns: ``{"gpu": bool, "device": torch.device, "use_bfloat16": bool}``, without
        ``use_bfloat16`` for Cellpose older than 4.
    """
    found = resolve()
    if found.kind == "mps" and found.usable:
        _keep_cellpose_flows_off_metal()
    kwargs: dict[str, Any] = {"gpu": found.is_gpu, "device": found.torch_device}
    major = _cellpose_major()
    if major is None or major >= 4:
        kwargs["use_bfloat16"] = found.is_gpu and found.bfloat16
    return kwargs


def _cellpose_major() -> int | None:
    """The installed Cellpose's major version from its metadata, or None when it is not installed."""
    try:
        version = importlib.metadata.version("cellpose")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None
    match = re.match(r"\s*v?(\d+)", version)
    return int(match.group(1)) if match else None


_FLOW_PATCH_LOCK = threading.Lock()


def _keep_cellpose_flows_off_metal() -> None:
    """Run cellpose's flow-error pass on the CPU when the device is Metal.

    A NARROW WORKAROUND FOR AN UPSTREAM BUG, stated precisely because monkeypatching someone
    else's library needs a removal condition. ``cellpose.dynamics.masks_to_flows_gpu`` computes an
    index one past the end on MPS (``IndexError: index 256 is out of bounds for axis 1 with size
    256``), reproduced on a 256x256 image of ordinary round blobs that segments correctly on the CPU.

    WHAT IS AND IS NOT MOVED. Only ``remove_bad_flow_masks`` goes back to the CPU: it is
    post-processing over a finished mask, its own signature already defaults to the CPU, and it is
    cheap. The network, which is essentially all of the runtime, stays on Metal.

    TO REMOVE THIS: segment with a Metal device on a cellpose that has fixed the indexing, and
    delete the function. It is idempotent, a no-op without cellpose, and never raises: a cellpose
    whose internals have moved leaves spaCR on the working path it already had.
    """
    with _FLOW_PATCH_LOCK:
        if _CACHE.flow_patch_applied:
            return
        _CACHE.flow_patch_applied = True
        try:
            dynamics = importlib.import_module("cellpose.dynamics")
        except BaseException:  # no cellpose, or one whose import breaks: nothing to patch
            logger.debug("cellpose is not importable; no flow-error workaround needed", exc_info=True)
            return
        try:
            original = getattr(dynamics, "remove_bad_flow_masks", None)
            if original is None or getattr(original, "_spacr_cpu_flows", False):
                return

            def on_the_cpu(masks: Any, flows: Any, threshold: float = 0.4, device: Any = None,
                           **extra: Any) -> Any:
                """Run Cellpose flow-error filtering on the CPU for Metal.

                :param masks: label masks forwarded unchanged to Cellpose.
                :param flows: flow field forwarded unchanged to Cellpose.
                :param threshold: flow-error threshold forwarded to Cellpose.
                :param device: ignored compatibility argument; the wrapped call always receives
                    ``torch.device("cpu")``.
                :param extra: any newer keyword Cellpose passes, forwarded unchanged.
                :returns: the original ``remove_bad_flow_masks`` return value.
                """
                del device  # ignored on purpose: the whole point is to override it
                cpu = importlib.import_module("torch").device("cpu")
                return original(masks, flows, threshold=threshold, device=cpu, **extra)

            functools.update_wrapper(on_the_cpu, original)
            on_the_cpu.__doc__ = original.__doc__
            setattr(on_the_cpu, "_spacr_cpu_flows", True)  # noqa: B010  (mypy rejects a plain attribute on a function)
            setattr(dynamics, "remove_bad_flow_masks", on_the_cpu)  # noqa: B010  (mypy cannot see cellpose's module attributes)
            logger.debug("cellpose flow-error pass pinned to the CPU (Metal indexing bug)")
        except Exception:  # a cellpose whose internals moved: leave it as it is
            logger.debug("could not apply the cellpose flow-error workaround", exc_info=True)


def empty_cache(torch_module: Any = None) -> str:
    """Hand the driver back whatever this backend caches. Never raises.

    Freeing memory must not cost an ``import torch``: without ``torch_module``, when the
    accelerator was never resolved and nothing imported torch, nothing can have been cached, so
    this answers ``""`` at once, importing nothing and probing nothing.

    :param torch_module: ask about THIS torch instead of the cached answer for the machine. A
        resource-cleanup caller holding its own handle deliberately does not import torch just to
        free memory, and a cached global would send the call to the wrong backend when that handle
        is a stand-in.
    :returns: the call that was made (e.g. ``"torch.cuda.empty_cache()"``, the line a user can look
        up), or ``""`` when there was nothing to release.
    """
    try:
        if torch_module is None:
            if _CACHE.accelerator is None and "torch" not in sys.modules:
                return ""  # never resolved, torch never imported: no device memory to hand back
            found = resolve()
        else:
            found = inspect_torch(torch_module, device_names=False)
        if not found.is_gpu:
            return ""
        hook = "spacr_accel_empty_cache"
        impls = _hookimpls(hook, _probe_timeout())
        if isinstance(impls, _NoPlugins):
            return ""
        timeout = _probe_timeout()
        for name, function in impls:
            # Bounded like a probe: a driver that hangs while freeing memory must not hang the
            # caller, and a plugin's SystemExit is caught with the rest.
            outcome = _bounded(
                functools.partial(function, torch=torch_module, found=found),
                timeout, f"empty_cache {name}")
            if outcome.timed_out or outcome.error is not None:
                why = "timed out" if outcome.timed_out else _describe(outcome.error)  # type: ignore[arg-type]  # error is set when not timed out
                _warn_once(hook, name, "error", "plugin %r failed to empty its cache: %s", name, why)
                continue
            made = outcome.value
            if isinstance(made, str) and made:
                return made
        return ""
    except Exception as exc:  # the promise is "never raises"
        logger.debug("empty_cache failed: %s", _describe(exc))
        return ""


def _after_fork_in_child() -> None:
    """Give a forked child fresh locks.

    A lock held by another thread at the moment of ``fork()`` stays held forever in the child,
    where that thread does not exist; spaCR forks workers through multiprocessing on Linux, so a
    worker's first ``resolve()`` would deadlock. The child's cache is a copy of the parent's and
    stays valid: a walk the parent had in progress simply never completed in the child, which then
    walks on its own.
    """
    global _LOCK, _FLOW_PATCH_LOCK, _HOST_LOCK  # noqa: PLW0603  (the module's locks are replaced, not mutated: that is the fix)
    _LOCK = threading.Lock()
    _HOST_LOCK = threading.Lock()
    _FLOW_PATCH_LOCK = threading.Lock()
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
