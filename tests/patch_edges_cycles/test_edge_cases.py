"""Edge inputs on which a patched spaCR call once differed from spaCR's own: each now gives spaCR's
bits, layout, warnings and exception, or is left to spaCR before any input is touched."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from spacr_accel_core import config, patch
from spacr_accel_core.patch._install import original_of

Compare = Callable[[Callable[[], Any], Callable[[], Any]], Any]


def _passed(seam: str) -> list[str]:
    rows = {row.seam: row for row in patch.report().seams}
    row = rows.get(seam)
    return [reason for reason, _calls, _seconds in row.passed] if row else []


def _served(seam: str) -> int:
    rows = {row.seam: row for row in patch.report().seams}
    row = rows.get(seam)
    return sum(calls for _backend, calls, _seconds in row.served) if row else 0


def _nan32(bits: int) -> np.float32:
    return np.array([bits], np.uint32).view(np.float32)[0]


def _pair(size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    first = rng.standard_normal((size, size))
    second = np.roll(first, (3, 5), (0, 1)) + 0.5 * rng.standard_normal((size, size))
    return first, second


@pytest.mark.parametrize("module", ["spacr.ops_register", "spacr.ops_cycles"])
@pytest.mark.parametrize("size", [64, 256, 300])
@pytest.mark.parametrize("layout", ["fortran", "one transposed", "strided"])
def test_phase_correlation_of_fields_in_any_layout_is_spacrs(same_as_spacr: Compare, module: str, size: int,
                                                              layout: str) -> None:
    """spaCR's peak ratio is a mean over its surface in the surface's memory order, and its product's
    last bits follow its spectra's layout: a Fortran-ordered or transposed field gives spaCR's ratio."""
    import importlib

    namespace = importlib.import_module(module)
    own = original_of(namespace.phase_correlate)
    for seed in range(3):
        first, second = _pair(size, seed)
        if layout == "fortran":
            first, second = np.asfortranarray(first), np.asfortranarray(second)
        elif layout == "one transposed":
            second = np.ascontiguousarray(second.T).T
        else:
            first = np.tile(first, (2, 2))[::2, ::2]
        same_as_spacr(lambda a=first, b=second: namespace.phase_correlate(a, b, gpu=False),
                      lambda a=first, b=second: own(a, b, gpu=False))


@pytest.mark.parametrize("size", [8, 300])
@pytest.mark.parametrize("kind", ["nan", "inf", "huge", "zero"])
def test_phase_correlation_warns_as_spacr_warns(same_as_spacr: Compare, size: int, kind: str) -> None:
    """A NaN, an infinity or a field whose transform overflows: spaCR's NumPy warns once per call of
    each transform, the patched call the same (never once per band of rows)."""
    from spacr import ops_register

    first, second = _pair(size, 4)
    if kind == "nan":
        first[1, 1] = np.nan
    elif kind == "inf":
        second[2, 2] = np.inf
    elif kind == "huge":
        first[:] = 1e308
    else:
        first[:] = 0.0
    own = original_of(ops_register.phase_correlate)
    same_as_spacr(lambda: ops_register.phase_correlate(first, second, gpu=False),
                  lambda: own(first, second, gpu=False))


def test_phase_correlation_under_a_callers_error_state_is_spacrs(same_as_spacr: Compare) -> None:
    """``np.errstate(all="raise")`` around a NaN field: spaCR's own surface raises inside its loop
    and spaCR says no backend could register; the patched call says the same, once."""
    from spacr import ops_register

    first, second = _pair(300, 5)
    first[0, 0] = np.nan
    own = original_of(ops_register.phase_correlate)

    def patched() -> Any:
        with np.errstate(all="raise"):
            return ops_register.phase_correlate(first, second, gpu=False)

    def spacrs() -> Any:
        with np.errstate(all="raise"):
            return own(first, second, gpu=False)

    same_as_spacr(patched, spacrs)


def _points(seed: int = 1, count: int = 40) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    source = rng.uniform(0, 100, (count, 2))
    return source, source * 2.0 + 5.0


def test_a_scale_that_overflows_raises_spacrs_error(same_as_spacr: Compare) -> None:
    """``scale=1e307``: spaCR's moved points overflow and its tree refuses them (``ValueError``)."""
    from spacr import ops_phenotype

    source, target = _points()
    own = original_of(ops_phenotype.seed_by_scaled_pairs)
    expected = same_as_spacr(lambda: ops_phenotype.seed_by_scaled_pairs(source, target, 1e307, trials=50),
                             lambda: own(source, target, 1e307, trials=50))
    assert expected.error is not None and expected.error[0] is ValueError


def _generators() -> Iterator[tuple[str, Callable[[], Any]]]:
    yield "generator", lambda: np.random.default_rng(21)
    yield "bit generator", lambda: np.random.PCG64(21)
    yield "another bit generator", lambda: np.random.MT19937(21)


