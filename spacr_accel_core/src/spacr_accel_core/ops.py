"""The three array operations spaCR's slow steps are made of, on whatever hardware there is.

A drop-in for ``spacr.ops_accel``. Strip the science away and peak finding, spectral unmixing and
cell matching are a windowed maximum, a matrix multiply and a nearest-neighbour search; they live
here so ONE place knows about devices and the modules that use them go on reading as the science
they are.

EVERY FUNCTION TAKES AND RETURNS NUMPY, and every backend gives the same answer: the windowed
maximum bit for bit, the nearest neighbour exactly (ties to the lowest index), the product to
float32 rounding. Input is checked here, once, before any backend runs, so a wrong call fails
with a message that names the argument rather than with a device traceback.

AND IT NEVER ASSUMES THE CARD IS FREE. ``gpu=False`` refuses a device that exists, and a backend
that raises at run time (an out-of-memory, a driver that went away) falls through to the next.
THE CPU PATH IS NOT AN ERROR PATH: it is what runs on a laptop, in CI and beside a busy card.
"""

from __future__ import annotations

import operator
import sys
from typing import Any

import numpy as np

from ._discovery import NARROW_FIELDS
from ._errors import describe
from ._registry import REGISTRY

__all__ = ["CHUNK", "accelerated_backends", "matmul", "maximum_filter", "nearest_neighbours"]

CHUNK = 4096
"""Default rows of ``source`` per pass of :func:`nearest_neighbours` (an upper bound; backends
may take fewer to stay inside their memory budget, and the answer never depends on it)."""

_NUMERIC_KINDS = frozenset("biuf")
_F32 = np.dtype(np.float32)
_I64 = np.dtype(np.int64)
_ZERO = np.float32(0.0)


def _numeric(value: Any, name: str) -> np.ndarray:
    if type(value) is np.ndarray:
        array = value
    else:
        if "numpy.ma" in sys.modules and isinstance(value, np.ma.MaskedArray):
            # scipy.ndimage ignores the mask as well, silently; a peak under the mask would be
            # reported as real, so the caller decides (``.filled(...)`` or ``.data``).
            raise TypeError(f"{name} is a masked array; pass {name}.filled(value) or {name}.data "
                            "(a mask would be silently ignored)")
        try:
            array = np.asarray(value)
        except ValueError as exc:  # ragged lists: a shape, not a type, is wrong
            raise ValueError(f"{name} cannot be read as an array: {describe(exc)}") from None
        except (RuntimeError, TypeError) as exc:
            # A torch tensor that requires grad or has its conjugate bit set raises RuntimeError,
            # the class that would read as "backend declined": it is the caller's input that is wrong.
            raise TypeError(f"{name} cannot be read as a NumPy array: {describe(exc)}") from None
    if array.dtype.kind not in _NUMERIC_KINDS:
        raise TypeError(
            f"{name} must hold real numbers (bool, integer or float), got dtype {array.dtype}"
        )
    return array


def _read_only(array: np.ndarray) -> np.ndarray:
    """A view of ``array`` that a plugin cannot write to (no copy).

    A plugin that scribbles into its input and then declines would corrupt the caller's array and
    the input the next backend computes on; with a read-only view the write raises inside the
    plugin (``ValueError: assignment destination is read-only``), which makes it that plugin's
    fault. (A plugin that sets ``flags.writeable = True`` on it is not careless but hostile; NumPy
    cannot refuse that without a copy, which the per-tile path cannot afford.)
    """
    view = array.view()
    view.setflags(write=False)  # ~0.4 us: reading ``flags`` first would double it on the per-tile path
    return view


def _options(gpu: Any, backend: Any) -> bool:
    """``gpu`` as a bool and ``backend`` checked: the keywords every operation shares."""
    if gpu is not True and gpu is not False:
        if not isinstance(gpu, np.bool_):
            raise TypeError(f"gpu must be True or False, got {type(gpu).__name__} ({gpu!r})")
        gpu = bool(gpu)
    if backend is not None and (type(backend) is not str or not backend):
        raise TypeError(f"backend must be a backend name (a non-empty str) or None, got {backend!r}")
    return bool(gpu)


def _integer(value: Any, name: str) -> int:
    """A whole number of pixels or rows: any integer, or a float holding a whole number.

    spaCR computes sizes from radii and scales (``2 * radius + 1`` with a float radius), so ``7.0``
    and ``np.float32(7)`` are taken as 7; a fraction is refused rather than silently rounded.
    """
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got a bool ({value!r})")
    try:
        return operator.index(value)
    except TypeError:
        pass
    if isinstance(value, (float, np.floating)):
        number = float(value)
        if not number.is_integer():  # NaN and infinity are not whole numbers either
            raise ValueError(f"{name} must be a whole number, got {value!r}")
        return int(number)
    raise TypeError(f"{name} must be an integer, got {type(value).__name__} ({value!r})")


