"""The products family: the matrix product spectral unmixing is made of.

Declared here once (its hook's specification beside it); re-exported by :mod:`spacr_accel_core.ops`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import reference
from ..contract._markers import hookspec
from ..dispatch._registry import REGISTRY
from ..operations._adapters import (
    adapt_matmul,
)
from ..operations._checks import (
    _F32,
    _NUMERIC_KINDS,
    _numeric,
    _options,
    _product_shape,
    out_array,
)
from ..operations._inputs import (
    matmul_bench,
    small_product,
)
from ..operations._operations import OwnGraph, operation
from ..operations._results import (
    agree_product,
    check_array,
)


@hookspec
def spacr_accel_matmul(  # type: ignore[empty-body]  # a specification has no body
    first: np.ndarray, second: np.ndarray, out: np.ndarray | None
) -> np.ndarray:
    """``first @ second`` with NumPy's shape rules, as float32.

    :param first: a non-empty real numeric array of at least one dimension.
    :param second: the same; the shapes are already checked to be compatible.
    :param out: optional, as for ``maximum_filter``: a float32 array of the result's shape to write
        into and return, or ``None``.
    :returns: the float32 product (a 0-d array for two vectors).
    """


@operation(
    spec=spacr_accel_matmul,
    task="Spectral unmixing (matmul)",
    check=check_array,
    agree=agree_product,
    reference=reference.matmul,
    small=small_product,
    bench=matmul_bench,
    adapt=adapt_matmul,
    optional={"out": None},
    dask=OwnGraph(),
)
def matmul(first: Any, second: Any, *, gpu: Any = True, backend: str | None = None,
           out: np.ndarray | None = None) -> np.ndarray:
    """``first @ second``, on the fastest thing available, as float32.

    THE UNMIXING IS THIS: correcting dye bleed-through is one small matrix applied to every spot
    of every cycle, a large multiply by a tiny operand, called per tile; so the checks here are
    kept to a few attribute reads.

    :param first: left operand (NumPy's ``@`` shape rules; at least 1-D).
    :param second: right operand.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :param out: a float32 C-contiguous array of the product's shape to write into (it must not
        overlap an operand): a fresh 64 MB result's page faults are about 40% of the product's time.
    :returns: the product as float32 NumPy (a 0-d array for two vectors; ``out`` when given).
    :raises ValueError: an operand is 0-d, the shapes do not multiply, or ``out`` does not fit.
    :raises TypeError: an operand is not real-numeric, or ``out`` is not a float32 array.
    """
    a = first if type(first) is np.ndarray else _numeric(first, "first")
    b = second if type(second) is np.ndarray else _numeric(second, "second")
    if a.dtype.kind not in _NUMERIC_KINDS or b.dtype.kind not in _NUMERIC_KINDS:
        _numeric(a, "first")
        _numeric(b, "second")
    a_shape, b_shape = a.shape, b.shape
    if len(a_shape) == 2 and len(b_shape) == 2 and a_shape[1] == b_shape[0]:
        shape: tuple[int, ...] = (a_shape[0], b_shape[1])  # the per-tile case, inline
    elif not a_shape or not b_shape:
        raise ValueError(
            f"matmul: operands must be at least 1-D, got first {a_shape} and second {b_shape}"
        )
    else:
        shape = _product_shape(a_shape, b_shape)
    use_gpu = gpu if gpu is True and backend is None else _options(gpu, backend)
    target = None if out is None else out_array(out, shape, a, b)
    if a.size == 0 or b.size == 0:
        REGISTRY.record_served("matmul")
        if target is None:
            return np.zeros(shape, dtype=_F32)
        target.fill(0.0)
        return target
    a_view = a.view()  # read-only views, inline: this is the per-tile path (see _read_only)
    a_view.setflags(write=False)
    b_view = b.view()
    b_view.setflags(write=False)
    return REGISTRY.dispatch(  # type: ignore[no-any-return]  # the check guarantees an ndarray
        "matmul", {"first": a_view, "second": b_view, "out": target}, gpu=use_gpu, backend=backend,
        expected=(shape, target))
