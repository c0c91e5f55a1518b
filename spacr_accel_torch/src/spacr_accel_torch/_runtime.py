"""Device plumbing the torch operations share: where to run, how much room, what went wrong.

WHY TILES AND A FLOOR: see :mod:`spacr_accel_core.tiling`. This module brings torch's part: the
free memory of a device, torch's out-of-memory test and its cache release.

WHY TRANSLATE. torch reports a driver that went away, a kernel image missing for this card or a
ROCm runtime error as a bare ``RuntimeError``; only the ones that are the DEVICE's fault become
:class:`~spacr_accel_core.BackendUnavailable`. Any other error (a shape bug in this package) stays
what it is, so it is not mistaken for a busy card.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from spacr_accel_core import BackendOutOfMemory, BackendUnavailable
from spacr_accel_core.toolkit import (
    HOST_PASS_BYTES,
    PrecisionWindow,
    describe,
    install_command,
    pass_budget,
    setting_value,
)
from spacr_accel_core.toolkit import first_line as _first_line
from spacr_accel_core.toolkit import tiled as run_tiles
from spacr_accel_core.toolkit import tiles as kit_tiles

from ._settings import PASS_BYTES

if TYPE_CHECKING:
    import torch

    from spacr_accel_core.toolkit import Accelerator, Tile

__all__ = ["IEEE_UNIT", "Device", "budget", "current_float32_gemm_unit", "float32_gemm_unit", "ieee_float32",
           "is_out_of_memory", "release", "target", "tensor", "tiled", "tiles", "translate"]

logger = logging.getLogger(__name__)

_OOM_WORDS = re.compile(r"out of memory|can't allocate memory|cannot allocate memory", re.IGNORECASE)
# Messages torch passes through from a vendor runtime: the device's fault, not this package's.
_DEVICE_WORDS = re.compile(
    r"CUDA error|CUDA driver|CUDA-capable|cudaError|CUDA kernel errors|no kernel image|"
    r"device-side assert|HIP error|hipError|CUBLAS_STATUS|CUDNN_STATUS|cuSOLVER|cuFFT|NCCL|"
    r"Torch not compiled with|Found no NVIDIA driver|no CUDA GPUs|MPS backend|"
    r"Placeholder storage has not been allocated|XPU|Level Zero|UR_RESULT|privateuseone",
)



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


class _State:
    """This module's per-process state; :meth:`reset` runs again in a forked child, which has only
    the thread that forked (a lock another thread held would stay held forever)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.target: tuple[Accelerator, Device] | None = None
        """The last resolved accelerator and the Device built for it: ``resolve()`` hands out the
        same object until someone refreshes it, so a call compares identity, not fields."""
        self.cpu: Device | None = None
        """torch on the CPU, built on the first call forced with ``gpu=False``."""
        self.window: PrecisionWindow[dict[str, str], dict[str, str]] = PrecisionWindow()
        """This package's calls inside :func:`ieee_float32` now, and the settings to put back."""


_STATE = _State()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_STATE.reset)


def target() -> Device:
    """The device the resolved accelerator names, whatever it is (the CPU included).

    "usable" only governs automatic dispatch: a call forced with ``backend="torch"`` runs on
    whatever :func:`spacr_accel_core.accelerator.resolve` answers, the CPU on a machine without
    a card. SPACR_DEVICE is honoured there, not here. Cached per resolved Accelerator object (an
    identity comparison), so a refreshed ``resolve()`` is followed at once.

    :raises BackendUnavailable: torch is not importable, or cannot address that device.
    """
    from spacr_accel_core import toolkit  # looked up at the call: a test may replace resolve

    found = toolkit.resolve()
    cached = _STATE.target  # one read: another thread may replace it, never tear it
    if cached is not None and cached[0] is found:
        return cached[1]
    device = _build_target(found)
    _STATE.target = (found, device)
    return device


def cpu_target() -> Device:
    """torch on the CPU: a call that forced ``backend="torch"`` with ``gpu=False`` (spaCR runs
    torch models on the CPU that way when the card is busy)."""
    from spacr_accel_core.toolkit import Accelerator

    cached = _STATE.cpu
    if cached is None:
        cached = _STATE.cpu = _build_target(Accelerator(kind="cpu", device="cpu", label="CPU"))
    return cached


