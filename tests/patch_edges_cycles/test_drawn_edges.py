"""Drawn inputs against spaCR's own functions, for every seam of this folder: dtypes, memory orders
(C, Fortran, strided, transposed), NaN of both signs and several payloads, ``-0.0``, infinities,
huge and tiny values, NumPy and Python scalar types for every numeric keyword, and iterables where
spaCR reads arrays. The patched call must give spaCR's bits, dtype, layout, warnings and exception,
and leave its inputs (and a generator passed in) as spaCR leaves them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

Compare = Callable[[Callable[[], Any], Callable[[], Any]], Any]

DRAWN = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

_SPECIAL_BITS = {
    np.dtype(np.float32): [0x7FC00000, 0xFFC00000, 0xFFC01234, 0x7FC00001, 0x7F800001, 0x80000000, 0x7F800000,
                           0xFF800000, 0x7F7FFFFF, 0x00000001, 0x00800000],
    np.dtype(np.float64): [0x7FF8000000000000, 0xFFF8000000000000, 0xFFF8000000001234, 0x7FF0000000000001,
                           0x8000000000000000, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FEFFFFFFFFFFFFF,
                           0x0000000000000001, 0x4B00000000000000],
    np.dtype(np.float16): [0x7E00, 0xFE00, 0xFE12, 0x8000, 0x7C00, 0xFC00, 0x7BFF, 0x0001],
}
"""Bit patterns put into drawn arrays: NaNs (quiet and signalling, both signs, payloads), ``-0.0``,
infinities, the largest finite value, the smallest subnormal and a huge float64 beyond float32."""

SCALARS = [float, int, bool, np.float64, np.float32, np.float16, np.int64]
"""The scalar types a numeric keyword is drawn as."""


def _layout(array: np.ndarray, how: str) -> np.ndarray:
    if how == "F":
        return np.asfortranarray(array)
    if how == "strided" and array.ndim:
        wide = np.zeros(tuple(2 * extent for extent in array.shape), array.dtype)
        wide[tuple(slice(None, None, 2) for _ in array.shape)] = array
        return wide[tuple(slice(None, None, 2) for _ in array.shape)]
    if how == "transposed":
        return np.ascontiguousarray(array.T).T
    return np.ascontiguousarray(array)


@st.composite
def arrays(draw: st.DrawFn, shape: tuple[int, ...], dtypes: tuple[Any, ...] = (np.float64, np.float32),
           specials: bool = True, scale: float = 100.0) -> np.ndarray:
    """An array of ``shape``: normal values times ``scale`` (rounded for integers), in half of them
    up to three special bit patterns, in a drawn dtype and memory order."""
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = rng.standard_normal(shape) * scale
    with np.errstate(all="ignore"):  # a huge scale overflows a small dtype: drawn on purpose
        if dtype.kind in "iu":
            array = np.round(np.abs(values) if dtype.kind == "u" else values).astype(dtype)
        else:
            array = values.astype(dtype)
    if specials and dtype in _SPECIAL_BITS and array.size and draw(st.booleans()):
        bits = array.reshape(-1).view(f"u{dtype.itemsize}")
        for _ in range(draw(st.integers(0, 3))):
            at = draw(st.integers(0, array.size - 1))
            bits[at] = draw(st.sampled_from(_SPECIAL_BITS[dtype]))
    return _layout(array, draw(st.sampled_from(["C", "F", "strided", "transposed"])))


@st.composite
def numbers(draw: st.DrawFn, values: list[float]) -> Any:
    """One of ``values`` as a drawn scalar type (a value a type cannot hold is left as a float)."""
    value = draw(st.sampled_from(values))
    kind = draw(st.sampled_from(SCALARS))
    try:
        with np.errstate(all="ignore"):
            cast = kind(value)
    except (ValueError, OverflowError):
        return value
    return cast


def _bits(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return [_bits(item) for item in value]
    return repr(value)


def _untouched(arguments: Any, before: Any) -> None:
    assert _bits(arguments) == before, "the patched call changed its input"


@given(data=st.data())
@DRAWN
def test_drawn_phase_correlations_are_spacrs(same_as_spacr: Compare, data: st.DataObject) -> None:
    from spacr import ops_cycles, ops_register

    from spacr_accel_core.patch._install import original_of

    namespace = data.draw(st.sampled_from([ops_register, ops_cycles]))
    height, width = data.draw(st.integers(1, 24)), data.draw(st.integers(1, 24))
    first = data.draw(arrays((height, width), (np.float64, np.float32, np.float16, np.int64)))
    other = data.draw(st.sampled_from(["shifted", "drawn", "other shape"]))
    if other == "shifted":
        second = _layout(np.roll(np.asarray(first), (2, 3), (0, 1)), data.draw(st.sampled_from(["C", "F"])))
    else:
        second = data.draw(arrays((height, width + (other == "other shape"))))
    keywords: dict[str, Any] = {"gpu": data.draw(st.sampled_from([False, True, np.bool_(False)]))}
    if data.draw(st.booleans()):
        keywords["expected"] = (data.draw(st.sampled_from([0, 3, np.int64(-2)])),
                                data.draw(st.sampled_from([0, 5, np.int64(1)])))
    if data.draw(st.booleans()):
        keywords["tolerance"] = data.draw(st.one_of(numbers([3.0, 0.0, 1.5]), st.just((2, np.float32(4.0)))))
    if data.draw(st.booleans()):
        keywords["min_peak_ratio"] = data.draw(numbers([3.0, 0.0, 1e300, 1.0]))
    given_first = first.tolist() if data.draw(st.booleans()) else first
    before = _bits([given_first, second])
    same_as_spacr(lambda: namespace.phase_correlate(given_first, second, **keywords),
                  lambda: original_of(namespace.phase_correlate)(given_first, second, **keywords))
    _untouched([given_first, second], before)


def _seed_state(seed: Any) -> Any:
    if isinstance(seed, np.random.Generator):
        seed = seed.bit_generator
    if not isinstance(seed, np.random.BitGenerator):
        return None

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        return value.tolist() if isinstance(value, np.ndarray) else value

    return plain(seed.state)


_SEEDS: list[Callable[[], Any]] = [
    lambda: 0, lambda: 7, lambda: np.int64(3), lambda: np.random.default_rng(4), lambda: np.random.PCG64(5),
    lambda: np.random.Philox(6), lambda: np.random.SeedSequence(8), lambda: [1, 2],
]


@given(data=st.data())
@DRAWN
def test_drawn_pair_searches_are_spacrs(same_as_spacr: Compare, data: st.DataObject) -> None:
    from spacr import ops_phenotype

    from spacr_accel_core.patch._install import original_of

    count = data.draw(st.integers(0, 24))
    source = data.draw(arrays((count, 2), (np.float64, np.float32, np.int64), scale=50.0))
    scale = data.draw(numbers([2.0, 1.0, 0.5, 1e307, 1e-300, 0.0, -1.0, float("nan")]))
    with np.errstate(all="ignore"):  # a signalling NaN drawn in the source
        moved = np.asarray(source, float) * 2.0 + 7.0
    target = data.draw(st.sampled_from(["moved", "drawn"]))
    target_points = (_layout(moved, data.draw(st.sampled_from(["C", "F"]))) if target == "moved"
                     else data.draw(arrays((data.draw(st.integers(0, 24)), 2), scale=50.0)))
    keywords: dict[str, Any] = {"trials": data.draw(st.sampled_from([20, np.int64(30), None, 5.0, True, -3]))}
    for name, values in (("radius", [3.0, 0.0, -1.0, 1e308]), ("tolerance", [0.04, 0.5, 0.0, 1e200]),
                         ("max_rotation", [15.0, 180.0, 0.0, -1.0])):
        if data.draw(st.booleans()):
            keywords[name] = data.draw(numbers(values))
    make_seed = data.draw(st.sampled_from(_SEEDS))
    mine, theirs = make_seed(), make_seed()
    as_list = data.draw(st.booleans())
    given_source = source.tolist() if as_list else source
    before = _bits([given_source, target_points])
    same_as_spacr(
        lambda: ops_phenotype.seed_by_scaled_pairs(given_source, target_points, scale, seed=mine, **keywords),
        lambda: original_of(ops_phenotype.seed_by_scaled_pairs)(given_source, target_points, scale, seed=theirs,
                                                                 **keywords))
    _untouched([given_source, target_points], before)
    assert _seed_state(mine) == _seed_state(theirs)


@given(data=st.data())
@DRAWN
def test_drawn_clipped_planes_are_spacrs(same_as_spacr: Compare, data: st.DataObject) -> None:
    from spacr import ops_cycles

    from spacr_accel_core.patch._install import original_of

    shape = data.draw(st.sampled_from([(9, 7), (1, 5), (6, 1), (0, 4), (12,), (3, 4, 5)]))
    plane = data.draw(arrays(shape, (np.float32, np.float64, np.float16, np.int64, np.uint8)))
    given_plane = plane.tolist() if data.draw(st.booleans()) else plane
    percentile = data.draw(numbers([90.0, 0.0, 100.0, 50.5, 101.0, -1.0, float("nan")]))
    kept = ops_cycles._CHANNEL_CLIP_PERCENTILE
    before = _bits(given_plane)
    try:
        ops_cycles._CHANNEL_CLIP_PERCENTILE = percentile
        same_as_spacr(lambda: ops_cycles._clipped(given_plane), lambda: original_of(ops_cycles._clipped)(given_plane))
    finally:
        ops_cycles._CHANNEL_CLIP_PERCENTILE = kept
    _untouched(given_plane, before)


@given(data=st.data())
@DRAWN
def test_drawn_registration_targets_are_spacrs(same_as_spacr: Compare, data: st.DataObject) -> None:
    from spacr import ops_cycles

    from spacr_accel_core.patch._install import original_of

    count = data.draw(st.integers(0, 4))
    shape = data.draw(st.sampled_from([(9, 7), (1, 5), (4, 4)]))
    planes = [data.draw(arrays(shape if index != 2 or data.draw(st.booleans()) else (shape[0], shape[1] + 1),
                               (np.float32, np.float64, np.float16, np.int64)))
              for index in range(count)]
    keywords: dict[str, Any] = {}
    if data.draw(st.booleans()):
        keywords["percentile"] = data.draw(numbers([70.0, 0.0, 100.0, 99.9, 101.0, float("nan")]))
    if data.draw(st.booleans()):
        keywords["cutoff"] = data.draw(numbers([1.0, 0.5, 2.0, 0.0, -1.0, 1e39, float("inf"), float("nan")]))
    wrap = data.draw(st.sampled_from(["list", "tuple", "stack", "generator", "map"]))

    def channels() -> Any:
        if wrap == "tuple":
            return tuple(planes)
        if wrap == "stack":  # one array of the channels, where they stack without a cast
            alike = len({(plane.shape, plane.dtype) for plane in planes}) == 1
            return np.stack(planes) if planes and alike else planes
        if wrap == "generator":
            return (plane for plane in planes)
        if wrap == "map":
            return map(np.asarray, planes)
        return list(planes)

    before = _bits(planes)
    same_as_spacr(lambda: ops_cycles.sbs_mean_target(channels(), **keywords),
                  lambda: original_of(ops_cycles.sbs_mean_target)(channels(), **keywords))
    _untouched(planes, before)


@given(data=st.data())
@DRAWN
def test_drawn_spot_scores_are_spacrs(same_as_spacr: Compare, data: st.DataObject) -> None:
    from spacr import ops_sbs

    from spacr_accel_core.patch._install import original_of

    shape = data.draw(st.sampled_from([(3, 4, 6, 5), (1, 2, 4, 4), (2, 1, 1, 3), (4, 4, 20, 3), (0, 2, 3, 3),
                                       (2, 0, 3, 3), (3, 5, 4)]))
    stack = data.draw(arrays(shape, (np.float32, np.float64, np.float16, np.int64), scale=data.draw(
        st.sampled_from([100.0, 1e19, 1e-20]))))
    given_stack = stack.tolist() if data.draw(st.booleans()) else stack
    before = _bits(given_stack)
    same_as_spacr(lambda: ops_sbs.estimate_read_locations(given_stack),
                  lambda: original_of(ops_sbs.estimate_read_locations)(given_stack))
    _untouched(given_stack, before)


@given(data=st.data())
@DRAWN
def test_drawn_read_attributions_are_spacrs(same_as_spacr: Compare, data: st.DataObject) -> None:
    from spacr import ops_sbs

    from spacr_accel_core.patch._install import original_of

    reads, objects = data.draw(st.integers(0, 30)), data.draw(st.integers(0, 8))
    peaks = data.draw(arrays((reads, 2), (np.float64, np.float32, np.int64), scale=20.0))
    centroids = data.draw(arrays((objects, 2), (np.float64, np.float32), scale=20.0))
    areas = np.abs(data.draw(arrays((objects + data.draw(st.sampled_from([0, 0, 0, 1])),),
                                    (np.float64, np.float32, np.int64), scale=50.0)))
    keywords: dict[str, Any] = {}
    for name, values in (("footprint", [10.0, 0.0, 3.0, -1.0, 1e308, float("nan")]),
                         ("tie", [1.0, 0.0, 0.5, -1.0, float("inf")])):
        if data.draw(st.booleans()):
            keywords[name] = data.draw(numbers(values))
    given_peaks = peaks.tolist() if data.draw(st.booleans()) else peaks
    before = _bits([given_peaks, centroids, areas])
    same_as_spacr(lambda: ops_sbs.attribute_reads(given_peaks, centroids, areas, **keywords),
                  lambda: original_of(ops_sbs.attribute_reads)(given_peaks, centroids, areas, **keywords))
    _untouched([given_peaks, centroids, areas], before)


@pytest.fixture
def card_translation(usable_stand_in: Callable[..., str]) -> None:
    """torch's translation ranked first, as a card's would be, once per test: on a CPU alone the floor's
    copy is spaCR's own, every call is left to spaCR, and no drawn call would reach the served path."""
    plugin = pytest.importorskip("spacr_accel_torch._plugin", reason="torch is not installed (the card stand-in)")
    usable_stand_in(plugin, "cardtorch", "spacr_accel_translate")


@given(data=st.data())
@DRAWN
def test_drawn_translations_are_spacrs(same_as_spacr: Compare, card_translation: None, data: st.DataObject) -> None:
    from spacr import ops_cycles

    from spacr_accel_core.patch._install import original_of

    shape = data.draw(st.sampled_from([(6, 5), (2, 4, 3), (1, 1), (5,)]))
    image = data.draw(arrays(shape, (np.float32, np.float64, np.uint16, np.int64, np.complex64)
                             if len(shape) > 1 else (np.float32,)))
    dy = data.draw(numbers([2.0, -3.0, 0.0, 2.7, 100.0, float("nan"), 1e20]))
    dx = data.draw(numbers([1.0, -1.0, 0.0, -4.2]))
    before = _bits(image)
    same_as_spacr(lambda: ops_cycles._translate(image, dy, dx),
                  lambda: original_of(ops_cycles._translate)(image, dy, dx))
    _untouched(image, before)
