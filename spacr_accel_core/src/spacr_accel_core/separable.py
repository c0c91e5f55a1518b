"""The Gaussian passes every backend runs: the public face, for third-party backend authors, of the
kit's module that defines them (``spacr_accel_core.kit._separable``).

``scipy.ndimage.gaussian_filter`` and ``gaussian_laplace`` of a float32 field are 1-D correlations,
one axis at a time, each summed in float64 in one order and rounded to float32 before the next: a
backend that follows them gives SciPy's bits, one that sums in another order is close but not
equal. :func:`gaussian_passes` and :func:`laplace_terms` give the passes (SciPy's float64 weights,
:func:`gaussian_weights`, computed on the host), :class:`Pass` the order each pixel's sum is taken
in, and :func:`source_index` the line continued past its edge by the boundary mode. The same names,
but :func:`gaussian_weights`, are in :mod:`spacr_accel_core.toolkit`.
"""

from __future__ import annotations

from .kit._separable import Pass, gaussian_passes, gaussian_weights, laplace_terms, source_index

__all__ = ["Pass", "gaussian_passes", "gaussian_weights", "laplace_terms", "source_index"]