def accelerated_backends(gpu: bool = True) -> tuple[str, ...]:
    """Which backends can run here, best first, ending in ``"numpy"`` (the floor that always runs).

    Honours ``SPACR_ACCEL_BACKENDS`` and an enclosing ``use(...)``. Only ``SPACR_ACCEL_DISABLE=numpy``
    removes the floor, and then it is absent here too (and a call nothing else serves says why).

    :param gpu: ``False`` refuses the accelerated ones outright (without asking them anything).
    :returns: the usable names.
    """
    return REGISTRY.backend_names(_options(gpu, None))


def _check_array(result: Any, shape: tuple[int, ...]) -> str | None:
    """What is wrong with a backend's array result, or ``None``."""
    if not isinstance(result, np.ndarray):
        return f"returned {type(result).__name__}, not a NumPy array"
    if result.shape != shape or result.dtype != _F32:
        return f"returned {result.dtype}{list(result.shape)}, expected float32{list(shape)}"
    return None


def _check_pair(result: Any, sizes: tuple[int, int]) -> str | None:
    """What is wrong with a backend's ``(indices, distances)`` result, or ``None``.

    The index range is checked too (two cheap passes): an index outside the target set is the
    one wrong answer a shape check cannot see, and it would crash the caller's pairing later.
    """
    n, m = sizes
    if not isinstance(result, tuple) or len(result) != 2:
        return f"returned {type(result).__name__}, not an (indices, distances) pair"
    index, distance = result
    if not isinstance(index, np.ndarray) or index.dtype != _I64 or index.shape != (n,):
        return f"indices are not int64 of shape ({n},)"
    if not isinstance(distance, np.ndarray) or distance.dtype != _F32 or distance.shape != (n,):
        return f"distances are not float32 of shape ({n},)"
    if index.min() < 0 or index.max() >= m:
        return f"indices fall outside the {m} target points"
    return None


def maximum_filter(field: Any, size: Any, *, gpu: bool = True, backend: str | None = None) -> np.ndarray:
    """The maximum of each ``size`` x ``size`` window, centred on every pixel.

    WHAT PEAK FINDING IS MADE OF: a read is a local maximum of the spot score, and "local" means
    this. Edges repeat the border pixel, matching ``scipy.ndimage.maximum_filter(...,
    mode="nearest")``, because the alternative is a rim of false maxima all the way round the field.
    The result is bit-identical on every backend to scipy on ``field.astype(float32)``, with two
    rules scipy lacks: a window holding a NaN yields NaN (scipy's answer depends on where the NaN
    sits, and backends disagree there), and a maximum of zero is ``+0.0`` (scipy may return
    ``-0.0``, whichever zero its scan met first).

    :param field: a 2-D array of real numbers.
    :param size: the window edge, in pixels: an integer, or a float holding a whole number
        (``7.0``). Even sizes are raised to the next odd one (a window with no centre cannot be
        centred); ``size <= 1`` returns a copy.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: the filtered field as a new float32 array of the same shape.
    :raises ValueError: ``field`` is not 2-D, or ``size`` is negative or fractional.
    :raises TypeError: ``field`` is not numeric (or a masked array), ``size`` is not a number, or
        ``gpu``/``backend`` are not a bool and a name.
    """
    array = _numeric(field, "field")
    if array.ndim != 2:
        raise ValueError(f"field must be a 2-D array, got {array.ndim}-D with shape {array.shape}")
    window = _integer(size, "size")
    if window < 0:
        raise ValueError(f"size must be a non-negative window edge in pixels, got {window}")
    if window % 2 == 0:
        window += 1
    if window <= 1 or array.size == 0:
        _options(gpu, backend)
        REGISTRY.record_core("maximum_filter")
        return array.astype(_F32, copy=True)
    use_gpu = _options(gpu, backend)
    if window >= 2 * max(array.shape) - 1:
        # With the edge repeated, a window of 2 * max(h, w) - 1 already covers every row and column
        # from any pixel, so every window's maximum is the field's: a reduction, answered here
        # (a thin (1, 70000) field with size 200001 would otherwise ask a backend for a 110 GiB
        # padded buffer). np.max propagates NaN (the NaN rule), and rounding to float32 is
        # monotonic, so the float32 of the maximum is the maximum of the float32 field.
        REGISTRY.record_core("maximum_filter")
        return np.full(array.shape, np.float32(array.max()), dtype=_F32) + _ZERO
    # A camera field (uint8/int8/uint16/int16) goes on in its own dtype: the registry casts it to
    # float32 for each plugin that did not declare it takes it (SPACR_ACCEL_FIELD_DTYPES).
    data = array if array.dtype in NARROW_FIELDS else array.astype(_F32, copy=False)
    # The sign of zero (+0.0 for a maximum of zero) is settled per plugin by the registry's call
    # (_discovery.settling_zeros), skipped for a plugin that declares its zeros positive.
    result: np.ndarray = REGISTRY.dispatch(
        "maximum_filter",
        (_read_only(data), window),
        gpu=use_gpu,
        backend=backend,
        check=_check_array,
        expected=array.shape,
    )
    return result


