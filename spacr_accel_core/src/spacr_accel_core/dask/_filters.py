"""The decode chain's filters on ``dask.array``: each block with the halo its kernel reaches and
the array's own border continued by the mode, so every block's pixels equal the in-memory answer.

WHY THE HALO MAKES IT EXACT. A separable filter's first pass (down the columns) at a pixel reads
only the rows within its reach, and the second (along the rows) only that row's first-pass values
within its reach; a block extended by the reach on every side, corners included, therefore holds
every value its own pixels' sums read, and each sum is computed in the same order as on the whole
field. At the array's edge the halo is the mode's own continuation (dask's ``reflect`` is SciPy's,
the edge pixel repeated), as long as the reach is at most the axis's length; an axis the kernel
reaches past is handed to each block whole (no halo), and the in-memory call continues it.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np

from .. import ops
from ..operations import _checks
from ._blocks import _F32, _dask, _known, _record

_TASKS = {"gaussian_filter": "spacr_accel-gaussian_filter", "gaussian_laplace": "spacr_accel-gaussian_laplace",
          "minimum_filter": "spacr_accel-minimum_filter", "maximum_filter": "spacr_accel-maximum_filter"}
"""The block tasks' key prefixes, as the dashboard shows them."""


def _block(block: np.ndarray, operation: str, argument: Any, gpu: bool, backend: str | None,
           keywords: dict[str, Any]) -> np.ndarray:
    """The in-memory operation on a block (with its halo), recorded: a stack in one call."""
    out = getattr(ops, operation)(block, argument, gpu=gpu, backend=backend, **keywords)
    _record()
    return out


def _halo(array: da.Array, reach: tuple[int, int]) -> tuple[da.Array, dict[int, int]]:
    """The depth along each axis (the reach over the last two; none where one chunk holds the
    axis), and the array with an axis the reach passes its length rechunked whole."""
    depth = dict.fromkeys(range(array.ndim), 0)
    whole = {}
    for axis, radius in zip((array.ndim - 2, array.ndim - 1), reach, strict=True):
        if len(array.chunks[axis]) == 1 or radius == 0:
            continue
        if radius >= array.shape[axis]:
            whole[axis] = -1  # a kernel longer than the axis: each block gets the axis whole
        else:
            depth[axis] = radius
    return (array.rechunk(whole) if whole else array), depth


def _map(array: da.Array, operation: str, argument: Any, reach: tuple[int, int], boundary: str, gpu: bool,
         backend: str | None, keywords: dict[str, Any]) -> da.Array:
    meta = np.empty((0,) * array.ndim, dtype=_F32)
    array, depth = _halo(array, reach)
    common = {"dtype": _F32, "meta": meta, "token": _TASKS[operation], "operation": operation,
              "argument": argument, "gpu": gpu, "backend": backend, "keywords": keywords}
    if not any(depth.values()):
        return da.map_blocks(_block, array, **common)
    return da.map_overlap(_block, array, depth=depth, boundary=boundary, trim=True, **common)


def _field(field: Any, gpu: Any, backend: Any) -> da.Array:
    _checks._options(gpu, backend)
    array = _dask(field, "field")
    _checks.fields_shape(array.shape)
    _known(array, "field", tuple(range(array.ndim)))
    return array


def smoothing(operation: str, field: Any, sigma: Any, *, truncate: Any, mode: Any, gpu: bool,
              backend: str | None) -> da.Array:
    """``gaussian_filter`` or ``gaussian_laplace`` on a dask array: see :mod:`spacr_accel_core.dask`."""
    array = _field(field, gpu, backend)
    pair = _checks.sigma_pair(sigma)
    reach = _checks.truncate_value(truncate)
    border = _checks.filter_mode(mode)
    radii = _checks.kernel_radii(pair, reach)
    return _map(array, operation, pair, radii, border, gpu, backend, {"truncate": reach, "mode": border})


def extreme(operation: str, field: Any, size: Any, *, mode: Any, gpu: bool, backend: str | None) -> da.Array:
    """``minimum_filter`` or ``maximum_filter`` with ``mode`` on a dask array.

    The window's reach is ``size // 2``, capped at ``length - 1`` (past it the window holds the
    whole axis); either mode's answer is the window clipped to the field, so the halo at the
    array's edge repeats the border for both.
    """
    array = _field(field, gpu, backend)
    window = _checks.window_edge(size)
    border = _checks.filter_mode(mode)
    radii = tuple(min(window // 2, max(array.shape[axis] - 1, 0)) for axis in (-2, -1))
    return _map(array, operation, window, (radii[0], radii[1]), "nearest", gpu, backend, {"mode": border})
