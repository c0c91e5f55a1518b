"""How the patch serves ``spacr.ops_phenotype.nuclear_points``: the same nuclear centres, bit for bit,
or the call left to spaCR.

spaCR smooths the plane (SciPy's ``gaussian_filter``), takes its percentile as a floor
(``np.percentile``), finds the peaks with scikit-image's ``peak_local_max`` (its own maximum filter,
then one KD-tree query and one distance matrix per peak to space them) and keeps the ``top``
brightest. Here each step is the registry's: ``gaussian_filter`` (SciPy's bits), the percentile
(``np.percentile``'s bits: its index arithmetic and interpolation on order statistics selected above
a sampled bound, :func:`~spacr_accel_core.kit._peaks.high_order_statistics`, or the registry's
``percentiles``), ``local_maxima`` (the pixels equal to their window's maximum, above the
floor), and ``spaced_peaks``, which drops the border, orders and spaces them as ``peak_local_max``
does. The ``top`` cut is spaCR's own ``argsort`` on the same values in the same order, so even its
order among equal values is spaCR's.

Left to spaCR before anything is computed: a plane that is not a real ndarray of two dimensions, a
float32 reading that warns, a value that is not finite or beyond ``1e30`` (where smoothing could
overflow), and any keyword whose arithmetic is not plain (``sigma`` other than a Python or 64-bit
number, ``percentile`` other than a Python number in ``[0, 100]``, ``min_distance`` below 1 (where
scikit-image warns) or above the plane's side, ``top`` that is not an integer).
"""

from __future__ import annotations

import math
import numbers
import sys
from typing import Any

import numpy as np

from .. import ops
from ..kit._peaks import high_order_statistics
from ..kit._quantiles import lerp, quantile_plan
from ._outcome import PassThrough, served_by

__all__ = ["nuclear_points"]

_LARGEST = 1e30
"""Planes up to this magnitude smooth without overflow: SciPy's weights sum to one."""

_WIDEST_SIGMA = 1e3
"""Kernels beyond this are left to SciPy (its half-width ``4 * sigma`` outgrows any plane)."""

_SMALLEST_SIGMA = math.sqrt(sys.float_info.min)
"""Below this SciPy's ``sigma * sigma`` is subnormal or zero, and its kernel divides by it."""


def _plane(image: Any) -> np.ndarray:
    """``np.asarray(image, np.float32)`` as spaCR reads it, where that reading is quiet and 2-D."""
    if type(image) is not np.ndarray or image.dtype.kind not in "biuf":
        raise PassThrough("an image that is not a real ndarray (spaCR's own reading)")
    if image.ndim != 2 or image.size == 0:
        raise PassThrough("an image that is not a non-empty plane")
    try:
        with np.errstate(all="raise"):
            plane = np.asarray(image, np.float32)
    except FloatingPointError:
        raise PassThrough("an image whose float32 reading warns (spaCR's own cast)") from None
    lowest, highest = float(plane.min()), float(plane.max())
    if not (lowest >= -_LARGEST and highest <= _LARGEST):
        raise PassThrough("a NaN, an infinity or a value beyond 1e30 in the image")
    return plane


def _sigma(sigma: Any) -> float:
    """SciPy builds its kernel from ``sigma`` as passed: only a Python or 64-bit number reads as the
    float64 the registry is given."""
    if isinstance(sigma, bool) or type(sigma) not in (float, int, np.float64, np.int64):
        raise PassThrough(f"sigma={sigma!r} (SciPy builds the kernel in that number's own type)")
    width = float(sigma)
    if not _SMALLEST_SIGMA <= width <= _WIDEST_SIGMA:
        raise PassThrough(f"sigma={sigma!r} (the registry serves sigma in [1.5e-154, 1000])")
    return width


def _percentile(percentile: Any) -> float | int:
    """A Python number: NumPy answers a float32 plane's percentile in float32 for it (a NumPy float64
    would promote the answer), and refuses one outside ``[0, 100]``."""
    if isinstance(percentile, bool) or type(percentile) not in (float, int):
        raise PassThrough(f"percentile={percentile!r} (a NumPy or other number promotes NumPy's answer)")
    if not 0 <= percentile <= 100:
        raise PassThrough(f"percentile={percentile!r} (NumPy refuses it)")
    number: float | int = percentile
    return number


def _min_distance(min_distance: Any, plane: np.ndarray) -> int:
    """``int(min_distance)`` as spaCR takes it, from an integer or a finite float."""
    if isinstance(min_distance, bool) or not isinstance(min_distance, (numbers.Integral, float, np.floating)):
        raise PassThrough(f"min_distance={min_distance!r} (spaCR's own int())")
    if not math.isfinite(min_distance):
        raise PassThrough(f"min_distance={min_distance!r} (int() refuses it)")
    distance = int(min_distance)
    if distance < 1:
        raise PassThrough(f"min_distance={min_distance!r} (scikit-image warns and thresholds instead)")
    if distance > max(plane.shape):
        raise PassThrough(f"min_distance={min_distance!r} beyond the plane (scikit-image's own footprint)")
    return distance


def _floor_of(smooth: np.ndarray, percentile: float | int) -> float:
    """``float(np.percentile(smooth, percentile))``: NumPy's index arithmetic and interpolation
    (``quantile_plan``, ``lerp``, as the registry's ``percentiles`` applies them) on the order
    statistics selected among the values above a sampled bound where they are high ones, the
    registry's ``percentiles`` otherwise."""
    plan = quantile_plan(smooth.size, percentile)
    found = high_order_statistics(smooth, plan.ranks)
    if found is None:
        return float(ops.percentiles(smooth, percentile))
    return float(lerp(found[plan.lower], found[plan.upper], plan.gamma)[0])


def nuclear_points(image: Any, *, sigma: Any = 3.0, min_distance: Any = 8, top: Any = 600,
                   percentile: Any = 99.0) -> tuple[Any, str]:
    """``spacr.ops_phenotype.nuclear_points``: the smoothed plane's spaced local maxima above its
    percentile, the ``top`` brightest, as float64 ``(N, 2)`` row/column centres."""
    plane = _plane(image)
    width = _sigma(sigma)
    floor = _percentile(percentile)
    distance = _min_distance(min_distance, plane)
    if isinstance(top, bool) or not isinstance(top, numbers.Integral):
        raise PassThrough(f"top={top!r} (spaCR's own slice)")
    smooth = ops.gaussian_filter(plane, width, truncate=4.0, mode="reflect")
    threshold = _floor_of(smooth, floor)
    maxima = ops.local_maxima(smooth, 2 * distance + 1, threshold=threshold)
    backend = served_by()
    peaks = ops.spaced_peaks(smooth, maxima, distance)
    if peaks.shape[0] > top:
        brightest = np.argsort(smooth[peaks[:, 0], peaks[:, 1]])[::-1][:top]
        peaks = peaks[brightest]
    return peaks.astype(float), backend
