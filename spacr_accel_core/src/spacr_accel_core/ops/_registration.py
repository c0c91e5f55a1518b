"""The registration family: the translation between two fields by phase correlation.

Declared here once (its hook's specification beside it). The fields are checked and brought into
the transforms' range here (:mod:`..operations._registration_fields`), a backend answers each
surface's first maximum and its ratio, and the core's verdict (:mod:`..contract._registration`)
turns them into a :class:`Registration`, the same for every backend. Re-exported by
:mod:`spacr_accel_core.ops`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import reference
from ..contract._declaration import NARROW_FIELDS
from ..contract._markers import hookspec
from ..contract._registration import (
    Registration,
    cast_keeping_broadcast,
    judge,
    reference_fields,
)
from ..dispatch._registry import REGISTRY
from ..operations._adapters import (
    adapt_correlation,
)
from ..operations._checks import (
    _F32,
    _I64,
    _numeric,
    _options,
    _read_only,
    expected_shift,
    field_pair,
    ratio_floor,
    shift_tolerance,
)
from ..operations._inputs import (
    registration_bench,
    small_pair,
)
from ..operations._operations import OwnGraph, operation
from ..operations._registration_fields import finite_and_in_range
from ..operations._results import (
    agree_registration,
    check_correlation,
)


def _registered(value: Any, name: str) -> np.ndarray:
    """A field as registration computes on it: float32 or float64 as it is, a camera dtype (every
    value exact in float32) as float32, half the bytes of a float64 copy of a raw stack for the
    same values, other numbers as float64."""
    array = _numeric(value, name)
    if array.dtype in (_F32, np.dtype(np.float64)):
        return array
    return cast_keeping_broadcast(array, _F32 if array.dtype in NARROW_FIELDS else np.dtype(np.float64))


@hookspec
def spacr_accel_phase_correlate(  # type: ignore[empty-body]  # a specification has no body
    first: np.ndarray, second: np.ndarray, pairing: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The phase-correlation surface's peak of each pair of fields, and its height against the surface.

    The surface of a pair is the inverse real FFT, at the field's shape, of the cross-power
    spectrum ``A * conj(B)`` of the float64 real FFTs ``A`` of the pair's reference field and ``B``
    of its ``second`` field, each term divided by its magnitude where that is non-zero (else 0), the
    zero frequency set to 0.

    :param first: a non-empty C-contiguous ``(K, H, W)`` stack of finite float32 or float64
        reference fields (computed on as float64); never modify it.
    :param second: a C-contiguous ``(B, H, W)`` stack of the same dtype and field shape.
    :param pairing: int64 ``(B,)``: field ``i`` of ``second`` is registered against
        ``first[pairing[i]]``. One reference field commonly serves many pairs (every cycle against
        the reference cycle): compute its transform once. A field equal to an earlier one is
        never pointed at (the pairs point at the earlier one). Optional: a plugin that leaves it out
        of its signature receives ``first[pairing]``, one reference field per pair.
    :returns: ``(peaks, ratios)``: int64 ``(B,)`` flat row-major index of each surface's FIRST
        maximum, and float64 ``(B,)`` that maximum divided by the mean absolute value of the
        surface (0 where that mean is 0). A device without float64 computes in float32.
    """


@operation(
    spec=spacr_accel_phase_correlate,
    task="Cycle registration (phase_correlate)",
    check=check_correlation,
    agree=agree_registration,
    reference=reference.phase_correlate,
    small=small_pair,
    bench=registration_bench,
    adapt=adapt_correlation,
    optional={"pairing": None},
    dask=OwnGraph(),
)
def phase_correlate(first: Any, second: Any, *, expected: Any = (0, 0), tolerance: Any = None,
                    min_peak_ratio: Any = 3.0, gpu: Any = True, backend: str | None = None) -> Registration:
    """The translation that lands ``second`` on ``first``, by phase correlation: how cycles are registered.

    A drop-in for spaCR's ``ops_register.phase_correlate``: the float64 cross-power spectrum,
    normalised to unit magnitude, transformed back; its first maximum (row-major) is the wrapped
    shift, folded to the representative nearest ``expected``. ``np.roll(second, (dy, dx),
    axis=(-2, -1))`` equals ``first`` for a pure circular shift. A stack of pairs is one call (on a
    card one batch of transforms, sized to the free memory).

    :param first: the reference field, 2-D, or a stack ``(..., H, W)``.
    :param second: the field(s) to place against it, the same shape.
    :param expected: ``(rows, columns)``, roughly where ``second`` lies: the unwrap's centre
        (within ``2**62`` pixels either way: the shift is int64).
    :param tolerance: how far from ``expected`` a shift may land and be accepted: one number, or
        ``(rows, columns)``; when given, it IS the test and the peak ratio is only recorded.
    :param min_peak_ratio: without a tolerance, the least peak-to-mean ratio a pair is accepted at
        (a peak at the origin, the no-overlap signature, never is).
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: a :class:`Registration`: scalars for two 2-D fields, arrays of ``shape[:-2]`` for
        stacks. A field with no variation is never accepted (its ratio is 0); a field's scale
        never matters (one of ``1e-200`` is moved into range by an exact power of two).
    :raises ValueError: different shapes, fewer than two dimensions, an empty field, NaN or
        infinite pixels, a bad ``expected``, ``tolerance`` or ``min_peak_ratio``.
    :raises TypeError: non-numeric input or options.
    """
    use_gpu = _options(gpu, backend)
    about = expected_shift(expected)
    limits = shift_tolerance(tolerance)
    floor = ratio_floor(min_peak_ratio)
    a, b = _registered(first, "first"), _registered(second, "second")
    field_pair(a, b)
    if a.dtype != b.dtype:
        a, b = cast_keeping_broadcast(a, np.dtype(np.float64)), cast_keeping_broadcast(b, np.dtype(np.float64))
    shape = a.shape
    count = int(np.prod(shape[:-2], dtype=np.int64))
    a, b, varies = finite_and_in_range(a, b)
    if count == 0:
        REGISTRY.record_served("phase_correlate")
        return judge(np.zeros(0, _I64), np.zeros(0), varies, shape, about, limits, floor, "core")
    fields, pairing = reference_fields(a)
    b3 = np.ascontiguousarray(b).reshape(count, *shape[-2:])
    peaks, ratios = REGISTRY.dispatch(
        "phase_correlate", {"first": _read_only(fields), "second": _read_only(b3), "pairing": _read_only(pairing)},
        gpu=use_gpu, backend=backend, expected=(count, shape[-2] * shape[-1]))
    served = REGISTRY.last_dispatch()
    return judge(peaks, ratios, varies, shape, about, limits, floor, served.backend if served else "unknown")
