"""The registration family's torch code: batches of phase correlations whose transforms never leave
the device. Imported by the hook of :mod:`._registration` at its first call (the plugin imports that
module, and its import stays as cheap as the hook alone).

ONLY THE ANSWERS CROSS THE BUS. A batch of phase correlations sends its fields, transforms,
normalises and searches the surfaces on the device, and brings back two numbers a pair.

FLOAT64 WHERE THE DEVICE HAS IT. The surfaces are computed in float64 (spaCR's definition), so the
peak and its ratio match the NumPy floor's; Metal has no float64 and computes in float32, where
the shift and the verdict agree on any field with a clear peak and the ratio within about 1e-5.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._runtime import Device, budget, tensor, tiles

if TYPE_CHECKING:
    import torch

__all__ = ["phase_correlate"]


def _surfaces(references: torch.Tensor, second: torch.Tensor,
              pairing: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each pair's surface peak (flat index) and peak-to-mean ratio, for a batch on the device: each
    distinct reference field of the batch transformed once, its spectrum read by every pair of it."""
    import torch

    shape = second.shape[-2:]
    product = torch.conj_physical(torch.fft.rfft2(second))
    product.mul_(torch.fft.rfft2(references)[pairing])
    magnitude = product.abs()
    product = torch.where(magnitude > 0, product / torch.where(magnitude > 0, magnitude, 1), 0)
    product[:, 0, 0] = 0
    surface = torch.fft.irfft2(product, s=shape).reshape(second.shape[0], -1)
    best = surface.amax(dim=1)
    where = surface.argmax(dim=1)  # the FIRST maximum (max's index may be any of equal ones)
    mean = surface.abs().mean(dim=1)
    ratio = torch.where(mean > 0, best / torch.where(mean > 0, mean, 1), 0)
    return where, ratio


def _on_host(fields: np.ndarray, host: type[np.float32] | None) -> np.ndarray:
    """``(N, H, W)`` fields as they are sent: as they are where the device has float64; for one
    without (Metal), each multiplied by the power of two that brings its largest magnitude into
    ``[0.5, 1)``, then cast to float32.

    WHY. The normalised spectrum does not depend on a field's scale, but float32's range is narrow:
    the product of two transforms of fields of ``1e20`` overflows it, of ``1e-20`` underflows it (a
    varying pair read as "no variation"), and a float64 field past ``3.4e38`` would be cast to inf.
    A power of two is exact, so a field already in range gives the same float32 arithmetic, scaled.
    """
    if host is None:
        return np.ascontiguousarray(fields)
    # Each field's largest magnitude from its minimum and maximum: no full-size absolute copy.
    magnitude = np.maximum(np.abs(fields.min(axis=(-2, -1))), np.abs(fields.max(axis=(-2, -1))))
    exponent = np.frexp(magnitude)[1]  # 0 for an all-zero field: left as it is
    # Scaled in the fields' own precision and written straight into the float32 array sent: a
    # float64 plate (uint16 images are registered as float64) makes no float64 scaled copy.
    sent = np.empty(fields.shape, dtype=host)
    np.ldexp(fields, -exponent[:, None, None], out=sent, casting="same_kind")
    return sent


def _batch(first: np.ndarray, second: np.ndarray, pairing: np.ndarray, start: int, stop: int, device: Device,
           host: type[np.float32] | None, peaks: np.ndarray, ratios: np.ndarray) -> None:
    """Pairs ``start:stop`` on the device, their peaks and ratios written into ``peaks`` and
    ``ratios``: each distinct reference field of the batch sent once. Its tensors die with its frame,
    so a batch that ran out of memory holds nothing when the cache is released for the retry."""
    import torch

    dtype = torch.float64 if device.float64 else torch.float32
    chosen, index = np.unique(pairing[start:stop], return_inverse=True)
    a = tensor(_on_host(first[chosen], host), device.torch).to(dtype)
    b = tensor(_on_host(second[start:stop], host), device.torch).to(dtype)
    where, ratio = _surfaces(a, b, tensor(index.reshape(-1), device.torch))
    peaks[start:stop] = where.cpu().numpy()
    ratios[start:stop] = ratio.to(torch.float64).cpu().numpy()


def phase_correlate(first: np.ndarray, second: np.ndarray, pairing: np.ndarray,
                    device: Device) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's surface peak and ratio; the pairs in batches sized to the device's free memory,
    a batch that runs out of memory retried at half its size (the loop this function drives, each
    batch by :func:`_batch`).

    :param first: ``(K, H, W)`` finite float32 or float64 reference fields.
    :param second: ``(B, H, W)``, the same dtype.
    :param pairing: int64 ``(B,)``: pair ``i`` is ``first[pairing[i]]`` and ``second[i]``.
    :param device: where to compute (float64 there unless the device has none).
    :returns: int64 ``(B,)`` and float64 ``(B,)``.
    """
    count, height, width = second.shape
    item = 8 if device.float64 else 4
    # A field and a reference, two half spectra (complex), the magnitude and the surface, with room
    # for temporaries: a batch holds at most as many references as pairs.
    per_pair = item * height * width * 10
    batch = max(1, budget(device) // per_pair)
    peaks = np.empty(count, dtype=np.int64)
    ratios = np.empty(count, dtype=np.float64)

    # A device without float64 (Metal) refuses even to receive one: the fields are cast on the host.
    host = None if device.float64 else np.float32
    for part in tiles(count, batch, 1, device, "phase_correlate"):
        with part:
            _batch(first, second, pairing, part.start, part.stop, device, host, peaks, ratios)
    return peaks, ratios
