"""Whether torch can have a GPU here, read off the operating system without importing torch (its
device nodes), and the answer when it cannot (a listed card, found and not used). Shared by the
plugin's ``backend_info`` and the prober; imports nothing of this distribution but :mod:`._arch`."""

from __future__ import annotations

import glob
import importlib.metadata
import os
import sys
from collections.abc import Sequence

from spacr_accel_core import BackendUnavailable, HostDevice
from spacr_accel_core.toolkit import Accelerator

from ._arch import CUDA_WHEEL, ROCM_WHEEL

_DEVICE_NODES: tuple[str, ...] = (
    "/dev/nvidiactl", "/proc/driver/nvidia",  # the NVIDIA kernel driver (CUDA)
    "/dev/kfd",  # AMD's compute driver (ROCm)
    "/dev/dri/renderD*",  # any DRM render node: Intel GPUs (XPU), and AMD under ROCm
    "/dev/dxg",  # WSL 2's bridge to the Windows driver
)


def _no_device_node() -> str | None:
    """Why torch can have no GPU here, read off the OS without importing torch; ``None`` if it may.

    ``import torch`` costs about a second and 200 MiB, paid by the first call of every process
    (every Dask worker, every CLI start) only to learn there is no GPU. On Linux every device
    torch drives shows a node first: the NVIDIA driver's, ROCm's ``/dev/kfd``, a DRM render node
    for Intel and AMD cards, or WSL's ``/dev/dxg``. Without any of them there is nothing to ask.
    macOS (Metal) and Windows (CUDA, DirectML) are always asked.
    """
    if not sys.platform.startswith("linux"):
        return None
    if any(glob.glob(pattern) if "*" in pattern else os.path.exists(pattern) for pattern in _DEVICE_NODES):
        return None
    return "no GPU device node here (no NVIDIA, ROCm, DRI render or WSL device); torch was not imported to ask"


def _no_node_answer(hosts: Sequence[HostDevice], why: str) -> Accelerator:
    """No GPU device node on Linux: a listed card is found-not-used, with what torch's build is.

    torch is NOT imported to say so (that costs a second and 200 MiB per process): its build is
    read from the installed wheel's metadata (``2.13.0+cpu``).
    """
    card = next((h for h in hosts if h.kind == "gpu" and h.vendor in ("NVIDIA", "AMD")), None)
    if card is None:
        raise BackendUnavailable(why)
    try:
        build = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        raise BackendUnavailable("PyTorch is not installed") from None
    kind = "rocm" if card.vendor == "AMD" else "cuda"
    if build.endswith("+cpu"):
        note = (f"this PyTorch {build} is a CPU-only build, so it cannot use the {card.name}; install "
                f"the {'ROCm' if kind == 'rocm' else 'CUDA'} build: {ROCM_WHEEL if kind == 'rocm' else CUDA_WHEEL}")
    else:
        driver = f"; its driver is {card.driver!r}" if card.driver else "; no driver is bound to it"
        note = (f"the {card.vendor} driver is not loaded, so no device node exists for the "
                f"{card.name}{driver}. Install the {card.vendor} driver")
    route = "AMD ROCm" if kind == "rocm" else "NVIDIA CUDA"
    return Accelerator(kind=kind, device="cpu", label=f"{card.name} ({route})", name=card.name,
                       usable=False, note=note)
