"""Every seam of the filters, the points, the product and the alignment on drawn inputs, against
spaCR unpatched: dtypes, memory orders (C, Fortran, strided, transposed, reversed), NaN of both signs
and any payload, ``-0.0``, infinities, huge and tiny values, lists for arrays, and every numeric
keyword as a Python or NumPy number of any type. The answer's bits, type, dtype and layout, the
exception and the warnings must be spaCR's (``same_as_spacr``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

LAYOUTS = ("C", "F", "strided", "transposed", "reversed", "list", "tuple")
GPU = st.sampled_from([True, False, 0, 1, np.bool_(False), np.bool_(True)])
SCALAR_TYPES = (float, int, bool, np.float32, np.float16, np.float64, np.int64)
COUNT_TYPES = (int, int, np.int64, np.int64, bool, float, np.float32)
"""For sizes, windows and chunks: mostly integers, which spaCR's callers pass, the rest at times."""


def _ndimage(function: Any) -> Any:
    """``scipy.ndimage`` as the scoped spaCR ``function`` imports it (the patch's stand-in while it is
    installed, SciPy's own otherwise); a seam over the function is looked through to it."""
    return inspect.unwrap(function).__builtins__["__import__"]("scipy", None, None, ("ndimage",), 0).ndimage


def _nan(dtype: Any, negative: bool, payload: int) -> Any:
    """A NaN of ``dtype`` with that sign and mantissa (quiet or signalling, never zero)."""
    bits = np.dtype(dtype).itemsize * 8
    mantissa = np.finfo(dtype).nmant
    exponent = ((1 << (bits - 1)) - 1) ^ ((1 << mantissa) - 1)
    word = exponent | (payload % ((1 << mantissa) - 1) + 1) | (negative << (bits - 1))
    return np.array(word, dtype=f"u{bits // 8}").view(dtype)[()]


def _specials(dtype: Any) -> list[Any]:
    if np.dtype(dtype).kind != "f":
        info = np.iinfo(dtype)
        return [info.min, info.max, 0]
    tiny = np.finfo(dtype).smallest_subnormal
    return [0.0, -0.0, np.inf, -np.inf, np.finfo(dtype).max, -np.finfo(dtype).max, tiny, -tiny, 1e30, 70000.0]


@st.composite
def arrays(draw: st.DrawFn, shape: tuple[int, ...], dtypes: tuple[Any, ...] = (np.float32, np.float64, np.float16,
                                                                                   np.uint16, np.int32),
           layouts: tuple[str, ...] = LAYOUTS, specials: int = 3) -> Any:
    """An array of ``shape`` in a drawn dtype and layout, its values noise of a drawn scale (or small
    integers, for ties) with up to ``specials`` special values or NaNs placed anywhere."""
    dtype = draw(st.sampled_from(dtypes))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if np.dtype(dtype).kind == "f" and draw(st.booleans()):
        values = rng.standard_normal(shape) * draw(st.sampled_from([1.0, 1e3, 1e-3]))
    else:
        values = rng.integers(0, draw(st.sampled_from([4, 1000])), shape)
    with np.errstate(all="ignore"):
        array = values.astype(dtype)
    flat = array.reshape(-1)
    for _ in range(draw(st.sampled_from([0, 0, 1, specials])) if flat.size else 0):
        where = draw(st.integers(0, flat.size - 1))
        if np.dtype(dtype).kind == "f" and draw(st.booleans()):
            flat[where] = _nan(dtype, draw(st.booleans()), draw(st.integers(0, 2**60)))
        else:
            with np.errstate(all="ignore"):
                flat[where] = draw(st.sampled_from(_specials(dtype)))
    return _laid_out(array, draw(st.sampled_from(layouts)))


def _laid_out(array: np.ndarray, layout: str) -> Any:
    if layout == "F":
        return np.asfortranarray(array)
    if layout == "strided":
        wide = np.repeat(np.repeat(array, 2, axis=-1), 2, axis=-2) if array.ndim >= 2 else np.repeat(array, 2)
        return wide[..., ::2, ::2] if array.ndim >= 2 else wide[::2]
    if layout == "transposed":
        return array.T.copy().T
    if layout == "reversed":
        return np.ascontiguousarray(array[::-1])[::-1]
    if layout == "list":
        return array.tolist()
    if layout == "tuple":
        return _tuples(array.tolist())
    return np.ascontiguousarray(array)


def _tuples(nested: Any) -> Any:
    return tuple(_tuples(item) for item in nested) if isinstance(nested, list) else nested


