"""Whether the OS shows an NVIDIA driver at all: asked by the plugin (is CuPy usable here) and by the
kit (which words a failed call gets), so it lives apart from both, and neither imports the other."""

from __future__ import annotations

import os
import sys


def no_nvidia_driver() -> str | None:
    """Why no CUDA device can be here, read off the OS without importing CuPy; ``None`` if one may be.

    Importing CuPy and asking the runtime costs 0.3-0.5 s, paid by every process at discovery (the
    doctor, the first tile), so where the answer is already certain it is not asked: macOS has no
    CUDA at all, and a Linux kernel without the NVIDIA driver has neither ``/dev/nvidiactl`` nor
    ``/proc/driver/nvidia`` (WSL reaches the card through ``/dev/dxg`` instead).
    """
    if sys.platform == "darwin":
        return "macOS has no CUDA driver (cupy drives NVIDIA CUDA only)"
    if sys.platform.startswith("linux") and not any(
        os.path.exists(path) for path in ("/dev/nvidiactl", "/proc/driver/nvidia", "/dev/dxg")
    ):
        return "no NVIDIA driver is loaded here (no /dev/nvidiactl or /proc/driver/nvidia)"
    return None
