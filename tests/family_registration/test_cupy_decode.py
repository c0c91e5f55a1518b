"""CuPy's phase correlation, every line run on the NumPy kit and compared with the plain
references: batches of pairs (batches of one forced by a tiny pass budget, the window maxima's
groups of fields beside them) and an out-of-memory batch halved and retried."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from spacr_accel_core import reference
from spacr_accel_core.testing._decode import _SETTINGS, shifted_pairs
from spacr_accel_cupy import _kit, _peaks_kernels, _registration_kernels

KIT = _kit.numpy_kit()


@_SETTINGS
@given(pair=shifted_pairs())
def test_phase_correlate_on_the_kit_matches_reference(pair: tuple[np.ndarray, np.ndarray]) -> None:
    first, second = pair
    flat_first = first.reshape(-1, *first.shape[-2:])
    flat_second = second.reshape(flat_first.shape)
    peaks, ratios = _registration_kernels.phase_correlate(KIT, flat_first, flat_second, np.arange(flat_first.shape[0]))
    width = first.shape[-1]
    for number in range(flat_first.shape[0]):
        dy, dx, ratio, _ = reference.phase_correlation(flat_first[number], flat_second[number])
        assert divmod(int(peaks[number]), width) == (dy % first.shape[-2], dx % width)
        assert abs(ratios[number] - ratio) <= 1e-9 * ratio


def test_small_budgets_split_the_work_and_keep_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(2)
    first = rng.random((2, 16, 12))  # two reference fields shared by five pairs
    pairing = np.array([0, 1, 1, 0, 1])
    second = np.roll(first[pairing], (3, -2), axis=(1, 2))
    stack = rng.random((6, 20, 20)).astype(np.float32)
    points = rng.integers(0, 20, size=(9, 2))
    whole = (_registration_kernels.phase_correlate(KIT, first, second, pairing),
             _peaks_kernels.window_maxima(KIT, stack, points, 5))
    monkeypatch.setenv("SPACR_ACCEL_CUPY_PASS_BYTES", "1")  # the smallest pass: one pair, one field
    split = (_registration_kernels.phase_correlate(KIT, first, second, pairing),
             _peaks_kernels.window_maxima(KIT, stack, points, 5))
    np.testing.assert_array_equal(whole[0][0], np.full(5, 13 * 12 + 2))  # the shift (3, -2), wrapped
    np.testing.assert_array_equal(whole[0][0], split[0][0])
    np.testing.assert_array_equal(whole[0][1], split[0][1])
    np.testing.assert_array_equal(whole[1], split[1])


def test_an_out_of_memory_batch_is_halved_and_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    first = rng.random((4, 12, 12))
    second = np.roll(first, (1, 2), axis=(1, 2))
    original = _registration_kernels._surfaces
    sizes: list[int] = []

    def tight(kit: _kit.Kit, a: np.ndarray, b: np.ndarray, pairing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sizes.append(b.shape[0])
        if b.shape[0] > 1:
            raise MemoryError("out of memory allocating the spectra")
        return original(kit, a, b, pairing)

    monkeypatch.setattr(_registration_kernels, "_surfaces", tight)
    peaks, _ = _registration_kernels.phase_correlate(KIT, first, second, np.arange(4))
    assert sizes[0] == 4 and sizes[-1] == 1
    np.testing.assert_array_equal(peaks, np.full(4, 11 * 12 + 10))  # the shift (-1, -2), wrapped
