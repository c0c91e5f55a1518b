# mypy: disallow-untyped-calls=False, warn-return-any=False
"""The graphs the Dask face builds from an operation's row alone (behind :mod:`spacr_accel_core.dask`).

An operation declared with ``dask=WholeFields()`` works on each field ``(H, W)`` of a stack on its own
and answers an array of the stack's shape, so its graph needs nothing but the row: the last two axes
are brought whole into every block (rechunked where a field spans blocks), the leading axes keep
their chunks, and each block is one call of the operation's public function on the worker that
computes it, tallied like every other block. The answer is the in-memory call on the whole stack,
bit for bit, for every chunking. A new operation of that form has its Dask face with no Dask code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np

from ..operations import _checks
from ..operations._operations import Operation, WholeFields
from ._blocks import _dask, _known, _record, _sole_chunk


def _block(block: np.ndarray, row: Operation, arguments: tuple[Any, ...], keywords: dict[str, Any],
           gpu: bool, backend: str | None) -> np.ndarray:
    answer = np.asarray(row.function(block, *arguments, gpu=gpu, backend=backend, **keywords))
    _record()
    return answer


def _answer_dtype(row: Operation, form: WholeFields, array: da.Array, arguments: tuple[Any, ...],
                  keywords: dict[str, Any]) -> np.dtype[Any]:
    """The row's declared dtype, or the operation's answer on one zero field of the stack's shape and
    dtype (what ``ops`` would give, without computing a block of the graph)."""
    if form.dtype is not None:
        return np.dtype(form.dtype)
    zero = np.zeros(array.shape[-2:], dtype=array.dtype)
    return np.asarray(row.function(zero, *arguments, gpu=False, **keywords)).dtype


def whole_fields(row: Operation) -> Callable[..., da.Array]:
    """The Dask form of a :class:`WholeFields` operation: ``function(stack, *arguments, gpu=True,
    backend=None, **keywords)`` with the operation's own arguments after the stack.

    :param row: the operation's row.
    :returns: the function, named and documented after the operation.
    """
    form = row.dask
    assert isinstance(form, WholeFields), row  # the face asks only for this form

    @functools.wraps(row.function)
    def on_dask(stack: Any, *arguments: Any, gpu: bool = True, backend: str | None = None,
                **keywords: Any) -> da.Array:
        _checks._options(gpu, backend)
        array = _dask(stack, "stack")
        _checks.fields_shape(array.shape, "stack")
        _known(array, "stack", tuple(range(array.ndim)))
        array = _sole_chunk(_sole_chunk(array, array.ndim - 2), array.ndim - 1)
        dtype = _answer_dtype(row, form, array, arguments, keywords)
        return da.map_blocks(_block, array, row, arguments, keywords, gpu, backend, dtype=dtype,
                             meta=np.empty((0,) * array.ndim, dtype=dtype))

    on_dask.__doc__ = (f":func:`{row.function.__module__}.{row.function.__qualname__}` on a dask stack "
                       "``(..., H, W)``, field by field (blocks of whole fields, each one call on the worker "
                       "that computes it): bit-identical to the call on the whole stack.")
    return on_dask
