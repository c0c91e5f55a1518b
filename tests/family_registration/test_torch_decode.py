"""torch's decode steps beyond the conformance suite: the float32 path a device without float64
(Metal) takes, run on the CPU, agrees on shifts and verdicts with the ratio within 1e-5; and the
batches of pairs split by a small pass budget give the same answer."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from spacr_accel_core import ops
from spacr_accel_core.testing._decode import _SETTINGS, assert_registration, shifted_pairs
from spacr_accel_torch import _registration_kernels
from spacr_accel_torch._runtime import Device

torch = pytest.importorskip("torch")


@_SETTINGS
@given(pair=shifted_pairs())
def test_a_device_without_float64_agrees_within_float32(pair: tuple[np.ndarray, np.ndarray]) -> None:
    first, second = pair
    flat = first.reshape(-1, *first.shape[-2:]), second.reshape(-1, *first.shape[-2:])
    pairing = np.arange(flat[0].shape[0])
    peaks, ratios = _registration_kernels.phase_correlate(*flat, pairing, Device(torch.device("cpu"), float64=False))
    from spacr_accel_core.contract._registration import judge

    varies = np.ones(flat[0].shape[0], dtype=bool)
    got = judge(peaks, ratios, varies, first.shape, (0, 0), None, 3.0, "torch")
    assert_registration(got, first, second, (0, 0), None, 3.0, rtol=1e-5)


def test_small_passes_give_the_same_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(8)
    first = rng.random((5, 18, 14))
    second = np.roll(first, (4, -3), axis=(1, 2))
    stack = rng.random((7, 9, 9)).astype(np.float32)
    points = rng.integers(0, 9, size=(11, 2))
    whole = ops.phase_correlate(first, second, backend="torch"), ops.window_maxima(stack, points, 3, backend="torch")
    monkeypatch.setenv("SPACR_ACCEL_TORCH_PASS_BYTES", "1")
    split = ops.phase_correlate(first, second, backend="torch"), ops.window_maxima(stack, points, 3, backend="torch")
    for name in ("dy", "dx", "peak_ratio", "accepted"):
        np.testing.assert_array_equal(getattr(whole[0], name), getattr(split[0], name))
    np.testing.assert_array_equal(whole[1], split[1])


def test_a_device_without_float64_is_never_sent_one(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[np.dtype] = []
    original = _registration_kernels.tensor

    def recording(array: np.ndarray, device: object = None) -> object:
        sent.append(array.dtype)
        return original(array, device)  # type: ignore[arg-type]  # the kernel's own arguments, passed on as received

    monkeypatch.setattr(_registration_kernels, "tensor", recording)
    first = np.random.default_rng(2).random((2, 12, 12))
    _registration_kernels.phase_correlate(first, np.roll(first, 1, axis=1), np.arange(2),
                                          Device(torch.device("cpu"), float64=False))
    fields = [dtype for dtype in sent if dtype.kind == "f"]  # the pairing is int64, the fields float32
    assert len(fields) == 2 and all(dtype == np.float32 for dtype in fields)


@pytest.mark.parametrize("scale", [1e20, 1e-20, 1e30, 1e-30, 1e300, 2.0**100, 2.0**-100])
def test_a_device_without_float64_registers_fields_at_any_scale(scale: float) -> None:
    """In float32 the product of two transforms of fields of 1e20 overflows and of 1e-20 underflows
    (a varying pair read as "no variation"), and a float64 field past float32's range was cast to
    inf on the host; the normalised spectrum does not depend on the scale."""
    first = np.random.default_rng(9).random((2, 32, 24))
    second = np.roll(first, (2, -3), axis=(1, 2))
    no_double = Device(torch.device("cpu"), float64=False)
    want = _registration_kernels.phase_correlate(first, second, np.arange(2), no_double)
    got = _registration_kernels.phase_correlate(first * scale, second * scale, np.arange(2), no_double)
    plain = ops.phase_correlate(first, second, backend="numpy")  # the float64 floor, not torch itself
    np.testing.assert_array_equal(want[0], (plain.dy % 32) * 24 + plain.dx % 24)
    np.testing.assert_allclose(want[1], plain.peak_ratio, rtol=1e-4)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
    if np.log2(scale).is_integer():  # an exact power of two: the same float32 arithmetic, scaled
        np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_device_without_float64_scales_fields_without_full_size_temporaries(dtype: type) -> None:
    """uint16 plates reach registration as float64: scaling them for a float32 device made an
    absolute-value copy, a float64 scaled copy and then the float32 one (three times the bytes sent)."""
    import tracemalloc

    fields = np.random.default_rng(2).random((4, 256, 256)).astype(dtype) * 1e20
    tracemalloc.start()
    try:
        sent = _registration_kernels._on_host(fields, np.float32)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sent.dtype == np.float32 and sent.flags.c_contiguous
    assert peak < 1.2 * sent.nbytes
    magnitude = np.abs(sent).max(axis=(-2, -1))
    assert ((magnitude >= 0.5) & (magnitude < 1)).all()
    np.testing.assert_array_equal(sent, np.ldexp(fields, -np.frexp(np.abs(fields).max(axis=(-2, -1)))[1][:, None, None])
                                  .astype(np.float32))