@st.composite
def numbers(draw: st.DrawFn, values: list[float], kinds: tuple[Any, ...] = SCALAR_TYPES) -> Any:
    """One of ``values`` as a drawn Python or NumPy number type (one of ``kinds``)."""
    value = draw(st.sampled_from(values))
    kind = draw(st.sampled_from(kinds))
    with np.errstate(all="ignore"):
        return kind(int(value)) if kind in (int, np.int64) else kind(value)


def sides(low: int = 1, high: int = 9) -> st.SearchStrategy[int]:
    return st.integers(low, high)


@SETTINGS
@given(data=st.data(), height=sides(), width=sides(), size=numbers([1, 2, 3, 4, 5], COUNT_TYPES),
       gpu=GPU)
def test_maximum_filter(same_as_spacr: Callable[..., Any], data: st.DataObject, height: int, width: int, size: Any,
                        gpu: Any) -> None:
    from spacr import ops_accel

    field = data.draw(arrays((height, width)))
    same_as_spacr(lambda: ops_accel.maximum_filter(field, size, gpu=gpu), field)


@SETTINGS
@given(data=st.data(), height=sides(), width=sides(), size=numbers([1, 3, 4, 5, 3, 5], COUNT_TYPES),
       mode=st.sampled_from(["reflect", "nearest", "constant", "mirror"]), cval=numbers([0.0, 2.5]))
def test_minimum_filter_in_the_decode(same_as_spacr: Callable[..., Any], data: st.DataObject, height: int, width: int,
                                      size: Any, mode: str, cval: Any) -> None:
    import spacr.ops_engine as engine

    field = data.draw(arrays((height, width), dtypes=(np.float32, np.float32, np.float32, np.float64)))
    same_as_spacr(lambda: _ndimage(engine._decode_field).minimum_filter(field, size=size, mode=mode, cval=cval),
                  field)


@SETTINGS
@given(data=st.data(), height=sides(), width=sides(), sigma=numbers([0.5, 1.0, 1.1, 1.5, 2.0, 1e-16]),
       mode=st.sampled_from(["reflect", "nearest", "wrap"]), cval=numbers([0.0, 1.5]))
def test_gaussian_laplace_in_the_decode(same_as_spacr: Callable[..., Any], data: st.DataObject, height: int,
                                        width: int, sigma: Any, mode: str, cval: Any) -> None:
    import spacr.ops_engine as engine

    field = data.draw(arrays((height, width), dtypes=(np.float32, np.float32, np.uint16)))
    same_as_spacr(lambda: _ndimage(engine._decode_field).gaussian_laplace(field, sigma, mode=mode, cval=cval), field)


@SETTINGS
@given(data=st.data(), height=sides(), width=sides(), sigma=numbers([0.7, 1.0, 1.1, 3.0, 1e-16]),
       truncate=numbers([4.0, 3.5, 1.0, 2.0]), mode=st.sampled_from(["reflect", "nearest", "constant"]),
       order=st.sampled_from([0, 0, 1]))
def test_gaussian_filter_in_the_nuclear_points(same_as_spacr: Callable[..., Any], data: st.DataObject, height: int,
                                               width: int, sigma: Any, truncate: Any, mode: str, order: int) -> None:
    import spacr.ops_phenotype as phenotype

    field = data.draw(arrays((height, width), dtypes=(np.float32, np.float32, np.float64)))
    smooth = _ndimage(phenotype.nuclear_points).gaussian_filter
    same_as_spacr(lambda: smooth(field, sigma, order=order, mode=mode, truncate=truncate), field)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), sigma=numbers([1.0, 1.1, 2.0]))
def test_nuclear_points(same_as_spacr: Callable[..., Any], data: st.DataObject, sigma: Any) -> None:
    import spacr.ops_phenotype as phenotype

    image = data.draw(arrays((24, 28), specials=1))
    same_as_spacr(lambda: phenotype.nuclear_points(image, sigma=sigma, min_distance=3), image)


@st.composite
def peaks(draw: st.DrawFn, height: int, width: int) -> Any:
    """``(N, 2)`` peaks, mostly inside the field, as integers, floats (a NaN among them at times) or a
    list of pairs."""
    count = draw(st.integers(0, 6))
    rows = draw(st.lists(st.tuples(st.integers(-2, height + 1), st.integers(-2, width + 1)),
                         min_size=count, max_size=count))
    inside = [(min(max(y, 0), height - 1), min(max(x, 0), width - 1)) for y, x in rows]
    chosen = draw(st.sampled_from([inside, inside, rows]))
    form = draw(st.sampled_from(["int64", "int32", "float", "nan", "list"]))
    if form == "list":
        return [list(pair) for pair in chosen]
    array = np.array(chosen, dtype=np.float64 if form in ("float", "nan") else form).reshape(-1, 2)
    if form == "nan" and array.size:
        array[draw(st.integers(0, len(array) - 1)), 0] = np.nan
    return array


