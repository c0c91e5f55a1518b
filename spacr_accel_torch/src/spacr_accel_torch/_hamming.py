"""Exact Hamming nearest neighbours of packed binary descriptors (ORB's 32 bytes) in torch.

WHY A MATRIX PRODUCT. torch has no population count, and counting bits elementwise (an XOR, then a
table or shifts and masks) is a dozen passes over every pair. The bits unpacked to signs
(``2 bit - 1``: ``+1`` or ``-1``) make the count a dot product: over ``K`` bits
``a.b = K - 2 hamming(a, b)``, so ranking the targets of a source (larger is nearer) is ONE matrix
product of the source signs by the target signs, the operation every card (and a CPU with bfloat16
units) runs fastest. ``K`` is exactly the piece's bits (256 for 32 bytes), a width the CPU's
bfloat16 tiles (AMX) take whole; a column more (``K = 257``) measured twice as slow there.

WHY IT IS EXACT. Every input (``+1``, ``-1``) is an integer the half-precision type holds, and so
is every partial sum and the product, which lies in ``[-K, K]``: bfloat16 holds every integer up to
256 and float16 up to 2048, so the bytes are cut into pieces of 32 (bfloat16) or 256 (float16)
bytes, each piece one exact product, summed in float32 where there are several (at most ``8 B``,
far below ``2**24``). The products accumulate in float32 (cuBLAS, oneDNN); even a device that
reduces in half precision stays exact, as every partial sum is an integer within those bounds.

WHICH PRODUCT ON THE CPU. A bfloat16 product is fast only where the CPU multiplies bfloat16 itself
(AMX tiles, AVX-512 BF16); elsewhere oneDNN emulates it through float32, about five times slower
than a float32 product (and float16 slower still). So the CPU's product is chosen by what it runs
natively (:func:`_cpu_plan`): bfloat16 on AMX; where it has VNNI (int8 dot products, four times
float32's rate) the bits as uint8 ``0/1`` times the target signs as int8 ``+-1``, accumulated in
int32 by oneDNN's quantized linear, whose per-target scale ``2`` and bias ``8 B - 2 |b|`` make it
the same ``8 B - 2 hamming`` (exact: integers throughout, written out as bfloat16 within 256); then
bfloat16 on AVX-512 BF16; else float32, exact for every integer below ``2**24`` (whole descriptors
in one piece). Each choice gives the same exact scores, so the answers never depend on the CPU.

TIES TO THE LOWEST INDEX. ``topk`` does not say which of equal values it returns, so it is asked
for :data:`SLACK` more than ``k``: where the last of those is strictly below the ``k``-th, every
target equal to the ``k``-th is among them and the exact order (count, then index) is a sort of a
few numbers; the rare row with more ties than that is ranked by the unique key
``count * M + index`` over all its targets.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from spacr_accel_core import BackendDeclined

from ._runtime import Device, budget, tensor, tiled

if TYPE_CHECKING:
    import torch

__all__ = ["GROUPS", "SLACK", "hamming"]

SLACK = 8
"""Targets asked of ``topk`` beyond ``k``: ties at the ``k``-th place up to this many are settled
from ``topk``'s own answer."""
GROUPS = 16
"""Column groups of the CPU's ranking (:func:`_ranked_by_groups`): ``topk`` over a sixteenth."""
_FLOOR_ROWS = 16


_WHOLE = 1 << 17
"""Bytes per piece of a float32 product: more than any descriptor served (the counts stay far below
``2**24``, float32's exact integers), so a descriptor is one product."""


def _plan(device: Device) -> tuple[torch.dtype, int]:
    """``(dtype, bytes per piece)``: the type this device multiplies fastest (``uint8``: the
    quantized product of :class:`_Signs`), and how many bytes of a descriptor one exact product of
    it may cover (its scores written as bfloat16, float16 or float32 hold ``+-8 x bytes``)."""
    import torch

    if device.torch.type == "cpu":
        return _cpu_plan()
    if device.torch.type == "cuda":
        return torch.bfloat16, 32
    return torch.float16, 256


def _cpu_feature(name: str) -> bool:
    """One of torch's own CPU feature tests (``torch.cpu._is_vnni_supported`` ...); ``False``
    where this torch has none (older releases, other architectures)."""
    import torch

    test = getattr(torch.cpu, name, None)
    try:
        return bool(test()) if callable(test) else False
    except (RuntimeError, AttributeError):
        return False


@functools.cache
def _cpu_plan() -> tuple[torch.dtype, int]:
    """The CPU's product, chosen once by what it runs natively (see the module's notes)."""
    import torch

    if _cpu_feature("_is_amx_tile_supported"):
        return torch.bfloat16, 32
    if _cpu_feature("_is_vnni_supported") and _quantized_product_works():
        return torch.uint8, 32
    if _cpu_feature("_is_avx512_bf16_supported"):
        return torch.bfloat16, 32
    return torch.float32, _WHOLE


