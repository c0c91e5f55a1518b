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

import functools
import logging
import os
import platform
import re
from typing import Any

from .contract._errors import describe as _describe
from .contract._records import KINDS, Accelerator, HostDevice
from .devices._cellpose import cellpose_gpu, cellpose_kwargs
from .devices._machine import (
    forget,
    host_devices,
    inspect_torch,
    neural_engines,
    override,
    resolve,
)
from .devices._memory import DeviceMemory, empty_cache, memory
from .devices._probers import (
    CPU_WORDS,
    DeviceRequest,
    _capability_rows,
    _hookimpls,
    _NoPlugins,
    _warn_once,
    device_request,
    parse_device,
)
from .devices._tasks import SPACR_TASKS, _backdrop_row, _cuml_row, _model_rows, _primitive_rows, primitive_tasks
from .dispatch._bounded import bounded as _bounded
from .dispatch._bounded import call_bounded
from .dispatch._bounded import discovering as _discovering
from .dispatch._bounded import discovery_note as _discovery_note
from .dispatch._settings import DEFAULT_PROBE_TIMEOUT, ENV_DEVICE, ENV_PROBE_TIMEOUT
from .dispatch._settings import probe_timeout as _probe_timeout

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
    screen and README generator match on them. Then this project's: the operations name
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
        rows += [(task, False, f"unknown: {_discovery_note(ranked)}") for _, task in primitive_tasks()]
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