@SETTINGS
@given(data=st.data(), cycles=st.integers(1, 2), channels=st.integers(1, 3), height=sides(), width=sides(),
       window=numbers([0, 1, 2], COUNT_TYPES))
def test_extract_bases(same_as_spacr: Callable[..., Any], data: st.DataObject, cycles: int, channels: int,
                       height: int, width: int, window: Any) -> None:
    from spacr import ops_sbs

    stack = data.draw(arrays((cycles, channels, height, width)))
    found = data.draw(peaks(height, width))
    same_as_spacr(lambda: ops_sbs.extract_bases(stack, found, window=window), stack, found)


@SETTINGS
@given(data=st.data(), sources=st.integers(1, 12), targets=st.integers(1, 12), width=st.sampled_from([1, 2, 3, 8, 9]),
       chunk=numbers([4096, 2, 1], COUNT_TYPES), gpu=GPU)
def test_nearest_neighbours(same_as_spacr: Callable[..., Any], data: st.DataObject, sources: int, targets: int,
                            width: int, chunk: Any, gpu: Any) -> None:
    from spacr import ops_accel

    source = data.draw(arrays((sources, width), specials=1))
    target = data.draw(arrays((targets, width), specials=1))
    same_as_spacr(lambda: ops_accel.nearest_neighbours(source, target, gpu=gpu, chunk=chunk), source, target)


@SETTINGS
@given(data=st.data(), rows=st.integers(1, 6), inner=st.integers(1, 6), columns=st.integers(1, 6), gpu=GPU)
def test_matmul(same_as_spacr: Callable[..., Any], data: st.DataObject, rows: int, inner: int, columns: int,
                gpu: Any) -> None:
    from spacr import ops_accel

    first = data.draw(arrays((rows, inner), specials=1))
    second = data.draw(arrays((inner, columns), specials=1))
    same_as_spacr(lambda: ops_accel.matmul(first, second, gpu=gpu), first, second)


@st.composite
def fields(draw: st.DrawFn) -> dict[int, list[Any]]:
    """Cycle -> planes of one field: a pattern of spots moved per cycle and channel, with noise, in a
    drawn dtype and memory order (one for the field, or one per plane), a missing cycle at times."""
    cycles, channels = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    height, width = draw(st.integers(12, 28)), draw(st.integers(12, 28))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    pattern = rng.random((height, width)) * 50
    pattern[rng.integers(0, height, 6), rng.integers(0, width, 6)] += 900
    dtype = draw(st.sampled_from([np.float32, np.uint16, np.float64]))
    field_layout = draw(st.sampled_from(["C", "F", "strided", "transposed", "reversed"]))
    planes: dict[int, list[Any]] = {}
    for cycle in range(1, cycles + 1):
        planes[cycle] = []
        for _channel in range(channels):
            moved = np.roll(pattern, tuple(rng.integers(-3, 4, 2)), axis=(0, 1)) + rng.random((height, width))
            layout = field_layout if draw(st.booleans()) else draw(st.sampled_from(["C", "F"]))
            plane = moved.astype(dtype)
            if draw(st.integers(0, 5)) == 0:  # now and then a special value somewhere in one plane
                with np.errstate(all="ignore"):
                    plane.reshape(-1)[draw(st.integers(0, plane.size - 1))] = draw(st.sampled_from(_specials(dtype)))
            planes[cycle].append(_laid_out(plane, layout))
    if cycles > 1 and draw(st.booleans()):
        planes[cycles + 1] = [None] * channels
    return planes


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(planes=fields(), tolerance=st.one_of(st.just(None), numbers([2, 8, 64])), by_reference=st.booleans())
def test_align_field(same_as_spacr: Callable[..., Any], planes: dict[int, list[Any]], tolerance: Any,
                     by_reference: bool) -> None:
    import spacr.ops_cycles as cycles

    options: dict[str, Any] = {} if tolerance is None else {"tolerance": tolerance}
    if by_reference:
        options["reference"] = max(cycle for cycle, offered in planes.items() if offered[0] is not None)
    same_as_spacr(lambda: cycles.align_field(planes, gpu=False, **options))
