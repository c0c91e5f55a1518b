"""How the patch serves spaCR's two level settings of ``ops_cycles``: ``_clipped`` (a base channel
clipped between its minimum and its 90th percentile before channel-to-channel registration, 44 calls
a field) and ``sbs_mean_target`` (the channels' maximum divided by its 70th percentile and clipped to
``[0, 1]``, 11 calls a field): the same answers, bit for bit, or the call left to spaCR.

Both names are globals of ``ops_cycles``, looked up when ``_align_channels`` and ``align_field`` call
them, so the seam is the module attribute alone. ``_clipped`` reads the module's
``_CHANNEL_CLIP_PERCENTILE`` at each call, as spaCR's own does.

WHAT IS LEFT TO spaCR. Anything its NumPy would read differently from a 2-D float32 field: a plane or
channel that is not 2-D (``np.percentile`` flattens it, the registry reads fields), an empty one, a
percentile or cutoff that is not one real number in range (spaCR raises, or NumPy answers in its own
way), channels of different shapes (spaCR raises). A plane or target holding NaN or an infinity is
left to spaCR too: NumPy's partition and maximum keep one NaN of several, and which one (its sign and
payload) only spaCR's own call repeats, and infinities meet in its interpolation with a warning; so
is a value whose float32 cast overflows (spaCR's cast warns), and channels given as a generator or
any other one-shot iterable (spaCR must be the one to read them).

ONLY ABOVE THE FLOOR, FOR ``_clipped``. The floor's percentiles are ``np.percentile``'s own selection,
so served by the floor ``_clipped`` is spaCR's work plus the seam's checks: 1.90 s against spaCR's
1.77 s for a field's 44 planes (``python benchmarks/bench_levels.py --backend numpy``). Its row in the
table has it served only by a backend above the floor (:mod:`._floor`), and otherwise left to spaCR.
``sbs_mean_target``
is served by the floor too: it takes the channels' maximum without stacking them, 0.40 s against
0.65 s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import ops
from ..kit._quantiles import percentile_q
from ..kit._surface import bands
from ..kit._tiling import cpu_threads, run_parts
from ._errstate import underflow_ignored
from ._floor import AT_FLOOR, FloorRule
from ._layout import common_order, field_order, in_order
from ._outcome import PassThrough, finite_extent, served_by

__all__ = ["clipped", "sbs_mean_target"]

_SPLIT_PIXELS = 1 << 18
"""Channels of this many pixels and more are maximised in bands on the CPU pool."""


def _plane(value: Any, what: str) -> np.ndarray:
    if isinstance(value, np.ndarray) and np.iscomplexobj(value):
        raise PassThrough(f"a complex {what} (spaCR's cast warns that it drops the imaginary part)")
    try:
        with np.errstate(over="raise", invalid="raise"):  # spaCR's own cast warns (an overflow, a signalling NaN)
            array = np.asarray(value, dtype=np.float32)
    except FloatingPointError:
        raise PassThrough(f"a {what} whose float32 cast overflows or meets a signalling NaN") from None
    except (TypeError, ValueError, OverflowError):
        raise PassThrough(f"a {what} NumPy cannot read as float32") from None
    if array.ndim != 2 or array.size == 0:
        raise PassThrough(f"a {what} that is not a non-empty 2-D field (NumPy's percentile flattens it)")
    return array


def _largest(field: np.ndarray, what: str) -> float:
    """The largest absolute value of a float32 field, which must be finite: a NaN's bits in spaCR's
    answer are those of the NaN its partition or maximum happened to keep, and an infinity meets
    another in its interpolation (``inf - inf``, with NumPy's warning)."""
    return finite_extent(field, f"the {what}", why="spaCR's NumPy decides its bits and warnings")


_WITHIN = 1e38
"""The largest value (and quotient) the target serves: float32's largest is 3.4e38, so neither the
percentile's float32 interpolation (a difference of two values) nor the division overflows."""


def _percentile(value: Any, name: str) -> Any:
    if np.ndim(value) != 0:
        raise PassThrough(f"{name} that is not one number")
    try:
        return percentile_q(value, name)
    except (TypeError, ValueError) as exc:
        raise PassThrough(f"{name} outside what np.percentile takes ({exc})") from None


def clipped(plane: Any, *, original: Callable[..., Any], floor: FloorRule = AT_FLOOR) -> tuple[Any, str]:
    """``spacr.ops_cycles._clipped``: the registry's ``clip_to_percentiles(plane, 0, P)`` with ``P``
    spaCR's ``_CHANNEL_CLIP_PERCENTILE`` as it is now, under ``floor``, the seam's rule in the table."""
    high = _percentile(original.__globals__.get("_CHANNEL_CLIP_PERCENTILE"), "_CHANNEL_CLIP_PERCENTILE")
    field = _plane(plane, "plane")
    underflow_ignored()
    _largest(field, "plane")
    with floor.in_force():  # the floor's selection is np.percentile's own, plus the seam's checks
        return in_order(ops.clip_to_percentiles(field, 0.0, high), field_order(field)), served_by()


_BLOCK_ROWS = 128
"""Rows of the channels' maximum taken through every channel before the next rows: the block stays
in the cache between the channels' passes (1480-pixel rows: 740 KB a block)."""


def _maximum(fields: list[np.ndarray]) -> np.ndarray:
    """NumPy's maximum over the stacked channels, without the stack: the same values (a zero's sign
    cannot reach the answer, which clips at +0.0; NaN is left to spaCR by the caller), in blocks of
    rows, the bands of blocks side by side on the CPU pool. An elementwise maximum gives each pixel
    the bits it gives it in the whole array; for four 1480 x 1480 channels this took 1.7 ms against
    3.1 ms for three whole-array passes."""
    target = np.empty(fields[0].shape, np.float32)
    height = len(target)
    parts = cpu_threads() if target.size >= _SPLIT_PIXELS else 1

    def band(start: int, stop: int) -> None:
        for top in range(start, stop, _BLOCK_ROWS):
            rows = slice(top, min(stop, top + _BLOCK_ROWS))
            out = target[rows]
            if len(fields) == 1:
                out[...] = fields[0][rows]
            else:
                np.maximum(fields[0][rows], fields[1][rows], out=out)
            for field in fields[2:]:
                np.maximum(out, field[rows], out=out)

    run_parts(band, bands(height, parts))
    return target


def sbs_mean_target(planes: Sequence[Any], *, percentile: Any = 70.0, cutoff: Any = 1.0) -> tuple[Any, str]:
    """``spacr.ops_cycles.sbs_mean_target``: the channels' maximum, then the registry's
    ``normalise_to_percentile``."""
    q = _percentile(percentile, "percentile")
    if isinstance(cutoff, (bool, np.bool_)) or np.ndim(cutoff) != 0 or np.asarray(cutoff).dtype.kind not in "iuf" \
            or not math.isfinite(float(cutoff)) or abs(float(cutoff)) > float(np.finfo(np.float32).max):
        raise PassThrough("a cutoff that is not one finite float32 number")
    if not isinstance(planes, (list, tuple, np.ndarray)):
        # a generator or a map is read once: what the seam read, spaCR could not read again
        raise PassThrough("channels that are not a list, tuple or array (spaCR reads them once)")
    underflow_ignored()
    given = list(planes)
    if not given:
        raise PassThrough("no channels (spaCR raises)")
    fields = [_plane(plane, "channel") for plane in given]
    if any(field.shape != fields[0].shape for field in fields):
        raise PassThrough("channels of different shapes (spaCR raises)")
    order = common_order(fields)
    if order is None:
        raise PassThrough("channels in C and in Fortran order (the order of spaCR's stack is NumPy's mix)")
    target = _maximum(fields)
    largest = _largest(target, "channels")
    if largest > _WITHIN:
        raise PassThrough(f"a value beyond {_WITHIN:g} in the channels (spaCR's float32 arithmetic may overflow)")
    scale = ops.percentiles(target, q)
    with np.errstate(over="ignore"):  # ops.normalise_to_percentile's level set, the percentile read once
        divisor = np.float32(float(scale)) if float(scale) > 0 else np.float32(1.0)
        top = np.float32(float(cutoff))
    if divisor == 0 or largest / float(divisor) > _WITHIN:
        raise PassThrough("a percentile so small that spaCR's division overflows")
    return in_order(ops.rescale_fields(target, divisor, np.float32(0.0), top), order), served_by()
