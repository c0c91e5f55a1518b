"""Exact Hamming nearest neighbours of packed binary descriptors (ORB's 32 bytes) in torch.

WHY A MATRIX PRODUCT. torch has no population count, and counting bits elementwise (an XOR, then a
table or shifts and masks) is a dozen passes over every pair. The bits unpacked to 0/1 make the
count a dot product: ``hamming(a, b) = |a| + |b| - 2 a.b``, so ranking the targets of a source by
``2 a.b - |b|`` (larger is nearer) is ONE matrix product of ``[2 a, -1]`` by ``[b, |b|]``, the
operation every card (and a CPU with bfloat16 units) runs fastest.

WHY IT IS EXACT. Every input (0, 1, 2, -1, and ``|b| <= 8 B``) is an integer the half-precision
type holds, and so is every value of ``2 a.b - |b|``, which lies in ``[-8 B, 8 B]``: bfloat16 holds
every integer up to 256 and float16 up to 2048, so the bytes are cut into pieces of 32 (bfloat16)
or 256 (float16) bytes, each piece one exact product, summed in float32 where there are several.
The products accumulate in float32 (cuBLAS, oneDNN); even a device that reduces in half precision
stays exact, as every partial sum is an integer below those bounds.

TIES TO THE LOWEST INDEX. ``topk`` does not say which of equal values it returns, so it is asked
for :data:`SLACK` more than ``k``: where the last of those is strictly below the ``k``-th, every
target equal to the ``k``-th is among them and the exact order (count, then index) is a sort of a
few numbers; the rare row with more ties than that is ranked by the unique key
``count * M + index`` over all its targets.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from spacr_accel_core import BackendDeclined

from ._runtime import Device, budget, tensor, tiled

if TYPE_CHECKING:
    import torch

__all__ = ["SLACK", "hamming"]

SLACK = 8
"""Targets asked of ``topk`` beyond ``k``: ties at the ``k``-th place up to this many are settled
from ``topk``'s own answer."""
_FLOOR_ROWS = 16


def _plan(device: Device) -> tuple[torch.dtype, int]:
    """``(dtype, bytes per piece)``: the half type this device multiplies fastest, and how many
    bytes of a descriptor one exact product of it may cover (every integer up to ``8 x bytes``)."""
    import torch

    if device.torch.type in ("cpu", "cuda"):
        return torch.bfloat16, 32
    return torch.float16, 256


def _operands(bits: torch.Tensor, piece: int, dtype: torch.dtype, left: bool) -> list[torch.Tensor]:
    """Per piece of ``piece`` bytes: ``[2 a, -1]`` (``left``) or ``[b, |b|]`` transposed, in ``dtype``."""
    import torch

    shifts = torch.arange(8, dtype=torch.uint8, device=bits.device)
    out = []
    for start in range(0, bits.shape[1], piece):
        part = bits[:, start:start + piece]
        unpacked = ((part[:, :, None] >> shifts) & 1).reshape(part.shape[0], -1)
        if left:
            extra = torch.full((part.shape[0], 1), -1, dtype=dtype, device=bits.device)
            out.append(torch.cat([unpacked.to(dtype) * 2, extra], dim=1))
        else:
            count = unpacked.sum(1, dtype=torch.int32)[:, None]
            out.append(torch.cat([unpacked.to(dtype), count.to(dtype)], dim=1).t().contiguous())
    return out


def _scores(left: list[torch.Tensor], right: list[torch.Tensor], start: int, stop: int) -> torch.Tensor:
    """``2 a.b - |b|`` for sources ``start:stop`` against every target (exact integers)."""
    import torch

    total = left[0][start:stop] @ right[0]
    if len(left) == 1:
        return total
    total = total.to(torch.float32)
    for lhs, rhs in zip(left[1:], right[1:], strict=True):
        total += (lhs[start:stop] @ rhs).to(torch.float32)
    return total