def _product_shape(first: tuple[int, ...], second: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's ``@`` result shape, or ValueError naming both operands."""
    if len(first) == 2 and len(second) == 2:  # the per-tile case: keep it cheap
        if first[1] != second[0]:
            raise ValueError(
                f"matmul: first has {first[1]} columns but second has {second[0]} rows "
                f"(shapes {first} and {second})"
            )
        return (first[0], second[1])
    inner_first = first[-1]
    inner_second = second[0] if len(second) == 1 else second[-2]
    if inner_first != inner_second:
        raise ValueError(
            f"matmul: the last axis of first ({inner_first}) must match the "
            f"{'only' if len(second) == 1 else 'second-to-last'} axis of second ({inner_second}) "
            f"(shapes {first} and {second})"
        )
    batch_first = first[:-2]
    batch_second = second[:-2]
    try:
        batch = np.broadcast_shapes(batch_first, batch_second)
    except ValueError:
        raise ValueError(
            f"matmul: the batch axes of first {first} and second {second} do not broadcast"
        ) from None
    rows = (first[-2],) if len(first) >= 2 else ()
    cols = (second[-1],) if len(second) >= 2 else ()
    return tuple(batch) + rows + cols


def matmul(first: Any, second: Any, *, gpu: bool = True, backend: str | None = None) -> np.ndarray:
    """``first @ second``, on the fastest thing available, as float32.

    THE UNMIXING IS THIS: correcting dye bleed-through is one small matrix applied to every spot
    of every cycle, a large multiply by a tiny operand, called per tile; so the checks here are
    kept to a few attribute reads.

    :param first: left operand (NumPy's ``@`` shape rules; at least 1-D).
    :param second: right operand.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: the product as float32 NumPy (a 0-d array for two vectors).
    :raises ValueError: an operand is 0-d, or the shapes do not multiply.
    :raises TypeError: an operand is not real-numeric.
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
    if a.size == 0 or b.size == 0:
        REGISTRY.record_core("matmul")
        return np.zeros(shape, dtype=_F32)
    return REGISTRY.dispatch(  # type: ignore[no-any-return]  # the check guarantees an ndarray
        "matmul", (_read_only(a), _read_only(b)), gpu=use_gpu, backend=backend, check=_check_array,
        expected=shape,
    )


def _points(value: Any, name: str) -> np.ndarray:
    array = _numeric(value, name)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (points, coordinates) array, got shape {array.shape}")
    return array


def _widths_and_chunk(source: tuple[int, ...], target: tuple[int, ...], chunk: Any) -> int:
    """The checks two 2-D point sets share, wherever they live (NumPy here, Dask in its module):
    the same width, at least one coordinate, and a chunk of at least one row, which is returned."""
    if source[1] != target[1]:
        raise ValueError(
            f"source and target must have the same width (coordinates per point): "
            f"source has {source[1]} coordinates per point, target has {target[1]}"
        )
    if source[1] == 0:
        raise ValueError("source and target must have at least one coordinate per point")
    rows = _integer(chunk, "chunk")
    if rows < 1:
        raise ValueError(f"chunk must be at least 1 row, got {rows}")
    return rows


def nearest_neighbours(
    source: Any,
    target: Any,
    *,
    gpu: bool = True,
    backend: str | None = None,
    chunk: Any = CHUNK,
) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``source``, the closest row of ``target``: exact, ties to the lowest index.

    CHUNKED, ALWAYS: a well can carry a hundred thousand nuclei and the full distance matrix
    between two such sets is 40 GB, so every backend bounds its working set however large the
    well is. Ties go to the lower index on every backend, so a caller pairing mutual nearest
    neighbours gets the same pairs whatever ran. Coordinates are taken as float32 (as spaCR
    did); "nearest" is decided exactly in float64 on those values.

    :param source: ``(N, D)`` points.
    :param target: ``(M, D)`` points.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :param chunk: at most this many source rows per pass; the answer does not depend on it.
    :returns: ``(indices, distances)``: int64 and float32, both length ``N``. With an empty
        ``target`` every index is ``-1`` and every distance ``inf``.
    :raises ValueError: not 2-D, not the same width, no coordinates, NaN or infinite
        coordinates, or ``chunk < 1``.
    :raises TypeError: non-numeric points or a non-integer chunk.
    """
    use_gpu = _options(gpu, backend)
    src = _points(source, "source")
    tgt = _points(target, "target")
    rows = _widths_and_chunk(src.shape, tgt.shape, chunk)
    with np.errstate(over="ignore"):  # an out-of-range coordinate becomes inf, refused just below
        src = np.ascontiguousarray(src, dtype=_F32)
        tgt = np.ascontiguousarray(tgt, dtype=_F32)
    for name, points in (("source", src), ("target", tgt)):
        if not np.isfinite(points).all():
            raise ValueError(f"{name} holds NaN or infinite coordinates (after conversion to float32)")
    n, m = src.shape[0], tgt.shape[0]
    if n == 0 or m == 0:
        REGISTRY.record_core("nearest_neighbours")
        return np.full(n, -1, dtype=_I64), np.full(n, np.inf, dtype=_F32)

    return REGISTRY.dispatch(  # type: ignore[no-any-return]  # the check guarantees the pair
        "nearest_neighbours", (_read_only(src), _read_only(tgt), rows), gpu=use_gpu, backend=backend,
        check=_check_pair, expected=(n, m),
    )