def _build_target(found: Accelerator) -> Device:
    try:
        import torch
    except Exception as exc:  # an ImportError, or a broken wheel raising anything at import
        raise BackendUnavailable(
            f"torch is not importable ({type(exc).__name__}: {exc}); `{install_command('torch')}`"
        ) from exc
    try:
        device = torch.device(found.device)
    except (RuntimeError, ValueError) as exc:
        raise BackendUnavailable(f"torch cannot address device {found.device!r}: {exc}") from exc
    return Device(device, device.type == "cpu" or bool(found.float64))


def is_out_of_memory(exc: BaseException, torch: Any = None) -> bool:
    """Whether ``exc`` says the device (or the host, for the CPU device) ran out of memory.

    :param exc: what torch raised.
    :param torch: the torch module to take the error classes from (the prober's, which may be a
        stand-in); ``None`` imports torch.
    """
    if isinstance(exc, MemoryError):
        return True
    if torch is None:
        try:
            import torch
        except ImportError:  # pragma: no cover - only reached after torch raised, so it imports
            return False
    # torch.OutOfMemoryError exists from torch 2.5, torch.cuda.OutOfMemoryError from 1.13; this
    # package accepts torch 2.0, where reaching for the first would turn every error into an
    # AttributeError. Both are RuntimeError subclasses whose message says "out of memory", so
    # the words below still catch them where neither class exists.
    classes = tuple(cls for cls in (getattr(torch, "OutOfMemoryError", None),
                                    getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None))
                    if isinstance(cls, type) and issubclass(cls, BaseException))
    if classes and isinstance(exc, classes):
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


_EMPTY_CACHE: Final = {"cuda": "cuda", "rocm": "cuda", "mps": "mps", "xpu": "xpu"}
"""The torch namespace whose ``empty_cache()`` serves an accelerator kind (or a torch device type)."""


def empty_cache(torch: Any, kind: str) -> str | None:
    """Release torch's cached memory for a device of ``kind``; the call made, or ``None``.

    Best effort: a driver too broken to empty its cache fails the next allocation instead, with
    its reason.

    :param torch: the torch module.
    :param kind: an accelerator kind (``"rocm"``) or a torch device type (``"cuda"``).
    """
    namespace = _EMPTY_CACHE.get(kind)
    if namespace is None:
        return None
    try:
        getattr(torch, namespace).empty_cache()
    except Exception as exc:  # a driver that went away while we were not looking
        logger.debug("torch.%s.empty_cache() failed: %s", namespace, describe(exc))
        return None
    return f"torch.{namespace}.empty_cache()"


def release(device: Device) -> None:
    """Hand cached blocks back to the driver, so a smaller retry (or another job) can have them."""
    import torch

    empty_cache(torch, device.torch.type)


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
    override = setting_value(PASS_BYTES)
    if device.is_cpu:
        return pass_budget(None, override=override, host=HOST_PASS_BYTES)
    free = free_bytes(device)
    if free is None:  # torch cannot say: what the accelerator's memory report says, if anything
        from ._room import reported_free

        free = reported_free(str(device.torch))
    # A device nobody can size gets a fixed gigabyte per pass.
    return pass_budget(free, override=override, host=1 << 30)


def tiled(total: int, tile: int, floor: int, step: Callable[[int, int], None], device: Device,
          what: str) -> None:
    """:func:`spacr_accel_core.tiling.tiled` with torch's out-of-memory test and ``device``'s cache.

    :param total: items to cover.
    :param tile: items per tile to start with (at least 1).
    :param floor: the smallest tile worth trying; a failure at or below it gives up.
    :param step: does one tile; may raise any torch error.
    :param device: where the tiles run (its cache is released before a retry).
    :param what: the operation, for the message.
    :raises BackendOutOfMemory: a tile of ``floor`` items still did not fit.
    """
    run_tiles(total, tile, floor, step, is_out_of_memory=is_out_of_memory,
              release=lambda: release(device), label=f"torch {what}")


