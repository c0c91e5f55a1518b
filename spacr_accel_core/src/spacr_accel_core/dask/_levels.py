# mypy: disallow-untyped-calls=False, warn-return-any=False
"""The levels family over ``dask.array`` (behind :mod:`spacr_accel_core.dask`).

A FIELD IS NEVER SPLIT: a percentile is a property of the whole field, so the last two axes are
brought whole into every block (rechunked where a field spans blocks), and each block of fields is
one ``ops`` call on the worker that computes it; the leading axes keep their chunks. The answer is
``ops`` on the whole stack, bit for bit, for every chunking.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np

from .. import ops
from ..kit._quantiles import percentile_q
from ..operations import _checks
from ._blocks import _dask, _known, _record, _sole_chunk


def _whole_fields(stack: Any) -> da.Array:
    _checks._options(True, None)
    array = _dask(stack, "stack")
    _checks.fields_shape(array.shape, "stack")
    _known(array, "stack", tuple(range(array.ndim)))
    return _sole_chunk(_sole_chunk(array, array.ndim - 2), array.ndim - 1)


def _percentiles_block(block: np.ndarray, q: Any, gpu: bool, backend: str | None, dtype: np.dtype[Any]) -> np.ndarray:
    # A stack whose every field holds NaN answers in the fields' dtype where a float64 q answers
    # finite fields in float64 (NumPy's rule, ops.percentiles'): a dtype that depends on the data,
    # which a dask array cannot declare. Each block answers in the dtype declared from finite
    # fields, the same NaN values in it.
    answer = np.asarray(ops.percentiles(block, q, gpu=gpu, backend=backend)).astype(dtype, copy=False)
    _record()
    return answer


def percentiles(stack: Any, q: Any, *, gpu: bool = True, backend: str | None = None) -> da.Array:
    """See :func:`spacr_accel_core.dask.percentiles`."""
    _checks._options(gpu, backend)
    checked = percentile_q(q)
    array = _whole_fields(stack)
    sample = np.asarray(ops.percentiles(np.zeros((1, 1), dtype=array.dtype), checked, gpu=False))
    last = (array.ndim - 2, array.ndim - 1)
    if sample.ndim == 0:
        return da.map_blocks(_percentiles_block, array, checked, gpu, backend, sample.dtype, dtype=sample.dtype,
                             drop_axis=last,
                             meta=np.empty((0,) * (array.ndim - 2), dtype=sample.dtype))
    return da.map_blocks(_percentiles_block, array, checked, gpu, backend, sample.dtype, dtype=sample.dtype,
                         drop_axis=last[1], chunks=(*array.chunks[:-2], (sample.shape[0],)),
                         meta=np.empty((0,) * (array.ndim - 1), dtype=sample.dtype))


def _rescale_block(block: np.ndarray, scale: np.ndarray, low: np.ndarray, high: np.ndarray, gpu: bool,
                   backend: str | None) -> np.ndarray:
    answer = ops.rescale_fields(block, scale[..., 0, 0], low[..., 0, 0], high[..., 0, 0], gpu=gpu, backend=backend)
    _record()
    return answer


def rescale_fields(stack: Any, scale: Any, low: Any, high: Any, *, gpu: bool = True,
                   backend: str | None = None) -> da.Array:
    """See :func:`spacr_accel_core.dask.rescale_fields`."""
    _checks._options(gpu, backend)
    array = _whole_fields(stack)
    lead = array.shape[:-2]
    values = []
    for value, name in ((scale, "scale"), (low, "low"), (high, "high")):
        given = value if isinstance(value, da.Array) else np.asarray(value)
        if given.dtype.kind not in "biuf":
            raise TypeError(f"{name} must hold real numbers, got dtype {given.dtype}")
        try:
            spread = da.broadcast_to(da.asarray(given), lead)
        except ValueError:
            raise ValueError(f"{name} must broadcast against the stack's leading axes {lead}, got shape "
                             f"{given.shape}") from None
        values.append(spread.rechunk(array.chunks[:-2])[..., None, None])
    dtype = np.asarray(ops.rescale_fields(np.zeros((1, 1), dtype=array.dtype),
                                          *(np.zeros((), dtype=v.dtype) if not isinstance(raw, (int, float))
                                            else raw for v, raw in zip(values, (scale, low, high), strict=True)),
                                          gpu=False)).dtype
    return da.map_blocks(_rescale_block, array, *values, gpu, backend, dtype=dtype,
                         meta=np.empty((0,) * array.ndim, dtype=dtype))
