# mypy: disallow-untyped-calls=False, warn-return-any=False
"""The decode chain's two steps over ``dask.array`` (behind :mod:`spacr_accel_core.dask`).

WINDOW MAXIMA: each block of a chunked stack is grown by the window's radius along the rows and
columns (the border repeated at the array's edge, which is the clipped window for a maximum), and
reads the points whose centres lie in its own pixels; the blocks' values are put back in the
points' order, so the answer is ``ops.window_maxima`` on the whole stack for every chunking.

PHASE CORRELATION: a pair is never split. The last two axes are brought whole into every block,
and each block of pairs is one ``ops.phase_correlate`` call on the worker that computes it.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np
from dask.delayed import delayed

from .. import ops
from ..contract._registration import Registration
from ..operations import _checks
from ._blocks import _dask, _field_of, _known, _record, _sole_chunk

_F32, _I64 = _checks._F32, _checks._I64
_RECORD = np.dtype([("dy", _I64), ("dx", _I64), ("peak_ratio", np.float64), ("accepted", np.bool_)])


def _gather_block(block: np.ndarray, points: np.ndarray, halo: tuple[int, int], window: int, gpu: bool,
                  backend: str | None) -> np.ndarray:
    """The values of the points this block owns (already in the block's grown coordinates)."""
    values = ops.window_maxima(block, points + np.asarray(halo, dtype=_I64), window, gpu=gpu, backend=backend)
    if points.shape[0]:
        _record()
    return values


def _assemble(parts: list[np.ndarray], owners: list[np.ndarray], count: int, lead: tuple[int, ...]) -> np.ndarray:
    out = np.empty((count, *lead), dtype=_F32)
    for values, owned in zip(parts, owners, strict=True):
        out[owned] = values
    return out


def window_maxima(stack: Any, points: Any, size: Any, *, gpu: bool = True, backend: str | None = None) -> da.Array:
    """See :func:`spacr_accel_core.dask.window_maxima`."""
    _checks._options(gpu, backend)
    array = _dask(stack, "stack")
    _checks.fields_shape(array.shape, "stack")
    window = _checks.window_edge(size)
    _known(array, "stack", tuple(range(array.ndim)))
    rows = _checks.window_points(points, array.shape)
    height, width = array.shape[-2:]
    ry, rx = (min(window // 2, height - 1) if len(array.chunks[-2]) > 1 else 0,
              min(window // 2, width - 1) if len(array.chunks[-1]) > 1 else 0)
    if ry or rx:
        from dask.array.overlap import ensure_minimum_chunksize

        array = array.rechunk({array.ndim - 2: ensure_minimum_chunksize(max(ry, 1), array.chunks[-2]),
                               array.ndim - 1: ensure_minimum_chunksize(max(rx, 1), array.chunks[-1])})
    depth = {array.ndim - 2: ry, array.ndim - 1: rx}
    grown = da.overlap.overlap(array, depth=depth, boundary="nearest") if ry or rx else array
    edges = [np.cumsum((0, *chunks)) for chunks in array.chunks]
    blocks = grown.to_delayed()
    lead_blocks = blocks.shape[:-2]
    pieces = np.empty(lead_blocks, dtype=object)
    for lead in np.ndindex(*lead_blocks):
        lead_shape = tuple(int(array.chunks[axis][lead[axis]]) for axis in range(len(lead)))
        parts, owners = [], []
        for i in range(blocks.shape[-2]):
            for j in range(blocks.shape[-1]):
                top, left = edges[-2][i], edges[-1][j]
                owned = np.flatnonzero((rows[:, 0] >= top) & (rows[:, 0] < edges[-2][i + 1])
                                       & (rows[:, 1] >= left) & (rows[:, 1] < edges[-1][j + 1]))
                if owned.size == 0:
                    continue
                local = rows[owned] - np.asarray([top, left], dtype=_I64)
                parts.append(delayed(_gather_block, pure=True)(blocks[(*lead, i, j)], local, (ry, rx), window,
                                                               gpu, backend))
                owners.append(owned)
        task = delayed(_assemble, pure=True)(parts, owners, rows.shape[0], lead_shape)
        pieces[lead] = da.from_delayed(task, shape=(rows.shape[0], *lead_shape), dtype=_F32)
    if not lead_blocks:
        single: da.Array = pieces.item()  # a 2-D field: one piece
        return single
    return da.block([pieces.tolist()])  # the points' axis whole, the fields' axes in their blocks


def _correlate_block(first: np.ndarray, second: np.ndarray, expected: tuple[int, int], tolerance: Any,
                     floor: float, gpu: bool, backend: str | None) -> np.ndarray:
    found = ops.phase_correlate(first, second, expected=expected, tolerance=tolerance, min_peak_ratio=floor,
                                gpu=gpu, backend=backend)
    _record()
    out = np.empty(first.shape[:-2], dtype=_RECORD)
    for name in _RECORD.names or ():
        out[name] = getattr(found, name)
    return out


def phase_correlate(first: Any, second: Any, *, expected: Any = (0, 0), tolerance: Any = None,
                    min_peak_ratio: Any = 3.0, gpu: bool = True, backend: str | None = None) -> Registration:
    """See :func:`spacr_accel_core.dask.phase_correlate`."""
    _checks._options(gpu, backend)
    about = _checks.expected_shift(expected)
    limits = _checks.shift_tolerance(tolerance)
    floor = _checks.ratio_floor(min_peak_ratio)
    a, b = _dask(first, "first"), _dask(second, "second")
    _checks.field_pair(a, b)  # type: ignore[arg-type]  # it reads only the shapes
    _known(a, "first", tuple(range(a.ndim)))
    single = a.ndim == 2
    if single:
        a, b = a[None], b[None]
    a = _sole_chunk(_sole_chunk(a, a.ndim - 1), a.ndim - 2)
    b = b.rechunk(a.chunks)
    records = da.map_blocks(_correlate_block, a, b, about, limits, floor, gpu, backend, dtype=_RECORD,
                            drop_axis=(a.ndim - 2, a.ndim - 1), meta=np.empty((0,) * (a.ndim - 2), dtype=_RECORD))
    fields = {name: da.map_blocks(_field_of, records, name, dtype=_RECORD[name],
                                  meta=np.empty((0,) * records.ndim, dtype=_RECORD[name]))
              for name in _RECORD.names or ()}
    if single:
        fields = {name: value[0] for name, value in fields.items()}
    return Registration(fields["dy"], fields["dx"], fields["peak_ratio"], fields["accepted"], "dask")
