# mypy: disallow-untyped-calls=False
"""The whole-plane steps over ``dask.array`` (behind :mod:`spacr_accel_core.dask`).

TRANSLATE: each block holds whole fields (the last two axes brought into one chunk) and moves them
by the shifts of the fields it holds: the shifts are checked and broadcast once against the whole
stack's leading axes, and each block reads its own rows of them, so the answer is ``ops.translate``
on the whole stack for every chunking of the leading axes.

SPOT SCORE: a pixel's score reads only that pixel's cycles and channels, so the blocks may split the
rows and columns any way; the cycles and channels are brought whole into every block. NumPy sums a
field of ONE pixel pairwise rather than in order, so a block of one pixel from a larger field is
scored beside a copy of itself (two pixels, the order of the whole field) and the copy dropped.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np

from .. import ops
from ..operations import _checks
from ..operations._planes import score_shape, translation_shifts
from ._blocks import _dask, _known, _record, _sole_chunk

_F32 = _checks._F32


def _translate_block(block: np.ndarray, shifts: np.ndarray, gpu: bool, backend: str | None,
                     block_info: dict[Any, Any] | None = None) -> np.ndarray:
    """``ops.translate`` on a block of whole fields, with those fields' own shifts."""
    if block_info is None:  # pragma: no cover - dask passes it to every block
        raise TypeError("a translate block needs dask's block_info to find its fields' shifts")
    lead = block_info[0]["array-location"][:-2]
    own = shifts[tuple(slice(start, stop) for start, stop in lead)]
    moved = ops.translate(block, own, gpu=gpu, backend=backend)
    _record()
    return moved


def translate(stack: Any, shifts: Any, *, gpu: bool = True, backend: str | None = None) -> da.Array:
    """See :func:`spacr_accel_core.dask.translate`."""
    _checks._options(gpu, backend)
    array = _dask(stack, "stack")
    _checks.fields_shape(array.shape, "stack")
    _known(array, "stack", tuple(range(array.ndim)))
    moves = translation_shifts(shifts, array.shape[:-2], *array.shape[-2:])
    array = _sole_chunk(_sole_chunk(array, array.ndim - 2), array.ndim - 1)
    moved: da.Array = da.map_blocks(_translate_block, array, dtype=array.dtype,
                                    meta=np.empty((0,) * array.ndim, array.dtype), token="spacr_accel-translate",
                                    shifts=moves, gpu=gpu, backend=backend)
    return moved


def _score_block(block: np.ndarray, single: bool, gpu: bool, backend: str | None) -> np.ndarray:
    """``ops.spot_score`` on a block of pixels (every cycle and channel): a lone pixel of a larger
    field beside a copy of itself, so that it is summed in the field's order."""
    if block.shape[-2] * block.shape[-1] == 1 and not single:
        score = ops.spot_score(np.concatenate([block, block], axis=-1), gpu=gpu, backend=backend)[:, :1]
    else:
        score = ops.spot_score(block, gpu=gpu, backend=backend)
    _record()
    return score


def spot_score(stack: Any, *, gpu: bool = True, backend: str | None = None) -> da.Array:
    """See :func:`spacr_accel_core.dask.spot_score`."""
    _checks._options(gpu, backend)
    array = _dask(stack, "stack")
    score_shape(array.shape)
    _known(array, "stack", tuple(range(array.ndim)))
    array = _sole_chunk(_sole_chunk(array, 0), 1)
    single = array.shape[2] * array.shape[3] == 1
    score: da.Array = da.map_blocks(_score_block, array, drop_axis=(0, 1), dtype=_F32, meta=np.empty((0, 0), _F32),
                                    token="spacr_accel-spot_score", single=single, gpu=gpu, backend=backend)
    return score