class _Signs:
    """A piece of the targets for the quantized product: their signs ``2 b - 1`` as int8, packed
    by oneDNN once for every pass, with the per-target scale and bias that turn the product of the
    sources' ``0/1`` bits into ``8 B - 2 hamming``: with ``a`` a source's bits and ``t`` a target's
    signs, ``a.t = 2 a.b - |a|`` and ``8 B - 2 hamming = 2 a.t + 8 B - 2 |b|``."""

    def __init__(self, signs: torch.Tensor) -> None:
        import torch

        rows, width = signs.shape
        self.packed = torch.ops.onednn.qlinear_prepack(signs.to(torch.int8).contiguous(), None)
        self.scale = torch.full((rows,), 2.0, dtype=torch.float32)
        self.zero = torch.zeros(rows, dtype=torch.int64)
        ones = (signs > 0).sum(1, dtype=torch.int32)
        self.bias = (width - 2 * ones).to(torch.float32)

    def times(self, bits: torch.Tensor) -> torch.Tensor:
        """``(rows, targets)`` bfloat16 scores of ``bits`` (uint8 ``0/1``, one row per source)."""
        import torch

        scores: torch.Tensor = torch.ops.onednn.qlinear_pointwise(
            bits.contiguous(), 1.0, 0, self.packed, self.scale, self.zero, self.bias, 1.0, 0, torch.bfloat16,
            "none", [], "")
        return scores


def _quantized_product_works() -> bool:
    """Whether this torch has oneDNN's quantized linear and it gives the exact scores (a private
    operator: a build without it, or one that computes it otherwise, gets the float32 plan)."""
    import torch

    try:
        generator = torch.Generator().manual_seed(7)
        source = torch.randint(0, 256, (40, 32), dtype=torch.uint8, generator=generator)
        target = torch.randint(0, 256, (24, 32), dtype=torch.uint8, generator=generator)
        target[0] = 255  # the extremes: all ones (every bias at its least) and all zeros
        target[1] = 0
        source[0] = 255
        got = _scores(_operands(source, 32, torch.uint8), _operands(target, 32, torch.uint8, right=True), 0, 40)
        signs = [_operands(part, 32, torch.float32)[0] for part in (source, target)]
        return got.dtype == torch.bfloat16 and bool(torch.equal(got.to(torch.float32), signs[0] @ signs[1].t()))
    except Exception:  # any failure of a private operator means: not on this build
        return False


def _operands(bits: torch.Tensor, piece: int, dtype: torch.dtype, *, right: bool = False) -> list[Any]:
    """Per piece of ``piece`` bytes: the ``(rows, 8 x bytes)`` signs ``2 bit - 1`` in ``dtype``,
    each byte's eight signs read from a 256-row table (one gather, not eight shifts). For the
    quantized product (``uint8``) the sources are the bits ``0/1`` and the targets (``right``)
    :class:`_Signs`."""
    import torch

    shifts = torch.arange(8, dtype=torch.int64, device=bits.device)
    ones = (torch.arange(256, device=bits.device)[:, None] >> shifts) & 1
    quantized = dtype == torch.uint8
    table = (ones if quantized and not right else ones * 2 - 1).to(torch.int8 if quantized and right else dtype)
    out: list[Any] = []
    for start in range(0, bits.shape[1], piece):
        part = bits[:, start:start + piece]
        unpacked = table.index_select(0, part.reshape(-1).to(torch.int64)).view(part.shape[0], -1)
        out.append(_Signs(unpacked) if quantized and right else unpacked)
    return out


def _product(lhs: torch.Tensor, rhs: Any) -> torch.Tensor:
    """One piece's exact scores; the targets' signs are row-major, multiplied as their transpose
    (a view, no copy)."""
    if isinstance(rhs, _Signs):
        return rhs.times(lhs)
    product: torch.Tensor = lhs @ rhs.t()
    return product


def _scores(left: list[torch.Tensor], right: list[Any], start: int, stop: int) -> torch.Tensor:
    """``8 B - 2 hamming`` for sources ``start:stop`` against every target (exact integers)."""
    import torch

    total = _product(left[0][start:stop], right[0])
    if len(left) == 1:
        return total
    total = total.to(torch.float32)
    for lhs, rhs in zip(left[1:], right[1:], strict=True):
        total += _product(lhs[start:stop], rhs).to(torch.float32)
    return total


def _keys(values: torch.Tensor, columns: torch.Tensor, m: int) -> torch.Tensor:
    """Descending score, then ascending index: one unique int64 key per entry, smaller first."""
    import torch

    return (values.to(torch.int64).neg() + (1 << 20)) * m + columns


