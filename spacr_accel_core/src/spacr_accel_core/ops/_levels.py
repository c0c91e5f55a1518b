"""Per-field percentiles, and the clip and scale spaCR applies with them: the levels family of ``ops``.

spaCR sets a channel's levels from its own percentiles before it registers it: ``_clipped`` clips a
base channel between its minimum and its 90th percentile (so the spots no longer dominate the
correlation), and ``sbs_mean_target`` divides the channels' maximum by its 70th percentile and
clips it to ``[0, 1]``. Both call ``np.percentile`` once per field; here a stack of fields is one
call, and the answer is NumPy's BIT FOR BIT.

HOW THE BITS ARE KEPT. A percentile is two order statistics and an interpolation between them. The
order statistics are exact on every backend (an element of the field is selected, not computed), so
they are what a backend returns (``spacr_accel_percentiles``). The interpolation is NumPy's own, done
here on the host with NumPy's ufuncs in NumPy's dtypes: the virtual index ``(n - 1) * q / 100``, its
floor and the next index, the weight ``gamma``, and ``_lerp``'s two branches (``a + (b - a) * t``,
and ``b - (b - a) * (1 - t)`` where ``t >= 0.5``), with ``b - a`` in the field's dtype. A plain
Python number ``q`` is weak (NEP 50): for a float32 field the whole interpolation is float32, and
so is the answer, as NumPy gives it; a sequence (or a NumPy number) interpolates in float64.

WHERE SELECTION CANNOT SAY. ``np.partition`` treats ``-0.0`` and ``+0.0`` as equal, so which one
lands at a rank is its algorithm's choice, and the sign of a zero percentile can follow it (only
where ``t >= 0.5`` and both order statistics are zeros). For such an answer, in a field that holds
both zeros, the core asks NumPy itself for that field: never reached by a camera field.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import reference
from ..contract._markers import hookspec
from ..dispatch._registry import REGISTRY
from ..kit._quantiles import QuantilePlan, lerp, percentile_q, quantile_plan
from ..operations._checks import _F32, _numeric, _options, _read_only, fields_shape
from ..operations._levels import (
    agree_levels,
    bench_percentiles,
    bench_rescale,
    check_order_statistics,
    check_rescaled,
    small_percentiles,
    small_rescale,
)
from ..operations._operations import OwnGraph, operation

__all__ = ["clip_to_percentiles", "normalise_to_percentile", "percentiles", "rescale_fields"]

_F64 = np.dtype(np.float64)
_SELECTED_AS: dict[np.dtype[Any], np.dtype[Any]] = {
    np.dtype(name): _F32 for name in ("float16", "uint8", "int8", "uint16", "int16")} | {
    np.dtype("int32"): _F64, np.dtype("uint32"): _F64, _F32: _F32, _F64: _F64}
"""The dtype a backend selects in, for each dtype of field served: every value exact in it."""


def _stack(stack: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The stack checked, and its fields as ``(F, H, W)`` in the dtype a backend selects in.

    :raises TypeError: not real numbers, or a dtype whose values a backend cannot hold exactly.
    :raises ValueError: fewer than two dimensions, or fields without pixels.
    """
    array = _numeric(stack, name)
    fields_shape(array.shape, name)
    if array.dtype not in _SELECTED_AS:
        raise TypeError(f"{name} must be float32, float64, or an integer dtype of at most 32 bits (every value "
                        f"exact in float64, where the order statistics are selected), got {array.dtype}")
    if array.shape[-2] * array.shape[-1] == 0:
        raise ValueError(f"{name}'s fields hold no pixels (shape {array.shape}): a percentile of nothing is undefined")
    fields = int(np.prod(array.shape[:-2], dtype=np.int64))
    flat = np.ascontiguousarray(array.reshape(fields, *array.shape[-2:]))
    selected = _SELECTED_AS[array.dtype]
    return array, flat if flat.dtype == selected else flat.astype(selected)


def _signed_zeros(result: np.ndarray, plan: QuantilePlan, array: np.ndarray, q: Any) -> np.ndarray:
    """Each field whose answer is a zero read from the ``t >= 0.5`` branch and holds both signed
    zeros: NumPy's own answer for it (whose sign follows its partition's order)."""
    if array.dtype.kind != "f" or result.size == 0:
        return result
    rows = result.reshape(result.shape[0], -1)
    risky = (rows == 0) & (np.asarray(plan.gamma) >= 0.5)
    for field in np.flatnonzero(risky.any(axis=1)):
        values = array.reshape(rows.shape[0], -1)[field]
        zeros = np.signbit(values[values == 0])
        if zeros.any() and not zeros.all():
            rows[field] = np.percentile(values, q)
    return result


