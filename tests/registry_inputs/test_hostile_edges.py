"""Edges an adversarial run found in the shared input checks: bounds read exactly (integers beyond
2**53, ``np.longdouble``, numbers beyond float64's range), ``out=`` written through an ndarray
subclass (``np.memmap``), and mutual matching naming its own arguments. Each is checked on every
installed backend that serves the operation, forced by name, so the rule is the core's, not one
backend's luck."""

from __future__ import annotations

import numpy as np
import pytest

import spacr_accel_core
from spacr_accel_core import ops

FAR = 2**60 + 2**37
"""A distance float32 holds exactly (2**60's float32 step is 2**37), with ``FAR - 1`` rounded UP by
``float()`` (float64's step there is 256): the case where a rounded bound gives the wrong answer."""

EXTENDED = np.finfo(np.longdouble).nmant >= 61
"""``1 - 2**-60`` is a long double distinct from 1.0 (x86's 80-bit format), not a float64 alias."""


def serving(operation: str) -> list[str]:
    """Every installed backend implementing ``operation`` that computes on this machine when forced
    with ``gpu=False`` (torch runs on the CPU then; CuPy has no CPU to run on)."""
    spacr_accel_core.warm_up()
    names = [p.name for p in spacr_accel_core.plugins()
             if p.status in ("ok", "unusable") and operation in p.operations and p.name != "cupy"]
    return names or pytest.fail(f"no backend serves {operation}")


def one_point(backend: str, distance: float, max_distance: object) -> int:
    index, _ = ops.nearest_neighbours(np.zeros((1, 1)), np.array([[distance]]), max_distance=max_distance,
                                      backend=backend, gpu=False)
    return int(index[0])


@pytest.mark.parametrize("backend", serving("nearest_neighbours"))
def test_an_integer_bound_beyond_2_53_is_compared_exactly(backend: str) -> None:
    assert one_point(backend, float(FAR), FAR - 1) == -1  # FAR > FAR - 1: beyond the bound
    assert one_point(backend, float(FAR), FAR) == 0  # equal is within
    assert one_point(backend, float(FAR), FAR + 1) == 0


@pytest.mark.parametrize("backend", serving("nearest_neighbours"))
@pytest.mark.parametrize("bound", [10**400, np.inf, float("inf")], ids=["10**400", "np.inf", "inf"])
def test_a_bound_beyond_float64_is_no_bound(backend: str, bound: object) -> None:
    assert one_point(backend, 3.0e38, bound) == 0


@pytest.mark.skipif(not EXTENDED, reason="np.longdouble is float64 on this platform")
@pytest.mark.parametrize("backend", serving("nearest_neighbours"))
def test_a_long_double_bound_is_not_rounded_to_float64(backend: str) -> None:
    just_below_one = np.longdouble(1) - np.longdouble(2) ** -60
    assert one_point(backend, 1.0, just_below_one) == -1
    assert one_point(backend, 1.0, np.longdouble(1)) == 0


@pytest.mark.skipif(not EXTENDED, reason="np.longdouble is float64 on this platform")
@pytest.mark.parametrize("backend", serving("local_maxima"))
def test_a_long_double_threshold_is_not_rounded_to_float64(backend: str) -> None:
    field = np.zeros((9, 9), np.float32)
    field[4, 4] = 1.0
    just_below_one = np.longdouble(1) - np.longdouble(2) ** -60
    peaks = ops.local_maxima(field, 3, threshold=just_below_one, backend=backend, gpu=False)
    np.testing.assert_array_equal(peaks, [[4, 4]])
    assert len(ops.local_maxima(field, 3, threshold=np.longdouble(1), backend=backend, gpu=False)) == 0


def test_bounds_are_refused_with_their_names() -> None:
    with pytest.raises(ValueError, match="max_distance must be a non-negative"):
        ops.nearest_neighbours(np.zeros((1, 1)), np.zeros((1, 1)), max_distance=np.longdouble("nan"))
    with pytest.raises(ValueError, match="max_distance must be a non-negative"):
        ops.nearest_neighbours(np.zeros((1, 1)), np.zeros((1, 1)), max_distance=-(10**400))
    with pytest.raises(ValueError, match="threshold is NaN"):
        ops.local_maxima(np.zeros((3, 3)), 3, threshold=np.longdouble("nan"))


@pytest.mark.parametrize("backend", serving("maximum_filter"))
def test_out_may_be_a_memmap_for_the_filter(backend: str, tmp_path) -> None:
    field = np.random.default_rng(5).random((3, 40, 50), dtype=np.float32)
    mosaic = np.memmap(tmp_path / "peaks.f32", dtype=np.float32, mode="w+", shape=field.shape)
    answer = ops.maximum_filter(field, 5, out=mosaic, backend=backend, gpu=False)
    assert answer is mosaic
    mosaic.flush()
    written = np.fromfile(tmp_path / "peaks.f32", dtype=np.float32).reshape(field.shape)
    np.testing.assert_array_equal(written, ops.maximum_filter(field, 5, backend="numpy"))


@pytest.mark.parametrize("backend", serving("matmul"))
def test_out_may_be_a_memmap_for_the_product(backend: str, tmp_path) -> None:
    rng = np.random.default_rng(6)
    first, second = rng.random((300, 4), dtype=np.float32), rng.random((4, 4), dtype=np.float32)
    unmixed = np.memmap(tmp_path / "unmixed.f32", dtype=np.float32, mode="w+", shape=(300, 4))
    assert ops.matmul(first, second, out=unmixed, backend=backend, gpu=False) is unmixed
    np.testing.assert_allclose(np.asarray(unmixed), first @ second, rtol=1e-6)


def test_a_masked_out_is_still_refused() -> None:
    with pytest.raises(TypeError, match="out must be a NumPy array"):
        ops.maximum_filter(np.zeros((4, 4)), 3, out=np.ma.zeros((4, 4), dtype=np.float32))


def test_mutual_matching_names_its_own_arguments() -> None:
    good = np.zeros((3, 2))
    bad = good.copy()
    bad[1, 0] = np.nan
    with pytest.raises(ValueError, match=r"^first holds NaN"):
        ops.mutual_nearest_neighbours(bad, good)
    with pytest.raises(ValueError, match=r"^second holds NaN"):
        ops.mutual_nearest_neighbours(good, bad)
    with pytest.raises(ValueError, match="first and second must have the same width"):
        ops.mutual_nearest_neighbours(good, np.zeros((3, 3)))
    with pytest.raises(TypeError, match="second is float64"):
        ops.mutual_nearest_neighbours(np.zeros((3, 32), np.uint8), np.zeros((3, 32)), metric="hamming")
