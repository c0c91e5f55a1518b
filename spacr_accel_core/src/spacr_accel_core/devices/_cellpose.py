"""What Cellpose is told about the device: three arguments that must agree, and a workaround.

Part of :mod:`spacr_accel_core.accelerator` (re-exported there); kept apart because it is about one
consumer, Cellpose, and its versions.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import logging
import os
import re
import threading
from typing import Any

from . import _machine

logger = logging.getLogger(__name__)


class _Patch:
    applied = False  # set once _keep_cellpose_flows_off_metal has run


_PATCH = _Patch()
_FLOW_PATCH_LOCK = threading.Lock()


def _resolve() -> Any:
    return _machine.resolve()


def cellpose_gpu() -> bool:
    """What to pass cellpose as ``gpu=``.

    Cellpose does its own device resolution and already knows about MPS: ``assign_device(gpu=True)``
    answers ``mps`` on a Metal machine. What it cannot do is guess, so it must be TOLD there is a
    GPU. Passing ``torch.cuda.is_available()`` here pins a Mac to the CPU when no explicit device
    is supplied. An explicit Cellpose device takes precedence.
    """
    found = _resolve()
    if found.kind == "mps" and found.usable:
        _keep_cellpose_flows_off_metal()
    return bool(found.is_gpu)


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
    found = _resolve()
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
        if _PATCH.applied:
            return
        _PATCH.applied = True
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




def _after_fork_in_child() -> None:
    global _FLOW_PATCH_LOCK  # noqa: PLW0603  (a lock another thread held at the fork is replaced)
    _FLOW_PATCH_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_after_fork_in_child)
