"""The whole-plane steps on each backend's own code paths, beyond the conformance suite: CuPy's on the
NumPy kit, torch's on the CPU (and its decline where float32 is not promised IEEE), numba's bands
split between threads, the floor's bands of rows (a last band of one pixel joined to the one before)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
from hypothesis import given

from spacr_accel_core.testing._planes import (
    _SETTINGS,
    same_bits,
    score_stacks,
    spacr_score,
    spacr_translate,
    translation_cases,
)

if TYPE_CHECKING:
    from spacr_accel_torch._runtime import Device


def _scorable(stack: np.ndarray) -> np.ndarray | None:
    """The stack as a backend receives it (float32, C order, the one-cycle case as (K, 1, Y, X)), or
    None for the inputs the core answers itself."""
    data = np.ascontiguousarray(stack, dtype=np.float32)
    cycles, channels, height, width = data.shape
    if cycles == 0 or channels == 0 or height * width < 2:
        return None
    return data[0].reshape(channels, 1, height, width) if cycles == 1 else data


def _moved(stack: np.ndarray, moves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The C-ordered (F, H, W) stack, its clipped (F, 2) shifts and spaCR's answer, or None when empty."""
    if stack.size == 0:
        return None
    height, width = stack.shape[-2:]
    flat = np.ascontiguousarray(stack).reshape(-1, height, width)
    shifts = np.clip(moves.reshape(-1, 2), [-height, -width], [height, width]).astype(np.int64)
    want = np.stack([spacr_translate(field, *shift) for field, shift in zip(flat, shifts, strict=True)])
    return flat, shifts, want


@_SETTINGS
@given(case=translation_cases())
def test_cupy_translation_on_the_kit_is_spacrs(case: tuple[np.ndarray, object, np.ndarray]) -> None:
    from spacr_accel_cupy import _kit, _planes_kernels

    prepared = _moved(case[0], case[2])
    if prepared is not None:
        flat, shifts, want = prepared
        assert _planes_kernels.translate(_kit.numpy_kit(), flat, shifts).tobytes() == want.tobytes()


@_SETTINGS
@given(stack=score_stacks())
def test_cupy_score_on_the_kit_is_numpys(stack: np.ndarray) -> None:
    from spacr_accel_cupy import _kit, _planes_kernels

    data = _scorable(stack)
    if data is not None:
        assert same_bits(_planes_kernels.spot_score(_kit.numpy_kit(), data), spacr_score(stack))


def test_cupy_score_in_bands_of_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    from spacr_accel_cupy import _kit, _planes_kernels

    kit = _kit.numpy_kit()
    monkeypatch.setattr(_kit.Kit, "budget", lambda self: 1)  # one row per pass
    stack = (np.random.default_rng(2).standard_normal((7, 3, 9, 5)) * 1e5).astype(np.float32)
    assert same_bits(_planes_kernels.spot_score(kit, stack), spacr_score(stack))


def _torch_cpu() -> Device:
    pytest.importorskip("torch")
    from spacr_accel_torch._runtime import cpu_target

    return cpu_target()


@_SETTINGS
@given(stack=score_stacks())
def test_torch_score_on_the_cpu_is_numpys(stack: np.ndarray) -> None:
    from spacr_accel_torch import _planes_kernels

    data = _scorable(stack)
    if data is not None:
        assert same_bits(_planes_kernels.spot_score(data, _torch_cpu()), spacr_score(stack))


def test_torch_translates_dtypes_torch_cannot_name() -> None:
    from spacr_accel_torch import _planes_kernels

    rng = np.random.default_rng(3)
    for dtype in (np.uint16, np.bool_, np.uint64, np.float16):
        stack = rng.integers(0, 2, size=(3, 6, 7)).astype(dtype)
        shifts = np.array([[1, -2], [-6, 0], [0, 7]])
        want = np.stack([spacr_translate(stack[i], *shifts[i]) for i in range(3)])
        assert _planes_kernels.translate(stack, shifts, _torch_cpu()).tobytes() == want.tobytes()


def test_torch_score_declines_where_float32_is_not_promised_ieee() -> None:
    torch = pytest.importorskip("torch")
    from spacr_accel_core import BackendDeclined
    from spacr_accel_torch import _planes_kernels
    from spacr_accel_torch._runtime import Device

    with pytest.raises(BackendDeclined, match="does not promise"):
        _planes_kernels.spot_score(np.zeros((2, 1, 2, 2), np.float32), Device(torch.device("mps"), False))


def test_numba_score_split_between_threads_is_numpys() -> None:
    from spacr_accel_numba import _planes_kernels, warm

    assert warm(600)
    rng = np.random.default_rng(5)
    stack = (rng.standard_normal((11, 4, 41, 23)) * 10.0 ** rng.uniform(-3, 7, (11, 4, 41, 23))).astype(np.float32)
    stack[3, 1, 20, 4], stack[0, 0, 0, 0], stack[5, 2, 40, 22] = np.nan, np.inf, -0.0
    assert stack.shape[2] >= _planes_kernels.SPLIT_ROWS  # the rows are shared between threads
    assert same_bits(_planes_kernels.spot_score(stack), spacr_score(stack))


@pytest.mark.parametrize("cycles", [2, 3, 4, 7, 8, 9, 12, 13, 16, 17])
def test_numba_score_sweeps_of_eight_four_and_one_cycles_are_numpys(cycles: int) -> None:
    """Eight cycles a sweep, then four, then one: every mix of them adds in NumPy's order (one
    cycle never reaches a backend as it is: see ``_scorable``)."""
    from spacr_accel_numba import _planes_kernels, warm

    assert warm(600)
    rng = np.random.default_rng(cycles)
    shape = (cycles, 2, 3, 37)
    stack = (rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 7, shape)).astype(np.float32)
    stack[cycles - 1, 1, 2, 36] = np.nan
    assert same_bits(_planes_kernels.spot_score(stack), spacr_score(stack))


@pytest.mark.parametrize("shape", [(3, 2, 7, 1), (5, 1, 9, 3), (2, 3, 1, 5)])
def test_floor_bands_never_leave_a_lone_pixel(monkeypatch: pytest.MonkeyPatch, shape: tuple[int, ...]) -> None:
    from spacr_accel_numpy import _planes_kernels

    monkeypatch.setattr(_planes_kernels, "BAND_BYTES", 1)  # the smallest bands the rule allows
    bands = _planes_kernels._bands(shape[2], shape[3], shape[0] * shape[1] * shape[3] * 4)
    assert all((stop - start) * shape[3] >= 2 for start, stop in bands)
    assert bands[0][0] == 0 and bands[-1][1] == shape[2]
    stack = np.array([1e8, 1, 1, 1, 1, 1, 1, 1, 1, -1e8], np.float32)[np.arange(np.prod(shape)) % 10].reshape(shape)
    assert same_bits(_planes_kernels.spot_score(stack), spacr_score(stack))
