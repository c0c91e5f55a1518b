"""Device plumbing the three torch primitives share: where to run, how much room, what went wrong.

WHY TILES AND A FLOOR. The card is shared ("this one also runs structure prediction"), so the room
a primitive measured at its start may be gone half-way through a plate. Every primitive therefore
works in tiles (rows of a field, rows of a point set) sized from the memory that is free NOW, and a
tile that runs out of memory is retried at half its size from where it stopped, down to a floor;
only then does the primitive give up with :class:`~spacr_accel_core.BackendOutOfMemory`, which the
dispatcher reads as "try the next backend", never as "fail the plate".

WHY TRANSLATE. torch reports a driver that went away, a kernel image missing for this card or a
ROCm runtime error as a bare ``RuntimeError``; only the ones that are the DEVICE's fault become
:class:`~spacr_accel_core.BackendUnavailable`. Any other error (a shape bug in this package) stays
what it is, so it is not mistaken for a busy card.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spacr_accel_core import BackendOutOfMemory, BackendUnavailable

if TYPE_CHECKING:
    import torch

__all__ = ["Device", "budget", "is_out_of_memory", "release", "target", "tiled", "translate"]

_OOM_WORDS = re.compile(r"out of memory|can't allocate memory|cannot allocate memory", re.IGNORECASE)
# Messages torch passes through from a vendor runtime: the device's fault, not this package's.
_DEVICE_WORDS = re.compile(
    r"CUDA error|CUDA driver|CUDA-capable|cudaError|CUDA kernel errors|no kernel image|"
    r"device-side assert|HIP error|hipError|CUBLAS_STATUS|CUDNN_STATUS|cuSOLVER|cuFFT|NCCL|"
    r"Torch not compiled with|Found no NVIDIA driver|no CUDA GPUs|MPS backend|"
    r"Placeholder storage has not been allocated|XPU|Level Zero|UR_RESULT|privateuseone",
)

_CPU_BUDGET = 64 << 20
"""Working set of one pass on the CPU: big enough that per-op overhead vanishes, small enough to
stay near the caches and far from a laptop's memory ceiling."""
_DEVICE_FRACTION = 0.4
"""Share of the device's free memory one pass may take: the rest is left to the tensors a pass
creates besides its main buffer and to whoever else shares the card."""
_DEVICE_CAP = 16 << 30
"""No single pass needs more; a bigger one only delays the first out-of-memory retry."""


@dataclass(frozen=True)
class Device:
    """Where a primitive runs, and what it may send there.

    :param torch: the torch device.
    :param float64: the device accepts double precision (Metal does not: it raises TypeError).
    """

    torch: torch.device
    float64: bool

    @property
    def is_cpu(self) -> bool:
        """The CPU, where tiles are sized for the caches rather than for device memory."""
        return self.torch.type == "cpu"


