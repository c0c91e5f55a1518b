"""The whole-plane steps in CuPy, written against the kit (so every line runs on NumPy in the tests):
the translation as byte copies on the card, and the spot score in NumPy's float32 order.

THE TRANSLATION MOVES BYTES: each field viewed as rows of bytes, a column shift of ``dx * itemsize``
bytes, zero bytes every dtype's zero, so every dtype is one uint8 copy and every bit arrives as it
left.

THE SCORE IS NumPy's OPERATIONS IN NumPy's ORDER, one elementwise kernel each: the cycles added in
order from ``+0.0``, the division by the count, each deviation squared, the squares added in order,
the division, the square root, and the same mean over the channels. Each is its own CuPy kernel,
so no multiply and add are fused into one rounding (NVRTC would contract ``a + b * c`` written in one
kernel), and CuPy compiles without fast math: CUDA's float32 division is then correctly rounded,
as NumPy's is, and no reduction order of the card's own enters. The square root is taken in float64
and rounded to float32, which is the correctly rounded float32 root whatever the library's float32
root does (torch's on an AVX-512 CPU is an ulp off on a few roots in a thousand).

Imported by the hooks of :mod:`._planes` at their first call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._kit import Kit
from ._runtime import tiled

__all__ = ["spot_score", "translate"]


def translate(kit: Kit, stack: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """Each field of a C-contiguous ``(F, H, W)`` stack moved by its ``(dy, dx)``, on the card."""
    xp = kit.xp
    count, height, width = stack.shape
    size = stack.itemsize
    source = np.ascontiguousarray(stack).view(np.uint8).reshape(count, height, width * size)
    out = np.empty(stack.shape, dtype=stack.dtype)
    into = out.view(np.uint8).reshape(source.shape)
    fields = max(1, kit.budget() // max(1, 2 * source[0].nbytes))

    def step(start: int, stop: int) -> None:
        part = kit.to_device(source[start:stop])
        moved = xp.zeros(part.shape, dtype=xp.uint8)
        for index, (dy, dx) in enumerate(shifts[start:stop].tolist()):
            top, bottom, left, right = max(dy, 0), height + min(dy, 0), max(dx, 0) * size, (width + min(dx, 0)) * size
            if top < bottom and left < right:
                moved[index, top:bottom, left:right] = part[index, top - dy:bottom - dy,
                                                            left - dx * size:right - dx * size]
        into[start:stop] = kit.to_host(moved)

    tiled(count, fields, 1, step, kit, "translate")
    return out


def _score_band(xp: Any, part: Any) -> Any:
    """NumPy's operations in NumPy's order on a ``(C, K, rows, X)`` band on the card."""
    cycles, channels = xp.float32(part.shape[0]), xp.float32(part.shape[1])
    total = xp.zeros(part.shape[2:], dtype=xp.float32)
    for channel in range(part.shape[1]):
        centre = xp.zeros_like(total)
        for cycle in range(part.shape[0]):
            centre = centre + part[cycle, channel]
        centre = centre / cycles
        spread = xp.zeros_like(total)
        for cycle in range(part.shape[0]):
            deviation = part[cycle, channel] - centre
            spread = spread + deviation * deviation
        total = total + xp.sqrt((spread / cycles).astype(xp.float64)).astype(xp.float32)  # see the module
    return total / channels


def spot_score(kit: Kit, stack: np.ndarray) -> np.ndarray:
    """float32 ``(Y, X)``: NumPy's ``stack.std(axis=0).mean(axis=0)`` of a float32 ``(C, K, Y, X)`` stack."""
    cycles, channels, height, width = stack.shape
    out = np.empty((height, width), dtype=np.float32)
    rows = max(1, kit.budget() // max(1, 4 * width * (cycles * channels + 4)))

    def step(start: int, stop: int) -> None:
        part = kit.to_device(np.ascontiguousarray(stack[:, :, start:stop]))
        out[start:stop] = kit.to_host(_score_band(kit.xp, part))

    with np.errstate(all="ignore"):  # the NumPy kit: inf - inf is NaN here as in NumPy's own call
        tiled(height, rows, 1, step, kit, "spot_score")
    return out
