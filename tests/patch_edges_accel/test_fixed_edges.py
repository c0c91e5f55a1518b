"""The edge inputs on which a patched call once differed from spaCR's own, each against spaCR
unpatched: a NumPy scalar sigma, Fortran-ordered points of eight or more coordinates, Fortran-ordered
and transposed planes, and the warnings of spaCR's own casts."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from spacr_accel_core import patch


def _served(seam: str) -> int:
    rows = {row.seam: row for row in patch.report().seams}
    return sum(calls for _backend, calls, _seconds in rows[seam].served) if seam in rows else 0


def _ndimage(function: Any) -> Any:
    """``scipy.ndimage`` as the scoped spaCR ``function`` imports it (the patch's stand-in while it is
    installed, SciPy's own otherwise); a seam over the function is looked through to it."""
    return inspect.unwrap(function).__builtins__["__import__"]("scipy", None, None, ("ndimage",), 0).ndimage


def _field(seed: int, shape: tuple[int, int] = (40, 44)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random(shape) * 1000).astype(np.float32)


@pytest.mark.parametrize("sigma", [np.float32(1.1), np.float16(1.5), np.float32(3.0), np.int8(12)])
def test_a_numpy_scalar_sigma_is_scipys_in_its_own_precision(same_as_spacr: Callable[..., Any], sigma: Any) -> None:
    import spacr.ops_engine as engine
    import spacr.ops_phenotype as phenotype

    image = _field(1)
    same_as_spacr(lambda: phenotype.nuclear_points(image, sigma=sigma), image)
    same_as_spacr(lambda: _ndimage(engine._decode_field).gaussian_laplace(image, sigma), image)
    same_as_spacr(lambda: _ndimage(phenotype.nuclear_points).gaussian_filter(image, 1.1, truncate=np.float32(sigma)),
                  image)
    assert _served("spacr.ops_engine: scipy.ndimage.gaussian_laplace") == 0


def test_python_and_float64_numbers_are_still_served(same_as_spacr: Callable[..., Any]) -> None:
    import spacr.ops_engine as engine
    import spacr.ops_phenotype as phenotype

    image = _field(2)
    for sigma in (1.1, np.float64(1.7), 2, np.int64(3)):
        same_as_spacr(lambda sigma=sigma: _ndimage(engine._decode_field).gaussian_laplace(image, sigma), image)
        same_as_spacr(lambda sigma=sigma: _ndimage(phenotype.nuclear_points).gaussian_filter(
            image, sigma, truncate=np.float64(3.5)), image)
    if not _served("spacr.ops_engine: scipy.ndimage.gaussian_laplace"):
        pytest.skip("no backend above the NumPy floor here: the Gaussians are SciPy's own")
    assert _served("spacr.ops_engine: scipy.ndimage.gaussian_laplace") == 4
    assert _served("spacr.ops_phenotype: scipy.ndimage.gaussian_filter") == 4


@pytest.mark.parametrize("cval", ["zero", None, 1j, [0.0]])
def test_a_cval_scipy_cannot_read_raises_scipys_error(same_as_spacr: Callable[..., Any], cval: Any) -> None:
    import spacr.ops_engine as engine

    image = _field(3)
    outcome = same_as_spacr(lambda: _ndimage(engine._decode_field).minimum_filter(image, size=5, cval=cval), image)
    assert outcome.error is not None and outcome.error[0] is TypeError
    same_as_spacr(lambda: _ndimage(engine._decode_field).gaussian_laplace(image, 1.0, cval=cval), image)


@pytest.mark.parametrize("width", [8, 9, 12])
@pytest.mark.parametrize("layout", ["source F", "target F", "both transposed", "source strided rows"])
def test_wide_points_in_any_order_are_spacrs_distances(same_as_spacr: Callable[..., Any], width: int,
                                                        layout: str) -> None:
    from spacr import ops_accel

    rng = np.random.default_rng(width)
    source = (rng.standard_normal((300, width)) * 100).astype(np.float32)
    target = (rng.standard_normal((200, width)) * 100).astype(np.float32)
    if layout == "source F":
        source = np.asfortranarray(source)
    elif layout == "target F":
        target = np.asfortranarray(target)
    elif layout == "both transposed":
        source, target = source.T.copy().T, target.T.copy().T
    else:
        source = np.repeat(source, 2, axis=0)[::2]
    same_as_spacr(lambda: ops_accel.nearest_neighbours(source, target, gpu=False), source, target)


def test_wide_c_ordered_points_are_still_served(same_as_spacr: Callable[..., Any]) -> None:
    from spacr import ops_accel

    rng = np.random.default_rng(4)
    source = rng.standard_normal((300, 9)).astype(np.float32)
    same_as_spacr(lambda: ops_accel.nearest_neighbours(source, source[::-1].copy(), gpu=False), source)
    assert _served("spacr.ops_accel.nearest_neighbours") == 1


def _orders(field: np.ndarray) -> dict[str, np.ndarray]:
    return {"F": np.asfortranarray(field), "transposed": field.T.copy().T,
            "float64 F": np.asfortranarray(field, np.float64), "strided": np.repeat(field, 2, axis=1)[:, ::2],
            "reversed": field[::-1], "C": field}


@pytest.mark.parametrize("order", ["F", "transposed", "float64 F", "strided", "reversed", "C"])
def test_levels_come_back_in_spacrs_order(same_as_spacr: Callable[..., Any], order: str) -> None:
    import spacr.ops_cycles as cycles

    plane = _orders(_field(5))[order]
    other = _orders(_field(6))[order]
    same_as_spacr(lambda: cycles._clipped(plane), plane)
    same_as_spacr(lambda: cycles.sbs_mean_target([plane]), plane)
    same_as_spacr(lambda: cycles.sbs_mean_target([plane, other, plane]), plane, other)
    assert _served("spacr.ops_cycles.sbs_mean_target") == 2


def test_channels_of_both_orders_are_spacrs_own(same_as_spacr: Callable[..., Any]) -> None:
    import spacr.ops_cycles as cycles

    plane, other = _field(7), np.asfortranarray(_field(8))
    same_as_spacr(lambda: cycles.sbs_mean_target([plane, other]), plane, other)
    same_as_spacr(lambda: cycles.sbs_mean_target([other, plane]), plane, other)
    assert _served("spacr.ops_cycles.sbs_mean_target") == 0


@pytest.mark.parametrize("order", ["F", "transposed", "float64 F", "strided", "C"])
@pytest.mark.parametrize("cycles_given", [1, 3])
def test_an_aligned_field_comes_back_in_spacrs_order(same_as_spacr: Callable[..., Any], order: str,
                                                     cycles_given: int) -> None:
    import spacr.ops_cycles as cycles

    rng = np.random.default_rng(cycles_given)
    pattern = _field(9, (48, 52))
    planes = {cycle: [_orders(np.roll(pattern + rng.random(pattern.shape).astype(np.float32),
                                      (cycle + channel, 2 * cycle - channel), axis=(0, 1)))[order]
                      for channel in range(2)] for cycle in range(1, cycles_given + 1)}
    same_as_spacr(lambda: cycles.align_field(planes))
    assert _served("spacr.ops_cycles.align_field") == 1
    mixed = {1: [planes[1][0], np.ascontiguousarray(planes[1][1])]}
    same_as_spacr(lambda: cycles.align_field(mixed))


def test_spacrs_cast_warnings_are_given_once(same_as_spacr: Callable[..., Any]) -> None:
    from spacr import ops_accel, ops_sbs

    field = np.full((12, 14), 2.0)
    field[3, 4] = 1e300  # float32 cannot hold it: spaCR's cast warns, once
    outcome = same_as_spacr(lambda: ops_accel.maximum_filter(field, 3, gpu=False), field)
    assert [message for _kind, message in outcome.warned] == ["overflow encountered in cast"]
    field[5, 5] = np.nan
    same_as_spacr(lambda: ops_accel.maximum_filter(field, 3, gpu=False), field)
    peaks = np.array([[2.0, 3.0], [np.nan, 4.0]])
    stack = np.ones((2, 2, 12, 14), np.float32)
    outcome = same_as_spacr(lambda: ops_sbs.extract_bases(stack, peaks), stack, peaks)
    assert ("invalid value encountered in cast" in [message for _kind, message in outcome.warned])
    points = np.array([[0.0, 1.0], [1e200, 2.0], [3.0, 4.0]])
    same_as_spacr(lambda: ops_accel.nearest_neighbours(points, points, gpu=False), points)
    with np.errstate(over="raise"):
        same_as_spacr(lambda: ops_accel.maximum_filter(np.array([[1e300, 1.0]] * 3), 3, gpu=False))


@pytest.mark.parametrize("tolerance", [np.float32(2.0), np.int64(8), "8", (2, "x")])
def test_a_tolerance_spacr_raises_on_late_gives_its_warnings_once(same_as_spacr: Callable[..., Any],
                                                                  tolerance: Any) -> None:
    """spaCR reads the tolerance only after its channel registrations, which warn on an infinity: the
    seam leaves such a tolerance to spaCR before making any of them."""
    import spacr.ops_cycles as cycles

    plane = _field(10, (16, 16))
    plane[0, 0] = -np.inf
    planes = {1: [_field(11, (16, 16))], 2: [plane]}
    outcome = same_as_spacr(lambda: cycles.align_field(planes, tolerance=tolerance, gpu=False))
    assert outcome.error is not None and outcome.warned