@hookspec
def spacr_accel_percentiles(  # type: ignore[empty-body]  # a specification has no body
    stack: np.ndarray, ranks: np.ndarray
) -> np.ndarray:
    """The order statistics each field's percentiles are read from (the core interpolates them).

    ``values[f, j]`` is the element ``np.partition(stack[f].ravel(), ranks[j])[ranks[j]]``: the
    ``ranks[j]``-th smallest pixel of field ``f`` (0-based), an element of the field, never a
    computed value, so every backend answers the same numbers (``-0.0`` and ``+0.0`` are equal here,
    and either may be returned for a zero). A field holding NaN has NaN in every entry of its row.

    :param stack: a non-empty C-contiguous ``(F, H, W)`` float32 or float64 stack, ``H * W >= 1``
        (the core casts other dtypes exactly to one of them); never modify it.
    :param ranks: C-contiguous int64 ``(R,)``, strictly increasing, each in ``[0, H * W)``, ``R >= 1``.
    :returns: ``(F, R)`` in the stack's dtype.
    """


@operation(
    spec=spacr_accel_percentiles,
    task="Channel levels (percentiles)",
    check=check_order_statistics,
    agree=agree_levels,
    reference=reference.percentiles,
    small=small_percentiles,
    bench=bench_percentiles,
    dask=OwnGraph(),
)
def percentiles(stack: Any, q: Any, *, gpu: Any = True, backend: str | None = None) -> Any:
    """``np.percentile(field, q)`` for every field of a stack, in one call, bit for bit.

    "A channel's levels are read off its own distribution": spaCR clips a base channel at its 90th
    percentile and scales the channels' maximum by its 70th. Each field (the last two axes) is one
    sample; NumPy's default ``"linear"`` method, its dtype rules (a Python number ``q`` on a
    float32 field answers in float32, a sequence in float64), a field holding NaN answers NaN.

    :param stack: a 2-D field or a stack ``(..., H, W)`` of float32, float64 or integer (at most
        32 bits) fields, each with at least one pixel.
    :param q: a percentile in ``[0, 100]``, or a 1-D sequence of them.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: ``(..., len(q))`` for a sequence, ``(...)`` for one percentile (a NumPy scalar for one
        2-D field), in NumPy's dtype.
    :raises ValueError: fewer than two dimensions, fields without pixels, ``q`` outside ``[0, 100]``,
        NaN, or of more than one dimension.
    :raises TypeError: non-numeric ``stack`` or ``q``, or int64 fields (not exact in float64).
    """
    use_gpu = _options(gpu, backend)
    checked = percentile_q(q)
    array, flat = _stack(stack, "stack")
    plan = quantile_plan(flat.shape[1] * flat.shape[2], checked)
    if flat.shape[0] == 0 or plan.ranks.size == 0:
        REGISTRY.record_served("percentiles")
        values = np.zeros((flat.shape[0], plan.ranks.size), dtype=array.dtype)
    else:
        values = REGISTRY.dispatch("percentiles", {"stack": _read_only(flat), "ranks": _read_only(plan.ranks)},
                                   gpu=use_gpu, backend=backend, expected=(flat.shape[0], plan.ranks.size, flat.dtype))
        values = values.astype(array.dtype, copy=False)
    a, b = values[:, plan.lower], values[:, plan.upper]
    if plan.scalar:
        a, b = a[:, 0], b[:, 0]
    with np.errstate(all="ignore"):
        result = lerp(a, b, plan.gamma)
    if array.dtype.kind == "f" and values.size:
        holding = np.isnan(values[:, 0])
        if holding.any():
            if plan.scalar and array.ndim == 2:
                return values[0, 0]  # NumPy answers the NaN its partition put last, in the field's dtype
            if plan.scalar and holding.all():
                # each field's answer is that NaN in the field's dtype (a float64 q included), so the
                # fields' answers stacked are in it too; one finite field makes them float64
                result = values[:, 0].copy()
            else:
                result[holding] = values[holding, 0] if plan.scalar else values[holding, :1]
    result = _signed_zeros(result, plan, array, q)
    shaped = result.reshape((*array.shape[:-2], *result.shape[1:]))
    return shaped[()] if shaped.ndim == 0 else shaped


