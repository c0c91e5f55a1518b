"""Whole planes of a field: the integer translation that puts its cycles and channels in one frame, and
the spot score that says where its reads are (re-exported by :mod:`spacr_accel_core.ops`).

BOTH ARE spaCR's OWN ANSWERS, BIT FOR BIT. ``translate`` is ``spacr.ops_cycles._translate`` for a
whole stack in one call (one shift per field, or one for all); ``spot_score`` is
``spacr.ops_sbs.estimate_read_locations``, NumPy's float32 ``std`` over the cycles then ``mean`` over
the channels, in NumPy's order of operations. Input is checked here before any backend runs.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .. import reference
from ..contract._markers import hookspec
from ..dispatch._registry import REGISTRY
from ..operations._checks import _F32, _options, _read_only, field_array
from ..operations._operations import OwnGraph, operation
from ..operations._planes import (
    agree_translated,
    bench_score,
    bench_translation,
    check_translated,
    score_stack,
    small_score,
    small_translation,
    translation_shifts,
)
from ..operations._results import agree_field, check_array

__all__ = ["spot_score", "translate"]


@hookspec
def spacr_accel_translate(  # type: ignore[empty-body]  # a specification has no body
    stack: np.ndarray, shifts: np.ndarray
) -> np.ndarray:
    """Each field's content moved by whole pixels, the gap filled with zeros: how a field's cycles and
    channels are put in one frame once each registration is measured.

    ``out[f, y, x] = stack[f, y - dy, x - dx]`` where that pixel exists, else zero (all-zero bytes:
    ``0``, ``+0.0``, ``False``), ``(dy, dx) = shifts[f]``. Every other bit is copied as it is.

    :param stack: a non-empty C-contiguous ``(F, H, W)`` stack of any real dtype (bool, integer,
        float), kept; never modify it.
    :param shifts: C-contiguous int64 ``(F, 2)`` rows ``(dy, dx)``: positive moves down and right;
        ``|dy| <= H`` and ``|dx| <= W`` (the core clips a larger shift: every pixel leaves the field).
    :returns: a new array of the stack's shape and dtype.
    """


@operation(
    spec=spacr_accel_translate,
    task="Moving planes into one frame (translate)",
    check=check_translated,
    agree=agree_translated,
    reference=reference.translate,
    small=small_translation,
    bench=bench_translation,
    dask=OwnGraph(),
)
def translate(stack: Any, shifts: Any, *, gpu: Any = True, backend: str | None = None) -> np.ndarray:
    """Each field's content moved by whole pixels, the gap filled with zeros: spaCR's ``_translate``.

    A REGISTRATION MEASURED TO THE PIXEL IS APPLIED TO THE PIXEL: no interpolation, so no edge
    intensity is invented that a base call would later read. ``out[..., y, x] = stack[..., y - dy,
    x - dx]`` where that pixel exists, else zero; a shift at or past the field's edge gives zeros.
    Every backend copies the pixels' bits as they are (a NaN stays that NaN).

    :param stack: a 2-D field, or a stack ``(..., H, W)`` (cycles, channels) of any real dtype
        (bool, integer, float), which the answer keeps.
    :param shifts: ``(dy, dx)``, rows down and columns right (negative: up and left): one pair for
        every field, or pairs shaped ``(..., 2)`` that broadcast against ``stack.shape[:-2]`` (one
        per field, or ``(C, 1, 2)``: each cycle's channels moved together). Integers, or floats
        holding whole numbers.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: a new C-ordered array of the stack's shape and dtype.
    :raises ValueError: ``stack`` is not at least 2-D; ``shifts`` is not ``(..., 2)``, does not
        broadcast against the stack, or holds a fractional, NaN or infinite shift.
    :raises TypeError: ``stack`` or ``shifts`` is not real numbers (a bool shift, a masked array).
    """
    array = field_array(stack, "stack")
    use_gpu = _options(gpu, backend)
    lead, (height, width) = array.shape[:-2], array.shape[-2:]
    moves = translation_shifts(shifts, lead, height, width)
    flat_moves = moves.reshape(-1, 2)
    outside = (np.abs(flat_moves[:, 0]) >= height) | (np.abs(flat_moves[:, 1]) >= width)
    if array.size == 0 or bool(outside.all()) or not flat_moves.any():
        # No backend needed: nothing to move, every field moved out (zeros), or nothing moved (a copy).
        REGISTRY.record_served("translate")
        if array.size and not flat_moves.any():
            return np.array(array, order="C", copy=True)
        return np.zeros(array.shape, dtype=array.dtype)
    fields = int(np.prod(lead, dtype=np.int64))
    flat = np.ascontiguousarray(array).reshape(fields, height, width)
    result: np.ndarray = REGISTRY.dispatch(
        "translate", {"stack": _read_only(flat), "shifts": _read_only(flat_moves)}, gpu=use_gpu, backend=backend,
        expected=(flat.shape, array.dtype))
    return result.reshape(array.shape)


def _numpy_score(data: np.ndarray) -> np.ndarray:
    """NumPy's own expression, for the inputs the core answers itself: an empty axis (NaN, as NumPy
    answers it, without its warnings) and a field of one pixel (which NumPy sums pairwise)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        score = data[0].std(axis=0) if data.shape[0] == 1 else data.std(axis=0).mean(axis=0)
    return np.asarray(score, dtype=_F32)