def _ranked(scores: torch.Tensor, have: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row the ``have`` best targets, by score (larger first), then the lower index."""
    import torch

    m = scores.shape[1]
    ask = min(m, have + SLACK)
    values, columns = torch.topk(scores, ask, dim=1, largest=True, sorted=True)
    values = values.to(torch.int64)
    # Descending score, then ascending index: one unique key per entry, sorted ascending.
    key = (values.neg() + (1 << 20)) * m + columns
    if ask < m:
        crowded = values[:, -1] == values[:, have - 1]
        if bool(crowded.any()):
            rows_left = torch.nonzero(crowded, as_tuple=True)[0]
            full = (scores[rows_left].to(torch.int64).neg() + (1 << 20)) * m
            full += torch.arange(m, device=scores.device)
            best = torch.topk(full, have, dim=1, largest=False, sorted=True).values
            padded = torch.full((rows_left.shape[0], ask), torch.iinfo(torch.int64).max,
                                dtype=torch.int64, device=scores.device)
            padded[:, :have] = best
            key[rows_left] = padded
    key = torch.sort(key, dim=1).values[:, :have]
    return key % m, (1 << 20) - key // m


def hamming(source: np.ndarray, target: np.ndarray, chunk: int, k: int, max_distance: float | None,
            device: Device) -> tuple[np.ndarray, np.ndarray]:
    """Each descriptor's ``k`` nearest by differing bits, exactly, lowest index among equals.

    :param source: uint8 ``(N, B)`` rows of packed bits, N >= 1.
    :param target: uint8 ``(M, B)``, M >= 1.
    :param chunk: at most this many source rows per pass.
    :param k: neighbours per source row.
    :param max_distance: neighbours with more differing bits are ``-1``/``inf`` (decided on the
        device, before anything is copied back); ``None``: no limit.
    :param device: where to compute.
    :returns: int64 and float32 ``(N, k)`` (exact integer counts), nearest first.
    :raises BackendDeclined: descriptors so wide that a count outgrows the device's exact range.
    """
    n, width = source.shape
    m = target.shape[0]
    if 8 * width >= 1 << 20:
        raise BackendDeclined(f"descriptors of {width} bytes: counts beyond the exact range of this search")
    dtype, piece = _plan(device)
    where = device.torch
    s_bits, t_bits = tensor(source, where), tensor(target, where)
    left, right = _operands(s_bits, piece, dtype, True), _operands(t_bits, piece, dtype, False)
    s_count = _operands_count(s_bits)
    have = min(k, m)
    index = np.full((n, k), -1, dtype=np.int64)
    found = np.full((n, k), np.inf, dtype=np.float32)
    limit = None if max_distance is None or max_distance >= 8 * width else math.floor(max_distance)
    per_row = m * (4 + 8 + 2) + 64 * (have + SLACK)
    rows = max(1, min(chunk, budget(device) // per_row))

    def step(start: int, stop: int) -> None:
        columns, score = _ranked(_scores(left, right, start, stop), have)
        count = s_count[start:stop, None] - score
        if limit is not None:
            far = count > limit  # integer counts: ``count > max_distance`` is ``count > floor(max_distance)``
            columns = columns.masked_fill(far, -1)
            count = count.masked_fill(far, -1)
        host_columns, host_count = columns.cpu().numpy(), count.cpu().numpy()
        index[start:stop, :have] = host_columns
        found[start:stop, :have] = np.where(host_columns < 0, np.inf, host_count).astype(np.float32)

    tiled(n, rows, min(rows, _FLOOR_ROWS), step, device, "nearest_neighbours")
    return index, found


def _operands_count(bits: torch.Tensor) -> torch.Tensor:
    """Bits set in each row (int64), counted once."""
    import torch

    shifts = torch.arange(8, dtype=torch.uint8, device=bits.device)
    return ((bits[:, :, None] >> shifts) & 1).sum(dim=(1, 2), dtype=torch.int64)