def _per_field(value: Any, name: str, lead: tuple[int, ...]) -> np.ndarray:
    """One number per field: ``value`` broadcast against the stack's leading axes."""
    array = _numeric(value, name)
    try:
        return np.broadcast_to(array, lead)
    except ValueError:
        raise ValueError(f"{name} must broadcast against the stack's leading axes {lead}, got shape "
                         f"{array.shape}") from None


@hookspec
def spacr_accel_rescale_fields(  # type: ignore[empty-body]  # a specification has no body
    stack: np.ndarray, scale: np.ndarray, low: np.ndarray, high: np.ndarray
) -> np.ndarray:
    """Each field divided by its scale and clipped between its bounds: the level set of a channel.

    ``out[f] = clip(D(stack[f]) / scale[f], low[f], high[f])`` in ``D = low.dtype``, per pixel:
    ``y = x / scale`` (IEEE, rounded once; a scale of exactly 1 may be skipped, it is exact), then
    NumPy's clip: ``y`` if ``y`` is NaN, else ``y`` if ``y >= low`` else ``low``; then that if it is
    NaN or ``<= high``, else ``high``; a NaN ``low`` or ``high`` makes the whole field NaN.

    :param stack: a non-empty C-contiguous ``(F, H, W)`` float32 or float64 stack; never modify it.
    :param scale: C-contiguous ``(F,)`` in ``D``.
    :param low: C-contiguous ``(F,)``, float32 or float64: ``D``.
    :param high: C-contiguous ``(F,)`` in ``D``.
    :returns: a new ``(F, H, W)`` array in ``D`` (float32 from a float64 stack never: the core
        sends a float64 stack only with ``D`` float64).
    """


@operation(
    spec=spacr_accel_rescale_fields,
    task="Channel clip and scale (rescale_fields)",
    check=check_rescaled,
    agree=agree_levels,
    reference=reference.rescale_fields,
    small=small_rescale,
    bench=bench_rescale,
    dask=OwnGraph(),
)
def rescale_fields(stack: Any, scale: Any, low: Any, high: Any, *, gpu: Any = True,
                   backend: str | None = None) -> np.ndarray:
    """Each field divided by its ``scale`` and clipped between its ``low`` and ``high``: a level set.

    Exactly ``np.clip(field.astype(D) / scale, low, high)`` field by field, with ``D`` float64 where
    ``scale``, ``low``, ``high`` or the stack is float64 (or a 32-bit integer), else float32: NumPy's
    clip (a NaN pixel stays NaN, a NaN bound makes the field NaN, a pixel equal to a bound is kept as
    it is, and ``low > high`` gives ``high``). A scale of 1 leaves the field as it is.

    :param stack: a 2-D field or a stack ``(..., H, W)``, as for :func:`percentiles`.
    :param scale: the divisor of each field: a number, or one per field (``stack.shape[:-2]``).
    :param low: the lower bound of each field, likewise.
    :param high: the upper bound of each field, likewise.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: ``D`` of ``stack``'s shape.
    :raises ValueError: fewer than two dimensions, or a per-field value of the wrong shape.
    :raises TypeError: non-numeric input, or int64 fields.
    """
    use_gpu = _options(gpu, backend)
    array = _numeric(stack, "stack")
    fields_shape(array.shape, "stack")
    if array.dtype not in _SELECTED_AS:
        raise TypeError(f"stack must be float32, float64, or an integer dtype of at most 32 bits, got {array.dtype}")
    lead = array.shape[:-2]
    named = ((scale, "scale"), (low, "low"), (high, "high"))
    given = [_per_field(value, name, lead) for value, name in named]
    source = _SELECTED_AS[array.dtype]
    # A Python number is weak (NEP 50): it takes the field's dtype; a NumPy value's dtype counts.
    strong = [value.dtype for value, (raw, _) in zip(given, named, strict=True) if type(raw) not in (int, float)]
    wide = source == _F64 or any(_SELECTED_AS.get(kind, _F32 if kind.kind == "b" else _F64) == _F64 for kind in strong)
    dtype = _F64 if wide else _F32
    fields = int(np.prod(lead, dtype=np.int64))
    if fields == 0 or array.shape[-2] * array.shape[-1] == 0:
        REGISTRY.record_served("rescale_fields")
        return np.empty(array.shape, dtype=dtype)
    flat = np.ascontiguousarray(array.reshape(fields, *array.shape[-2:]))
    flat = flat if flat.dtype == source else flat.astype(source)
    with np.errstate(over="ignore"):
        scale_, low_, high_ = (np.ascontiguousarray(value.reshape(fields), dtype=dtype) for value in given)
    result: np.ndarray = REGISTRY.dispatch(
        "rescale_fields", {"stack": _read_only(flat), "scale": _read_only(scale_), "low": _read_only(low_),
                           "high": _read_only(high_)},
        gpu=use_gpu, backend=backend, expected=(flat.shape, dtype))
    return result.reshape(array.shape)