@hookspec
def spacr_accel_spot_score(  # type: ignore[empty-body]  # a specification has no body
    stack: np.ndarray,
) -> np.ndarray:
    """Where a read is likely: how much each pixel changes over the cycles, averaged over channels.

    NumPy's float32 ``stack.std(axis=0).mean(axis=0)`` to the bit, in its order: per pixel, the
    cycles summed in order from ``+0.0`` in float32, divided by their count (rounded once), each
    deviation squared and summed in order from ``+0.0``, divided by the count, the float32 square
    root; then the channels' values summed in order from ``+0.0`` and divided by their count. NaN
    and infinity propagate as in IEEE arithmetic.

    :param stack: a C-contiguous float32 ``(C, K, Y, X)`` stack, ``C >= 1``, ``K >= 1``, at least
        two pixels (spaCR's one-cycle case reaches a backend as ``(K, 1, Y, X)``); never modify it.
    :returns: float32 ``(Y, X)``.
    """


@operation(
    spec=spacr_accel_spot_score,
    task="Read locations scored (spot_score)",
    check=check_array,
    agree=agree_field,
    reference=reference.spot_score,
    small=small_score,
    bench=bench_score,
    dask=OwnGraph(),
)
def spot_score(stack: Any, *, gpu: Any = True, backend: str | None = None) -> np.ndarray:
    """Where a read is likely: the standard deviation over the cycles, averaged over the channels.

    A SEQUENCING SPOT CHANGES COLOUR FROM CYCLE TO CYCLE, a piece of debris does not: this scores
    "something here changed", not "something here is bright". spaCR's
    ``estimate_read_locations`` bit for bit: NumPy's float32 ``stack.std(axis=0).mean(axis=0)``, and
    with one cycle the standard deviation over the channels. NumPy adds a C-ordered stack's cycles
    in order, pixel by pixel, and every backend repeats that order; NaN and infinity propagate as
    they do there.

    :param stack: ``(cycles, channels, Y, X)`` real numbers, taken as float32 (as spaCR does).
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: float32 ``(Y, X)``, high where a read is likely.
    :raises ValueError: ``stack`` is not four-dimensional.
    :raises TypeError: ``stack`` is not real numbers.
    """
    use_gpu = _options(gpu, backend)
    data = score_stack(stack)
    cycles, channels, height, width = data.shape
    if cycles == 0 or channels == 0 or height * width < 2:
        REGISTRY.record_served("spot_score")
        return _numpy_score(data)
    if cycles == 1:  # the spread over the channels instead: the channels as "cycles" of one channel
        data = data[0].reshape(channels, 1, height, width)
    result: np.ndarray = REGISTRY.dispatch(
        "spot_score", {"stack": _read_only(data)}, gpu=use_gpu, backend=backend, expected=((height, width), None))
    return result