def _state(seed: Any) -> Any:
    """A generator's state, its arrays as lists (MT19937 keeps its key in one), so that ``==`` compares."""

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        return value.tolist() if isinstance(value, np.ndarray) else value

    return plain((seed.bit_generator if isinstance(seed, np.random.Generator) else seed).state)


@pytest.mark.parametrize(("name", "make"), list(_generators()))
def test_a_shared_generator_left_to_spacr_is_untouched(same_as_spacr: Compare, name: str,
                                                       make: Callable[[], Any]) -> None:
    """No backend may score the candidates (an order of a backend that cannot serve here): the call
    goes to spaCR, whose generator must be the caller's as given, not one the seam drew from."""
    from spacr import ops_phenotype

    source, target = _points(2)
    own = original_of(ops_phenotype.seed_by_scaled_pairs)
    mine, theirs = make(), make()

    def patched() -> Any:
        with config.override(backends=["cupy"], only=True):
            return ops_phenotype.seed_by_scaled_pairs(source, target, 2.0, trials=60, seed=mine)

    same_as_spacr(patched, lambda: own(source, target, 2.0, trials=60, seed=theirs))
    assert _state(mine) == _state(theirs)
    assert _passed("spacr.ops_phenotype.seed_by_scaled_pairs")


@pytest.mark.parametrize(("name", "make"), list(_generators()))
def test_a_shared_generator_served_ends_where_spacrs_ends(same_as_spacr: Compare, name: str,
                                                          make: Callable[[], Any]) -> None:
    """Served, the caller's generator is left in the state spaCR's own draws leave it."""
    from spacr import ops_phenotype

    source, target = _points(3)
    own = original_of(ops_phenotype.seed_by_scaled_pairs)
    mine, theirs = make(), make()
    same_as_spacr(lambda: ops_phenotype.seed_by_scaled_pairs(source, target, 2.0, trials=60, seed=mine),
                  lambda: own(source, target, 2.0, trials=60, seed=theirs))
    assert _state(mine) == _state(theirs)
    assert _served("spacr.ops_phenotype.seed_by_scaled_pairs") == 1


@pytest.mark.parametrize("bits", [0xFFC01234, 0x7FC00001, 0xFFC00000, 0x7F800001])
def test_clipped_keeps_spacrs_nan(same_as_spacr: Compare, bits: int) -> None:
    """A plane holding NaN: spaCR's percentiles are one of its NaNs (which one is its partition's
    choice), and its clip spreads it; the patched call gives those bits."""
    from spacr import ops_cycles

    plane = np.random.default_rng(6).standard_normal((40, 30)).astype(np.float32)
    plane[3, 3] = _nan32(bits)
    plane[5, 5] = _nan32(0xFFC00007)
    own = original_of(ops_cycles._clipped)
    same_as_spacr(lambda: ops_cycles._clipped(plane), lambda: own(plane))


def _channels(seed: int = 7, shape: tuple[int, int] = (30, 20)) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]


@pytest.mark.parametrize("case", ["nan", "shapes", "plain"])
@pytest.mark.parametrize("wrap", ["generator", "map", "iterator"])
def test_the_target_of_one_shot_channels_is_spacrs(same_as_spacr: Compare, case: str, wrap: str) -> None:
    """Channels given as a generator, a ``map`` or an iterator: spaCR reads them once, and so must
    the patched call, whatever it answers (here a NaN and mismatched shapes that spaCR decides)."""
    from spacr import ops_cycles

    own = original_of(ops_cycles.sbs_mean_target)

    def channels() -> Iterator[np.ndarray]:
        planes = _channels()
        if case == "nan":
            planes[1][2, 2] = np.nan
        elif case == "shapes":
            planes[2] = planes[2][:-1]
        if wrap == "generator":
            return (plane for plane in planes)
        if wrap == "map":
            return map(np.asarray, planes)
        return iter(planes)

    same_as_spacr(lambda: ops_cycles.sbs_mean_target(channels()), lambda: own(channels()))


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan, 1e30, 3e38])
def test_the_spot_score_of_a_stack_holding_non_finite_values_is_spacrs(same_as_spacr: Compare,
                                                                       value: float) -> None:
    """NaN and infinities meeting in spaCR's ``std`` (``inf - inf``): spaCR's NaN bits and its
    warnings; and values whose squares overflow float32."""
    from spacr import ops_sbs

    stack = np.random.default_rng(8).standard_normal((3, 4, 12, 10)).astype(np.float32)
    stack[0, 0, 1, 1] = np.nan
    stack[1, 1, 1, 1] = -np.inf
    stack[2, 2, 2, 2] = _nan32(0xFFC01234)
    stack[1, 0, 3, 3] = np.float32(value)
    own = original_of(ops_sbs.estimate_read_locations)
    same_as_spacr(lambda: ops_sbs.estimate_read_locations(stack), lambda: own(stack))