def _settle_crowded(scores: torch.Tensor, key: torch.Tensor, crowded: torch.Tensor, have: int) -> None:
    """Rows whose ties may reach beyond their candidates: their first ``have`` keys over every
    target, written into ``key`` (padded with the largest key)."""
    import torch

    if not bool(crowded.any()):
        return
    m = scores.shape[1]
    rows_left = torch.nonzero(crowded, as_tuple=True)[0]
    full = _keys(scores[rows_left], torch.arange(m, device=scores.device), m)
    best = torch.topk(full, have, dim=1, largest=False, sorted=True).values
    padded = torch.full((rows_left.shape[0], key.shape[1]), torch.iinfo(torch.int64).max,
                        dtype=torch.int64, device=scores.device)
    padded[:, :have] = best
    key[rows_left] = padded


def _ranked(scores: torch.Tensor, have: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row the ``have`` best targets, by score (larger first), then the lower index."""
    import torch

    m = scores.shape[1]
    ask = min(m, have + SLACK)
    values, columns = torch.topk(scores, ask, dim=1, largest=True, sorted=True)
    key = _keys(values, columns, m)
    if ask < m:
        _settle_crowded(scores, key, values[:, -1] == values[:, have - 1], have)
    key = torch.sort(key, dim=1).values[:, :have]
    return key % m, (1 << 20) - key // m


def _ranked_by_groups(scores: torch.Tensor, have: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_ranked` for the CPU, where ``topk`` over whole rows costs more than the product.

    The columns are cut into :data:`GROUPS` interleaved groups (column ``g w + j`` in group ``j``);
    the maximum of each group is an elementwise maximum of contiguous slices, and ``topk`` runs
    over those ``w`` maxima only. The entries of the ``have + SLACK`` best groups (and the columns
    beyond ``GROUPS w``) are ranked exactly; every unchosen group's maximum is at most the last
    chosen one's, ``bound``, so a row whose ``have``-th best is above ``bound`` is settled, and a
    row with it equal (ties may hide in an unchosen group) is ranked over all its targets.

    The maxima are taken over the scores' bits read as signed integers (no conversion pass; the
    CPU reduces int16 several times faster than bfloat16): that keeps the order of every score
    ``>= 0`` and puts every negative score below them, so the groups are exact wherever ``bound``
    is ``>= 0``; a row whose ``bound`` is negative (its ``have + SLACK`` best groups are more than
    half the bits away) is ranked over all its targets.
    """
    import torch

    rows, m = scores.shape
    w = m // GROUPS
    ask = have + SLACK
    if w < 2 * ask:
        return _ranked(scores, have)
    bits = scores.view(torch.int16 if scores.element_size() == 2 else torch.int32)
    maxima = bits[:, :GROUPS * w].view(rows, GROUPS, w).amax(1)
    top, groups = torch.topk(maxima, ask, dim=1, largest=True, sorted=True)
    bound = top[:, -1].view(scores.dtype).to(torch.int64)
    spread = torch.arange(GROUPS, device=scores.device) * w
    columns = (groups[:, :, None] + spread).reshape(rows, -1)
    if GROUPS * w < m:
        beyond = torch.arange(GROUPS * w, m, device=scores.device)
        columns = torch.cat([columns, beyond.expand(rows, -1)], dim=1)
    key = torch.topk(_keys(scores.gather(1, columns), columns, m), have, dim=1, largest=False).values
    kth = (1 << 20) - key[:, -1] // m
    _settle_crowded(scores, key, (kth <= bound) | (bound < 0), have)
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
    left, right = _operands(s_bits, piece, dtype), _operands(t_bits, piece, dtype, right=True)
    have = min(k, m)
    index = np.full((n, k), -1, dtype=np.int64)
    found = np.full((n, k), np.inf, dtype=np.float32)
    limit = None if max_distance is None or max_distance >= 8 * width else math.floor(max_distance)
    per_row = m * (4 + 8 + 2) + 64 * (have + SLACK)
    rows = max(1, min(chunk, budget(device) // per_row))

    rank = _ranked_by_groups if device.is_cpu else _ranked

    def step(start: int, stop: int) -> None:
        columns, score = rank(_scores(left, right, start, stop), have)
        count = (8 * width - score) // 2  # the product is 8 B - 2 hamming: always even
        if limit is not None:
            far = count > limit  # integer counts: ``count > max_distance`` is ``count > floor(max_distance)``
            columns = columns.masked_fill(far, -1)
            count = count.masked_fill(far, -1)
        host_columns, host_count = columns.cpu().numpy(), count.cpu().numpy()
        index[start:stop, :have] = host_columns
        found[start:stop, :have] = np.where(host_columns < 0, np.inf, host_count).astype(np.float32)

    tiled(n, rows, min(rows, _FLOOR_ROWS), step, device, "nearest_neighbours")
    return index, found

