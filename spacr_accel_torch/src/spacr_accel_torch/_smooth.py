"""The decode chain's filters in torch: SciPy's Gaussian passes as float64 elementwise tensor
operations, and the windowed minimum from the windowed maximum.

WHY NOT ``conv1d``. A convolution sums its products in whatever order its kernel chooses (and in
float32, or TF32, on a card); SciPy's answer is one float64 sum in one order (see
:mod:`spacr_accel_core.separable`). Each pass here is that sum written out: the centre times its
weight, then each mirrored pair from the outermost in, each step one elementwise kernel over the
whole field (one rounding per operation: a separate multiply and add are never fused), rounded to
float32 after the pass. A device without float64 (Metal) declines.

One field at a time on the device, in float64 (about five copies of one field): a stack costs its
input, its output and that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from spacr_accel_core import BackendDeclined
from spacr_accel_core.toolkit import Pass, gaussian_passes, laplace_terms, source_index

from ._runtime import Device, tensor
from ._stacks import maximum_filter_stack

if TYPE_CHECKING:
    import torch

_F32 = np.dtype(np.float32)


def _pass(values: torch.Tensor, step: Pass, mode: str) -> torch.Tensor:
    """One 1-D correlation of a float64 field along ``step.axis``, in SciPy's order, rounded to float32
    (returned as float64 holding the float32 values, as SciPy's next pass reads them)."""
    import torch

    dim = values.dim() + step.axis
    length, radius = values.shape[dim], step.radius
    where = torch.as_tensor(source_index(length, radius, mode), device=values.device)
    line = values.index_select(dim, where)
    acc = line.narrow(dim, radius, length) * step.weights[0]
    for j in range(radius, 0, -1):
        left, right = line.narrow(dim, radius - j, length), line.narrow(dim, radius + j, length)
        pair = left + right if step.sign > 0 else left - right
        acc = acc + pair * step.weights[j]
    return acc.to(torch.float32).to(torch.float64)


def _term(field: torch.Tensor, passes: tuple[Pass, ...], mode: str) -> torch.Tensor:
    import torch

    values = field
    for step in passes:
        values = _pass(values, step, mode)
    return values.to(torch.float32)


def gaussian(field: np.ndarray, sigma: tuple[float, float], truncate: float, mode: str, laplace: bool,
             device: Device) -> np.ndarray:
    """``gaussian_filter`` (or ``gaussian_laplace``) of one 2-D float32 field, SciPy's bits.

    :param field: non-empty 2-D float32 (never modified).
    :param sigma: ``(rows, columns)``, not both skipped.
    :param truncate: the reach in standard deviations.
    :param mode: ``"reflect"`` or ``"nearest"``.
    :param laplace: the Laplacian of the Gaussian rather than the Gaussian.
    :param device: where to compute.
    :raises BackendDeclined: the device has no float64.
    """
    import torch

    if not device.float64:
        raise BackendDeclined(f"{device.torch} has no float64, and SciPy's answer is summed in float64")
    terms = laplace_terms(sigma, truncate) if laplace else (gaussian_passes(sigma, truncate),)
    values = tensor(np.ascontiguousarray(field, dtype=_F32), device.torch).to(torch.float64)
    result = _term(values, terms[0], mode)
    for passes in terms[1:]:
        result = result + _term(values, passes, mode)  # float32 + float32, as SciPy adds the terms
    out = np.empty(field.shape, dtype=_F32)
    torch.from_numpy(out).copy_(result)
    return out


def minimum(field: np.ndarray, size: int, device: Device) -> np.ndarray:
    """The window minimum of every 2-D float32 field of ``(..., H, W)`` (a stack in one call): the
    negated field's window maximum, negated
    (exact: negation only flips the sign; a NaN stays a NaN), its zeros made ``+0.0``."""
    negated = np.negative(np.asarray(field, dtype=_F32))
    result = maximum_filter_stack(negated, size, device)
    np.negative(result, out=result)
    result += np.float32(0.0)
    return result
