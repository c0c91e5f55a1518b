"""The whole-plane steps in torch: the translation as byte copies on the device, and the spot score in
NumPy's float32 order of operations, one elementwise step at a time.

THE TRANSLATION MOVES BYTES. Each field is viewed as rows of bytes (a pixel of ``itemsize`` bytes, a
column shift of ``dx * itemsize`` bytes) and zero bytes are every dtype's zero (``0``, ``+0.0``,
``False``): so every dtype torch can or cannot name (``uint16``, ``bool``) is served by one uint8
copy, and every bit arrives as it left.

THE SCORE IS EXACT ONLY WHERE THE ARITHMETIC IS IEEE. Per pixel NumPy adds the cycles in order from
``+0.0``, divides by the count, squares the deviations, adds them in order, divides, takes the square
root, then does the same mean over the channels; here each of those is one elementwise float32 op
over a band of rows, in that order, so no reduction order of torch's own enters. The square root is
taken in float64 and rounded to float32, which is the correctly rounded float32 root (53 bits are
more than twice 24 plus two): torch's vectorised float32 root on an AVX-512 CPU is not (6,576 of a
million roots an ulp off, measured), its float64 one is. The division is by
a 0-d tensor on the device, never a Python number: CUDA divides by a host scalar as a multiply by
its reciprocal, which is not the correctly rounded quotient. The CPU and CUDA round every float32
add, multiply and division correctly, and have float64 for the root; Metal, ROCm and XPU do not promise it (fast
division, flushed subnormals), so there the score declines and the next backend answers.

Imported by the hooks of :mod:`._planes` at their first call (the plugin imports that module,
and its import stays as cheap as the hooks alone).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from spacr_accel_core import BackendDeclined

from ._runtime import Device, budget, tensor, tiled

if TYPE_CHECKING:
    import torch

__all__ = ["spot_score", "translate"]


def translate(stack: np.ndarray, shifts: np.ndarray, device: Device) -> np.ndarray:
    """Each field of a C-contiguous ``(F, H, W)`` stack moved by its ``(dy, dx)``, on the device."""
    count, height, width = stack.shape
    size = stack.itemsize
    source = np.ascontiguousarray(stack).view(np.uint8).reshape(count, height, width * size)
    out = np.empty(stack.shape, dtype=stack.dtype)
    into = out.view(np.uint8).reshape(source.shape)
    fields = max(1, budget(device) // max(1, 2 * source[0].nbytes))

    def step(start: int, stop: int) -> None:
        import torch

        part = tensor(source[start:stop], device.torch)
        moved = torch.zeros_like(part)
        for index, (dy, dx) in enumerate(shifts[start:stop].tolist()):
            top, bottom, left, right = max(dy, 0), height + min(dy, 0), max(dx, 0) * size, (width + min(dx, 0)) * size
            if top < bottom and left < right:
                moved[index, top:bottom, left:right] = part[index, top - dy:bottom - dy,
                                                            left - dx * size:right - dx * size]
        torch.from_numpy(into[start:stop]).copy_(moved)

    tiled(count, fields, 1, step, device, "translate")
    return out


def _exact_here(device: Device) -> None:
    """Decline where torch's float32 arithmetic is not promised to round as IEEE (see the module)."""
    import torch

    if device.torch.type == "cpu" or (device.torch.type == "cuda" and torch.version.hip is None):
        return
    raise BackendDeclined(f"the spot score needs correctly rounded float32 division and square roots, which "
                          f"torch on {device.torch.type} does not promise; the next backend answers")


def _score_band(part: torch.Tensor, cycles: torch.Tensor, channels: torch.Tensor) -> torch.Tensor:
    """NumPy's operations in NumPy's order on a ``(C, K, rows, X)`` band on the device."""
    import torch

    total = torch.zeros(part.shape[2:], dtype=torch.float32, device=part.device)
    for channel in range(part.shape[1]):
        centre = torch.zeros_like(total)
        for cycle in range(part.shape[0]):
            centre = centre + part[cycle, channel]
        centre = centre / cycles
        spread = torch.zeros_like(total)
        for cycle in range(part.shape[0]):
            deviation = part[cycle, channel] - centre
            spread = spread + deviation * deviation
        total = total + torch.sqrt((spread / cycles).double()).float()  # IEEE: see the module
    return total / channels


def spot_score(stack: np.ndarray, device: Device) -> np.ndarray:
    """float32 ``(Y, X)``: NumPy's ``stack.std(axis=0).mean(axis=0)`` of a float32 ``(C, K, Y, X)`` stack."""
    import torch

    _exact_here(device)
    cycles, channels, height, width = stack.shape
    out = np.empty((height, width), dtype=np.float32)
    rows = max(1, budget(device) // max(1, 4 * width * (cycles * channels + 4)))
    counts = (torch.tensor(float(cycles), dtype=torch.float32, device=device.torch),
              torch.tensor(float(channels), dtype=torch.float32, device=device.torch))

    def step(start: int, stop: int) -> None:
        part = tensor(np.ascontiguousarray(stack[:, :, start:stop]), device.torch)
        torch.from_numpy(out[start:stop]).copy_(_score_band(part, *counts))

    tiled(height, rows, 1, step, device, "spot_score")
    return out
