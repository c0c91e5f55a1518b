"""Device memory: free and total per device, and handing the driver back what it caches (part of
:mod:`spacr_accel_core.accelerator`, re-exported there)."""

from __future__ import annotations

import functools
import logging
import sys
from dataclasses import dataclass
from typing import Any

from ..contract._errors import describe as _describe
from ..contract._records import Accelerator
from ..dispatch._bounded import bounded as _bounded
from ..dispatch._settings import probe_timeout as _probe_timeout
from . import _machine
from ._probers import _hookimpls, _NoPlugins, _warn_once

logger = logging.getLogger(__name__)


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
        found = _machine.resolve()
        rows: list[DeviceMemory] = []
        if found.is_gpu:
            rows.append(_torch_memory(found))
        for device in _machine.host_devices():
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
            if _machine._CACHE.accelerator is None and "torch" not in sys.modules:
                return ""  # never resolved, torch never imported: no device memory to hand back
            found = _machine.resolve()
        else:
            found = _machine.inspect_torch(torch_module, device_names=False)
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