def clip_to_percentiles(stack: Any, low: Any, high: Any, *, gpu: Any = True, backend: str | None = None) -> np.ndarray:
    """Each field clipped between two of its own percentiles: spaCR's ``_clipped`` for a stack.

    Exactly ``np.clip(field, *np.percentile(field, [low, high]))`` per field: the bounds float64
    (a sequence ``q``), so the clipped field is float64 as NumPy gives it.

    :param stack: a 2-D field or a stack ``(..., H, W)``, as for :func:`percentiles`.
    :param low: the lower percentile, in ``[0, 100]`` (0: the field's minimum).
    :param high: the upper percentile, in ``[0, 100]``.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: float64 of ``stack``'s shape (NaN throughout a field that holds NaN).
    :raises ValueError: as :func:`percentiles`, naming ``low`` or ``high``.
    :raises TypeError: as :func:`percentiles`.
    """
    for value, name in ((low, "low"), (high, "high")):
        if np.ndim(value) != 0:
            raise ValueError(f"{name} must be one percentile, got shape {np.shape(value)}")
        percentile_q(value, name)
    bounds = np.asarray(percentiles(stack, [low, high], gpu=gpu, backend=backend))
    return rescale_fields(stack, 1.0, bounds[..., 0], bounds[..., 1], gpu=gpu, backend=backend)


def normalise_to_percentile(stack: Any, q: Any, *, cutoff: Any = 1.0, gpu: Any = True,
                            backend: str | None = None) -> np.ndarray:
    """Each float32 field divided by its ``q``-th percentile where that is positive, clipped to
    ``[0, cutoff]``: spaCR's ``sbs_mean_target`` after its maximum over channels, for a stack.

    Exactly, per field ``f = field.astype(float32)``: ``s = float(np.percentile(f, q))``,
    ``f = f / s`` if ``s > 0``, then ``np.clip(f, 0.0, cutoff).astype(float32)`` (a Python ``q``
    reads the percentile in float32, as NumPy does; the division and the clip are float32).

    :param stack: a 2-D field or a stack ``(..., H, W)`` (cast to float32 first, as spaCR does).
    :param q: the percentile each field is divided by, one number in ``[0, 100]``.
    :param cutoff: the value the result is clipped at (a real number; NaN makes the result NaN).
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: float32 of ``stack``'s shape.
    :raises ValueError: as :func:`percentiles`, or ``q`` not one number.
    :raises TypeError: as :func:`percentiles`, or ``cutoff`` not a real number.
    """
    if np.ndim(q) != 0:
        raise ValueError(f"q must be one percentile, got shape {np.shape(q)}")
    if isinstance(cutoff, (bool, np.bool_)) or np.ndim(cutoff) != 0 or np.asarray(cutoff).dtype.kind not in "iuf":
        raise TypeError(f"cutoff must be a real number, got {cutoff!r}")
    array = _numeric(stack, "stack")
    with np.errstate(over="ignore"):
        fields = array if array.dtype == _F32 else array.astype(_F32)
    scales = np.asarray(percentiles(fields, q, gpu=gpu, backend=backend), dtype=_F64)
    with np.errstate(over="ignore"):
        divisor = np.where(scales > 0, scales, 1.0).astype(_F32)
        top = np.float32(float(cutoff))
    zero = np.zeros(divisor.shape, _F32)
    return rescale_fields(fields, divisor, zero, np.full(divisor.shape, top, _F32), gpu=gpu, backend=backend)
