# mypy: disallow-untyped-calls=False
"""The point operations over ``dask.array`` (behind :mod:`spacr_accel_core.dask`).

READ ATTRIBUTION: a read's owner depends on that read and on every object, never on another read,
so the reads are chunked any way along their rows and every block is given all the objects (in
memory, checked once here): the answer is ``ops.attribute_reads`` on all the reads, for every
chunking.

INLIER COUNTS: a set's count reads its own points and every target, so the blocks hold whole sets
(the last two axes brought into one chunk) and any number of them.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np

from .. import ops
from ..operations import _checks
from ._blocks import _dask, _known, _record, _sole_chunk


def _attribute_block(block: np.ndarray, centroids: np.ndarray, areas: np.ndarray, footprint: float, tie: float,
                     gpu: bool, backend: str | None) -> np.ndarray:
    """``ops.attribute_reads`` on a block of reads: int64 ``(n, 2)``, the owner and the flag."""
    owner, ambiguous = ops.attribute_reads(block, centroids, areas, footprint=footprint, tie=tie, gpu=gpu,
                                           backend=backend)
    _record()
    return np.stack([owner, ambiguous.astype(np.int64)], axis=1)


def attribute_reads(peaks: Any, centroids: Any, areas: Any, *, footprint: Any = 10.0, tie: Any = 1.0,
                    gpu: bool = True, backend: str | None = None) -> tuple[da.Array, da.Array]:
    """See :func:`spacr_accel_core.dask.attribute_reads`."""
    _checks._options(gpu, backend)
    ops.attribute_reads(np.zeros((0, 2)), centroids, areas, footprint=footprint, tie=tie)  # the checks, once
    centres = np.ascontiguousarray(_checks._numeric(centroids, "centroids"), dtype=np.float64).reshape(-1, 2)
    area = np.asarray(_checks._numeric(areas, "areas"), dtype=np.float64).reshape(-1)
    array = _dask(peaks, "peaks")
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"peaks must be (N, 2) rows (y, x), got shape {array.shape}")
    _known(array, "peaks", (0,))
    array = _sole_chunk(array, 1)
    both = da.map_blocks(_attribute_block, array, dtype=np.int64, chunks=(array.chunks[0], (2,)),
                         meta=np.empty((0, 2), np.int64), token="spacr_accel-attribute_reads", centroids=centres,
                         areas=area, footprint=float(footprint), tie=float(tie), gpu=gpu, backend=backend)
    return both[:, 0], both[:, 1].astype(bool)


def _count_block(block: np.ndarray, target: np.ndarray, radius: float, gpu: bool, backend: str | None) -> np.ndarray:
    counts = ops.count_within(block, target, radius, gpu=gpu, backend=backend)
    _record()
    return counts


def count_within(moved: Any, target: Any, radius: Any, *, gpu: bool = True, backend: str | None = None) -> da.Array:
    """See :func:`spacr_accel_core.dask.count_within`."""
    _checks._options(gpu, backend)
    array = _dask(moved, "moved")
    if array.ndim < 2 or array.shape[-1] != 2:
        raise ValueError(f"moved must be (..., N, 2) points (y, x), got shape {array.shape}")
    ops.count_within(np.zeros((0, 2)), target, radius)  # the checks of target and radius, once
    dst = np.ascontiguousarray(_checks._numeric(target, "target"), dtype=np.float64).reshape(-1, 2)
    _known(array, "moved", tuple(range(array.ndim)))
    array = _sole_chunk(_sole_chunk(array, array.ndim - 2), array.ndim - 1)
    counts: da.Array = da.map_blocks(_count_block, array, dtype=np.int64, drop_axis=[array.ndim - 2, array.ndim - 1],
                                     meta=np.empty((0,) * (array.ndim - 2), np.int64),
                                     token="spacr_accel-count_within", target=dst, radius=float(radius), gpu=gpu,
                                     backend=backend)
    return counts
