"""The decode chain's filters against the array-library kit: SciPy's Gaussian passes as float64
elementwise operations, and the windowed minimum from the windowed maximum.

Each pass is SciPy's sum written out (see :mod:`spacr_accel_core.separable`): the centre times its
weight, then each mirrored pair from the outermost in, each step its own elementwise kernel (one
rounding per operation: nothing fuses a multiply into an add), rounded to float32 after the pass.
One field at a time on the device, in float64: a stack costs its input, its output and a few
copies of one field.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spacr_accel_core.toolkit import Pass, gaussian_passes, laplace_terms, source_index

from ._kit import Kit
from ._peaks import maximum_filter_stack

__all__ = ["gaussian", "minimum_filter"]

_F32 = np.dtype(np.float32)


def _pass(kit: Kit, values: Any, step: Pass, mode: str) -> Any:
    """One 1-D correlation of a float64 field along ``step.axis``, in SciPy's order, rounded to float32
    (returned as float64 holding the float32 values, as SciPy's next pass reads them)."""
    xp = kit.xp
    axis = values.ndim + step.axis
    length, radius = values.shape[axis], step.radius
    line = xp.take(values, kit.to_device(source_index(length, radius, mode)), axis=axis)

    def shifted(offset: int) -> Any:  # along ``axis`` of a field or a stack of fields
        return line[(slice(None),) * axis + (slice(radius + offset, radius + offset + length),)]

    acc = shifted(0) * step.weights[0]
    for j in range(radius, 0, -1):
        pair = shifted(-j) + shifted(j) if step.sign > 0 else shifted(-j) - shifted(j)
        acc = acc + pair * step.weights[j]
    return acc.astype(xp.float32).astype(xp.float64)


def _term(kit: Kit, values: Any, passes: tuple[Pass, ...], mode: str) -> Any:
    for step in passes:
        values = _pass(kit, values, step, mode)
    return values.astype(kit.xp.float32)


def gaussian(kit: Kit, field: np.ndarray, sigma: tuple[float, float], truncate: float, mode: str,
             laplace: bool) -> np.ndarray:
    """``gaussian_filter`` (or ``gaussian_laplace``) of a 2-D float32 field, or of every field of a
    stack ``(..., H, W)`` in one call, SciPy's bits.

    :param kit: the library to run on.
    :param field: non-empty float32, 2-D or a stack (never modified).
    :param sigma: ``(rows, columns)``, not both skipped.
    :param truncate: the reach in standard deviations.
    :param mode: ``"reflect"`` or ``"nearest"``.
    :param laplace: the Laplacian of the Gaussian rather than the Gaussian.
    :returns: a new float32 array of the field's shape.
    """
    terms = laplace_terms(sigma, truncate) if laplace else (gaussian_passes(sigma, truncate),)
    values = kit.to_device(np.ascontiguousarray(field, dtype=_F32)).astype(kit.xp.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN, as in SciPy (the NumPy kit)
        result = _term(kit, values, terms[0], mode)
        for passes in terms[1:]:
            result = result + _term(kit, values, passes, mode)  # float32 + float32, as SciPy adds them
    return np.asarray(kit.to_host(result), dtype=_F32)


def minimum_filter(kit: Kit, field: np.ndarray, size: int) -> np.ndarray:
    """The window minimum of every 2-D float32 field of ``(..., H, W)`` (a stack in one call): the
    negated field's window maximum, negated
    (exact; a NaN stays a NaN), its zeros made ``+0.0``."""
    result = maximum_filter_stack(kit, np.negative(np.asarray(field, dtype=_F32)), size)
    np.negative(result, out=result)
    result += np.float32(0.0)
    return result
