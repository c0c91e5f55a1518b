"""The Gaussian filters on the floor: SciPy's own, field by field.

The contract's answer IS ``scipy.ndimage``'s (see :mod:`spacr_accel_core.separable`), and SciPy is
this backend's dependency, so the floor asks it directly, one field at a time, writing into the
result: a stack costs its input, its output and SciPy's buffers for one field (the Laplacian's
second term), never a float64 or float32 copy of the whole stack.
"""

from __future__ import annotations

import numpy as np


def _fields(field: np.ndarray, out: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    result = np.empty(field.shape, dtype=np.float32) if out is None else out
    return result, field.reshape(-1, *field.shape[-2:]), result.reshape(-1, *field.shape[-2:])


def gaussian_stack(field: np.ndarray, sigma: tuple[float, float], out: np.ndarray | None, truncate: float,
                   mode: str, laplace: bool) -> np.ndarray:
    """``scipy.ndimage.gaussian_filter`` (or ``gaussian_laplace``) of every field of ``(..., H, W)``.

    :param field: float32 or a camera dtype (each field cast to float32 on its own).
    :param sigma: ``(rows, columns)`` standard deviations.
    :param out: the float32 result to write into, or ``None``.
    :param truncate: the reach in standard deviations.
    :param mode: ``"reflect"`` or ``"nearest"``.
    :param laplace: the Laplacian of the Gaussian rather than the Gaussian.
    :returns: ``out``, or a new float32 array.
    """
    from scipy import ndimage  # a few hundred ms on first import: only when a filter is asked for

    result, fields, into = _fields(field, out)
    run = ndimage.gaussian_laplace if laplace else ndimage.gaussian_filter
    for number in range(fields.shape[0]):
        plane = fields[number] if fields.dtype == np.float32 else fields[number].astype(np.float32)
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN, as SciPy says
            run(plane, sigma, output=into[number], mode=mode, truncate=truncate)
    return result