def tiles(total: int, tile: int, floor: int, device: Device, what: str) -> Iterator[Tile]:
    """:func:`spacr_accel_core.tiling.tiles` with torch's out-of-memory test and ``device``'s cache:
    the loop a primitive drives itself (``for part in tiles(...): with part: ...``), calling its own
    step, so its fields never pass through the kit.

    :param total: items to cover.
    :param tile: items per tile to start with (at least 1).
    :param floor: the smallest tile worth trying; a failure at or below it gives up.
    :param device: where the tiles run (its cache is released before a retry).
    :param what: the operation, for the message.
    :raises BackendOutOfMemory: a tile of ``floor`` items still did not fit.
    """
    return kit_tiles(total, tile, floor, is_out_of_memory=is_out_of_memory,
                     release=lambda: release(device), label=f"torch {what}")


# ---- host arrays in ----------------------------------------------------------------------------


def tensor(array: np.ndarray, device: torch.device | None = None) -> torch.Tensor:
    """``array`` as a tensor on ``device`` (the CPU when None): shared where torch may, else copied.

    ``torch.from_numpy`` aliases the array, and on a READ-ONLY one (a memory map, a broadcast, an
    array a caller froze) torch warns that writing through the tensor would be undefined. This
    package never writes into its inputs, but a warning in a user's log (an error under
    ``-W error``) is a defect, so a read-only array is copied instead: ``torch.tensor`` copies
    without aliasing, straight to the device when one is named.
    """
    import torch

    if array.flags.writeable:
        shared = torch.from_numpy(array)
        return shared if device is None else shared.to(device)
    return torch.tensor(array, device=device)


# ---- float32 matrix products -------------------------------------------------------------------

IEEE_UNIT: Final = 2.0 ** -24
"""Unit roundoff of an IEEE float32 product: what every rounding bound in this package assumes."""
TF32_UNIT: Final = 2.0 ** -10
"""TF32 keeps 10 explicit mantissa bits: 2^-11 when inputs are rounded to nearest, 2^-10 when they
are truncated (tensor cores fed raw float32 registers ignore the low 13 bits), so 2^-10."""
BF16_UNIT: Final = 2.0 ** -7
"""bfloat16 keeps 7 explicit bits, truncated likewise (``set_float32_matmul_precision("medium")``)."""

_REDUCED: Final = {"tf32": TF32_UNIT, "bf16": BF16_UNIT}


def _precision_settings(torch: Any) -> dict[str, str]:
    """What torch says about float32 matrix products, every API that exists on this release.

    ``torch.backends.{cuda,mkldnn}.matmul.fp32_precision`` (torch 2.9+: "ieee", "tf32", "bf16"
    or "none", which defers to ``torch.backends.fp32_precision``), the legacy
    ``get_float32_matmul_precision()`` ("highest", "high", "medium") and ``allow_tf32``. A getter
    that raises (torch refuses to answer when the legacy and new APIs were mixed) is recorded as
    "unknown", which callers treat as the worst case.
    """
    found: dict[str, str] = {}

    def ask(key: str, read: Callable[[], Any]) -> None:
        try:
            found[key] = str(read())
        except AttributeError:  # this release has no such setting
            return
        except Exception:  # torch raising because the APIs were mixed: cannot tell, assume the worst
            found[key] = "unknown"

    backends: Any = getattr(torch, "backends", None)

    def legacy() -> Any:
        return torch.get_float32_matmul_precision()

    ask("global", lambda: backends.fp32_precision)
    ask("cuda", lambda: backends.cuda.matmul.fp32_precision)
    ask("mkldnn", lambda: backends.mkldnn.matmul.fp32_precision)
    ask("legacy", legacy)
    ask("allow_tf32", lambda: backends.cuda.matmul.allow_tf32)
    return found


