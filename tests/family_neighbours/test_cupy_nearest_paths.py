"""The CuPy backend's nearest-neighbour search, its algorithm run on the NumPy-compatible kit and
checked against the PLAIN references of ``spacr_accel_core.testing`` (exactness at any magnitude,
out-of-memory at the floor), never only against another backend; the same check on the card is
marked GPU-only."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import BackendOutOfMemory, ops
from spacr_accel_core.testing import reference_nearest
from spacr_accel_cupy import _kit, _neighbours_kernels


def _device_reason() -> str | None:
    """Why CuPy cannot reach a card here, or ``None`` where it can."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return None
        return "CuPy found no CUDA device"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


NO_DEVICE = _device_reason()
gpu_only = pytest.mark.skipif(NO_DEVICE is not None,
                              reason=f"needs a CUDA device that CuPy can reach ({NO_DEVICE})")
KIT = _kit.numpy_kit()


class CupyOutOfMemory(MemoryError):
    """Stands in for ``cupy.cuda.memory.OutOfMemoryError``, which is a MemoryError."""


@st.composite
def point_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    width = draw(st.integers(1, 20))
    n, m = draw(st.integers(1, 120)), draw(st.integers(1, 120))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["grid", "uniform", "huge", "tiny"]))
    if kind == "grid":
        offset = draw(st.sampled_from([0.0, 1000.0, -3e5]))
        source, target = rng.integers(-2, 3, (n, width)) + offset, rng.integers(-2, 3, (m, width)) + offset
    elif kind == "uniform":
        source, target = rng.uniform(-1e4, 1e4, (n, width)), rng.uniform(-1e4, 1e4, (m, width))
    elif kind == "huge":
        source, target = rng.uniform(-3e37, 3e37, (n, width)), rng.uniform(-3e37, 3e37, (m, width))
    else:
        source, target = rng.uniform(-1e-20, 1e-20, (n, width)), rng.uniform(-1e-20, 1e-20, (m, width))
    return source.astype(np.float32), target.astype(np.float32)


@settings(max_examples=50, deadline=None)
@given(points=point_sets(), chunk=st.sampled_from([1, 7, 64, 4096]))
def test_nearest_equals_the_reference(points: tuple[np.ndarray, np.ndarray], chunk: int) -> None:
    source, target = points
    index, distance = _neighbours_kernels.nearest(KIT, source, target, chunk)
    expected = reference_nearest(source, target)
    assert index.dtype == np.int64 and distance.dtype == np.float32
    assert np.array_equal(index, expected[0]) and np.array_equal(distance, expected[1])


def extreme_points(scale: float) -> tuple[np.ndarray, np.ndarray]:
    """16 wide, 300 x 250 pairs (more than 65,536), with duplicate targets (ties)."""
    rng = np.random.default_rng(int(np.log10(scale)) + 100)
    source = (rng.uniform(-1, 1, (300, 16)) * scale).astype(np.float32)
    target = (rng.uniform(-1, 1, (250, 16)) * scale).astype(np.float32)
    target[[40, 90, 200]] = source[5]  # the lowest index must win
    return source, target


@pytest.mark.parametrize("scale", [1e19, 3e37, 1e-22, 3e-23])
def test_huge_and_tiny_wide_coordinates_are_exact(scale: float) -> None:
    """Coordinates whose float32 squares overflow (1e19 in 16-D, 3e37) or underflow (1e-22, 3e-23)."""
    source, target = extreme_points(scale)
    expected = reference_nearest(source, target)
    assert expected[0][5] == 40
    for chunk in (7, 4096):
        index, distance = _neighbours_kernels.nearest(KIT, source, target, chunk)
        assert np.array_equal(index, expected[0]) and np.array_equal(distance, expected[1])


def test_nearest_gives_up_with_backend_out_of_memory_at_the_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*_: object, **__: object) -> None:
        raise CupyOutOfMemory("Out of memory allocating 512 bytes")

    monkeypatch.setattr(_neighbours_kernels, "pick_lowest", full)
    with pytest.raises(BackendOutOfMemory, match="out of memory even for 1"):
        _neighbours_kernels.nearest(KIT, np.zeros((20, 2), np.float32), np.ones((30, 2), np.float32), 4096)


@gpu_only
@pytest.mark.parametrize("scale", [1e19, 3e37, 1e-22, 3e-23])
def test_on_the_card_huge_and_tiny_wide_coordinates_are_exact(scale: float) -> None:
    source, target = extreme_points(scale)
    got = ops.nearest_neighbours(source, target, backend="cupy", chunk=97)
    expected = reference_nearest(source, target)
    assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