def target() -> Device:
    """The device the resolved accelerator names, whatever it is (the CPU included).

    "usable" only governs automatic dispatch: a call forced with ``backend="torch"`` runs on
    whatever :func:`spacr_accel_core.accelerator.resolve` answers, the CPU on a machine without
    a card. SPACR_DEVICE is honoured there, not here.

    :raises BackendUnavailable: torch is not importable, or cannot address that device.
    """
    try:
        import torch
    except Exception as exc:  # an ImportError, or a broken wheel raising anything at import
        raise BackendUnavailable(
            f"torch is not importable ({type(exc).__name__}: {exc}); `pip install spacr-accel[torch]`"
        ) from exc
    from spacr_accel_core.accelerator import resolve

    found = resolve()
    try:
        device = torch.device(found.device)
    except (RuntimeError, ValueError) as exc:
        raise BackendUnavailable(f"torch cannot address device {found.device!r}: {exc}") from exc
    return Device(device, device.type == "cpu" or bool(found.float64))


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says the device (or the host, for the CPU device) ran out of memory."""
    if isinstance(exc, MemoryError):
        return True
    try:
        import torch
    except ImportError:  # pragma: no cover - only reached after torch raised, so it imports
        return False
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    return isinstance(exc, RuntimeError) and bool(_OOM_WORDS.search(str(exc)))


def translate(exc: BaseException, what: str) -> BaseException:
    """The contract's exception for a library error, or ``exc`` itself when it is not the device's.

    :param exc: what torch raised.
    :param what: the operation, for the message.
    """
    if isinstance(exc, (BackendOutOfMemory, BackendUnavailable)):
        return exc
    if is_out_of_memory(exc):
        return BackendOutOfMemory(f"torch {what}: the device is out of memory: {_first_line(exc)}")
    if isinstance(exc, RuntimeError) and _DEVICE_WORDS.search(str(exc)):
        return BackendUnavailable(f"torch {what}: the device failed: {_first_line(exc)}")
    if isinstance(exc, TypeError) and "float64" in str(exc):
        # Metal's answer to a double: a hard stop, and a property of the device, not a bug here.
        return BackendUnavailable(f"torch {what}: the device refused double precision: {_first_line(exc)}")
    return exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def release(device: Device) -> None:
    """Hand cached blocks back to the driver, so a smaller retry (or another job) can have them."""
    import torch

    kind = device.torch.type
    # Best effort: a driver too broken to empty its cache fails the retry instead, with its reason.
    with contextlib.suppress(Exception):
        if kind == "cuda":
            torch.cuda.empty_cache()
        elif kind == "mps":
            torch.mps.empty_cache()
        elif kind == "xpu":
            torch.xpu.empty_cache()


def free_bytes(device: Device) -> int | None:
    """Memory the device can still give, or ``None`` where torch cannot say."""
    import torch

    kind = device.torch.type
    try:
        if kind == "cuda":
            free, _total = torch.cuda.mem_get_info(device.torch)
            # Blocks torch's caching allocator holds but no tensor uses are ours to reuse.
            cached = torch.cuda.memory_reserved(device.torch) - torch.cuda.memory_allocated(device.torch)
            return int(free) + max(0, int(cached))
        if kind == "xpu" and hasattr(torch.xpu, "mem_get_info"):
            free, _total = torch.xpu.mem_get_info(device.torch)
            return int(free)
        if kind == "mps":
            limit = int(torch.mps.recommended_max_memory())
            return max(0, limit - int(torch.mps.driver_allocated_memory()))
    except Exception:  # a query the runtime does not support: fall back to the cap
        return None
    return None


def budget(device: Device) -> int:
    """Bytes one pass of a primitive may use on ``device`` now (the room measured, not assumed)."""
    override = os.environ.get("SPACR_ACCEL_TORCH_PASS_BYTES")
    if override:
        try:
            return max(1 << 16, int(override))
        except ValueError:
            pass
    if device.is_cpu:
        return _CPU_BUDGET
    free = free_bytes(device)
    if free is None:
        return 1 << 30
    return int(max(1 << 20, min(_DEVICE_CAP, free * _DEVICE_FRACTION)))


def tiled(total: int, tile: int, floor: int, step: Callable[[int, int], None], device: Device,
          what: str) -> None:
    """Run ``step(start, stop)`` over ``range(total)`` in tiles, halving a tile that runs out of memory.

    The retry resumes at the tile that failed, so work already done is kept: a card another job
    fills half-way through a plate costs a few smaller tiles, not the plate.

    :param total: items to cover.
    :param tile: items per tile to start with (at least 1).
    :param floor: the smallest tile worth trying; a failure at or below it gives up.
    :param step: does one tile; may raise any torch error.
    :param device: where the tiles run (its cache is released before a retry).
    :param what: the operation, for the message.
    :raises BackendOutOfMemory: a tile of ``floor`` items still did not fit.
    """
    tile = max(1, tile)
    floor = max(1, min(floor, tile))
    start = 0
    while start < total:
        stop = min(total, start + tile)
        try:
            step(start, stop)
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            reason = _first_line(exc)
        else:
            start = stop
            continue
        # Outside the handler, so the traceback (and the tile's tensors it holds) is already gone.
        release(device)
        if stop - start <= floor:
            raise BackendOutOfMemory(
                f"torch {what}: the device is out of memory even for {stop - start} item(s) per pass "
                f"(the floor): {reason}"
            )
        tile = max(floor, (stop - start) // 2)