def _unit_of(settings: dict[str, str]) -> float:
    """The worst unit roundoff a float32 product has under ``settings`` (:func:`_precision_settings`)."""
    unit = IEEE_UNIT
    for key, value in settings.items():
        if value == "unknown":
            return BF16_UNIT
        if key == "legacy":
            unit = max(unit, {"highest": IEEE_UNIT, "high": TF32_UNIT}.get(value, BF16_UNIT))
        elif key == "allow_tf32":
            unit = max(unit, TF32_UNIT if value == "True" else IEEE_UNIT)
        else:
            unit = max(unit, _REDUCED.get(value, IEEE_UNIT))
    return unit


def current_float32_gemm_unit() -> float:
    """The unit roundoff a float32 matrix product torch ran NOW would have (any device)."""
    import torch

    return _unit_of(_precision_settings(torch))


def float32_gemm_unit() -> float:
    """The worst unit roundoff a float32 matrix product may have from now on, any device.

    :data:`IEEE_UNIT` unless the process allowed reduced precision: TF32 (``allow_tf32``, the
    ``"high"`` matmul precision, ``fp32_precision="tf32"``) or bfloat16 (``"medium"``, ``"bf16"``).
    Read for every device type, not only CUDA: on the CPU the same settings reach oneDNN, and a
    wrong "IEEE" silently breaks the nearest-neighbour search's exactness while a wrong
    "reduced" only costs it a float64 product.

    While another of this package's calls holds :func:`ieee_float32` open, the settings it will
    restore count too: that window may close half-way through the caller's work. Read in this
    order (the settings, then the saved ones; :func:`ieee_float32` saves before it sets and
    forgets after it restores), no moment is missed.
    """
    unit = current_float32_gemm_unit()
    saved = _STATE.window.saved
    return unit if saved is None else max(unit, _unit_of(saved))


def _apply(torch: Any, settings: dict[str, str]) -> None:
    """Put back float32 matmul settings read by :func:`_precision_settings`.

    The legacy value first (its setter rewrites both backends), then the new API's, global before
    the backends, so each backend ends exactly as it was read. A value that could not be read
    ("unknown": torch refused because the two APIs were mixed) is left as it is.
    """
    legacy = settings.get("legacy")
    if legacy is not None and legacy != "unknown":
        torch.set_float32_matmul_precision(legacy)
    backends = torch.backends
    if settings.get("global", "unknown") != "unknown":
        backends.fp32_precision = settings["global"]
    if settings.get("mkldnn", "unknown") != "unknown":
        backends.mkldnn.matmul.fp32_precision = settings["mkldnn"]
    if settings.get("cuda", "unknown") != "unknown":
        backends.cuda.matmul.fp32_precision = settings["cuda"]


@contextlib.contextmanager
def ieee_float32() -> Iterator[None]:
    """Run the body with IEEE float32 matrix products, whatever the process allowed.

    WHY. ``allow_tf32`` or ``set_float32_matmul_precision("high")`` (set by a training script in the
    same process) makes cuBLAS round float32 inputs to 10 bits, so ``matmul`` would be accurate to
    ~1e-3 instead of float32's ~1e-7, and no longer agree with the other backends.

    HOW, and what it costs others. The setting is process-global, so: the first of this package's
    concurrent calls saves it and sets IEEE, the last one puts it back (a count under a lock, so
    overlapping calls never restore each other's state), and it is put back only if nobody changed
    it meanwhile (a user's own change made during our call wins). While a call runs, other
    threads' float32 products are IEEE too: slower, never less accurate. Nothing is touched when
    the process already asks for IEEE.
    """
    import torch

    def save() -> dict[str, str] | None:
        current = _precision_settings(torch)
        return current if _unit_of(current) > IEEE_UNIT else None

    def set_ieee(saved: dict[str, str]) -> dict[str, str]:
        # The legacy setter: it sets every backend to IEEE at once, so a reader in another
        # thread never meets a mix of the two APIs (torch raises on one).
        torch.set_float32_matmul_precision("highest")
        return _precision_settings(torch)

    def restore(saved: dict[str, str], ours: dict[str, str] | None) -> None:
        if _precision_settings(torch) == ours:
            # Best effort: a setter that refuses leaves IEEE, the safe side.
            with contextlib.suppress(Exception):
                _apply(torch, saved)

    with _STATE.window.hold(save, set_ieee, restore):
        yield
