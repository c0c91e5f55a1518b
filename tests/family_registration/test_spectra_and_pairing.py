"""Registration's shared pieces: the one-axis transforms against SciPy's 2-D calls, the runs of pairs
grouped by reference (``reference_runs``, ``correlation_runs``), the walk a backend hands one pair's
arithmetic to (``correlate_by_reference``, against the floor's own walk), and the distinct reference
fields the core hands a backend."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import fft

from spacr_accel_core import toolkit
from spacr_accel_core.contract._registration import reference_fields
from spacr_accel_core.kit import _spectra
from spacr_accel_core.toolkit import (
    correlate_by_reference,
    correlation_runs,
    cpu_threads,
    real_spectrum,
    real_surface,
    reference_runs,
)


@settings(max_examples=40, deadline=None)
@given(height=st.integers(1, 23), width=st.integers(1, 23), seed=st.integers(0, 2**32 - 1),
       dtype=st.sampled_from([np.float32, np.float64]), workers=st.sampled_from([1, 2]))
def test_the_one_axis_transforms_are_scipys_2d_ones(height: int, width: int, seed: int, dtype: type,
                                                    workers: int) -> None:
    field: np.ndarray = np.random.default_rng(seed).standard_normal((2, height, width)).astype(dtype)
    spectrum = real_spectrum(field, workers)
    want = fft.rfft2(field.astype(np.float64))
    assert spectrum.dtype == np.complex128 and spectrum.shape == want.shape
    scale = max(float(np.abs(want).max()), 1e-300)
    assert float(np.abs(spectrum - want).max()) <= 1e-13 * scale
    surface = real_surface(spectrum, width, workers)
    assert surface.dtype == np.float64 and surface.shape == field.shape
    np.testing.assert_allclose(surface, fft.irfft2(want, s=(height, width)), rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(surface, field, rtol=0, atol=1e-12 * max(1.0, scale))


@settings(max_examples=60, deadline=None)
@given(pairing=st.lists(st.integers(0, 5), min_size=1, max_size=40), runs=st.integers(1, 8))
def test_reference_runs_cover_every_pair_once_grouped_by_reference(pairing: list[int], runs: int) -> None:
    index = np.array(pairing, dtype=np.int64)
    cut = reference_runs(index, runs)
    assert 1 <= len(cut) <= min(runs, index.size) and all(run.size for run in cut)
    together = np.concatenate(cut)
    assert sorted(together.tolist()) == list(range(index.size))
    assert (np.diff(index[together]) >= 0).all(), "pairs are walked in order of their reference"
    sizes = [run.size for run in cut]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=30, deadline=None)
@given(pairing=st.lists(st.integers(0, 3), min_size=1, max_size=12), seed=st.integers(0, 2**32 - 1))
def test_each_pair_is_computed_from_its_own_reference(pairing: list[int], seed: int) -> None:
    """Whatever the runs and threads, pair ``i`` gets ``first[pairing[i]]``'s spectrum and
    ``second[i]``, and each reference is transformed at most once per run."""
    rng = np.random.default_rng(seed)
    first, index = rng.random((4, 5, 6)), np.array(pairing, dtype=np.int64)
    second = rng.random((index.size, 5, 6))

    def pair(reference: np.ndarray, field: np.ndarray, workers: int) -> tuple[int, float]:
        which = int(np.argmin([np.abs(reference - fft.rfft2(f)).max() for f in first]))
        return which, float(field.sum())

    peaks, ratios = correlate_by_reference(first, second, index, pair)
    np.testing.assert_array_equal(peaks, index)
    np.testing.assert_array_equal(ratios, second.sum(axis=(1, 2)))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_correlate_by_reference_is_the_floors_phase_correlate(threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Handed the floor's arithmetic for one pair, the kit's walk answers what the floor's own walk
    answers, bit for bit, on a stack whose references are shared out of order (the runs cut across
    a reference's pairs, the later runs on the kit's pool)."""
    floor = pytest.importorskip("spacr_accel_numpy._registration_kernels")
    monkeypatch.setattr(_spectra, "cpu_threads", lambda: threads)
    rng = np.random.default_rng(5)
    first = rng.normal(size=(3, 24, 30)).astype(np.float32)
    pairing = np.array([2, 0, 0, 1, 2, 2, 0, 1, 2], dtype=np.int64)
    moved = np.roll(first[pairing], shift=(3, -5), axis=(1, 2))
    second = (moved + rng.normal(scale=0.3, size=moved.shape)).astype(np.float32)
    want_peaks, want_ratios = floor.phase_correlate(first, second, pairing)
    peaks, ratios = correlate_by_reference(first, second, pairing, floor._pair)
    assert peaks.dtype == np.int64 and ratios.dtype == np.float64
    np.testing.assert_array_equal(peaks, want_peaks)
    np.testing.assert_array_equal(ratios.view(np.int64), want_ratios.view(np.int64))
    assert len({int(peak) for peak in peaks}) == 1  # the control: every pair found the same shift


@pytest.mark.parametrize(("threads", "pairs", "side"), [(1, 7, 16), (4, 7, 16), (4, 1, 16), (4, 1, 512),
                                                        (1, 1, 512), (3, 2, 512)])
def test_correlation_runs_share_whole_pairs_or_split_a_lone_big_one(threads: int, pairs: int, side: int,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Several pairs on several threads: runs of whole pairs grouped by reference, one thread per
    transform; a lone pair, or one thread: one run, its transforms on every thread where the field
    pays for the hand-off (:data:`SPLIT_PIXELS`), else on one."""
    monkeypatch.setattr(_spectra, "cpu_threads", lambda: threads)
    pairing = np.array([3, 0, 1, 0, 3, 2, 1][:pairs], dtype=np.int64)
    runs = correlation_runs(pairing, side * side)
    together = np.concatenate([numbers for numbers, _ in runs])
    assert sorted(together.tolist()) == list(range(pairs))
    assert all((np.diff(pairing[numbers]) >= 0).all() for numbers, _ in runs)
    if pairs == 1 or threads == 1:
        assert len(runs) == 1
        assert runs[0][1] == (threads if side * side >= _spectra.SPLIT_PIXELS else 1)
    else:
        assert 1 < len(runs) <= min(threads, pairs) and all(workers == 1 for _, workers in runs)


def _check_fields(first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    fields, pairing = reference_fields(first)
    lead, plane = first.shape[:-2], first.shape[-2:]
    assert fields.flags.c_contiguous and fields.shape[1:] == plane
    assert pairing.dtype == np.int64 and pairing.shape == (int(np.prod(lead, dtype=np.int64)),)
    np.testing.assert_array_equal(fields[pairing], np.reshape(first, (-1, *plane)))
    return fields, pairing


@pytest.mark.parametrize("lead", [(), (1,), (3,), (2, 3)])
def test_distinct_fields_of_a_plain_stack_are_the_stack(lead: tuple[int, ...]) -> None:
    first = np.random.default_rng(1).random((*lead, 5, 4))
    fields, pairing = _check_fields(first)
    np.testing.assert_array_equal(pairing, np.arange(pairing.size))
    assert fields.shape[0] == pairing.size


def test_a_broadcast_reference_is_read_once_per_distinct_field() -> None:
    cycle = np.random.default_rng(2).random((1, 4, 6, 5))
    first = np.broadcast_to(cycle, (11, 4, 6, 5))
    fields, pairing = _check_fields(first)
    assert fields.shape[0] == 4
    np.testing.assert_array_equal(pairing, np.tile(np.arange(4), 11))
    one = np.broadcast_to(cycle[:, :1], (11, 4, 6, 5))  # every axis broadcast: one field
    fields, pairing = _check_fields(one)
    assert fields.shape[0] == 1 and not pairing.any()


def test_fields_equal_in_value_point_at_the_first() -> None:
    rng = np.random.default_rng(3)
    cycle = rng.random((2, 6, 5))
    first = np.stack([cycle[0], cycle[1], cycle[0].copy(), cycle[1] + 1e-12, cycle[1].copy()])
    _, pairing = _check_fields(first)
    np.testing.assert_array_equal(pairing, [0, 1, 0, 3, 1])


def test_fields_sharing_every_sampled_pixel_are_still_compared_whole() -> None:
    first = np.zeros((3, 64, 64))
    first[1, 17, 29] = 1.0  # off the sampled pixels and the last row: the key is the same
    first[2] = first[0]
    _, pairing = _check_fields(first)
    np.testing.assert_array_equal(pairing, [0, 1, 0])


def test_a_field_is_compared_whole_with_a_bounded_number_of_earlier_ones() -> None:
    """Fields agreeing on every sampled pixel (a mask, a zero-padded tile) are compared whole with
    at most four earlier ones of their key: a repeat within those is found, a later one is not
    (it is transformed again), and the answer's pairing is right either way."""
    first = np.zeros((7, 64, 64))
    for i in range(6):
        first[i, 17, 29] = i + 1.0  # off the sampled pixels: one key for all
    first[6] = first[2]
    _, pairing = _check_fields(first)
    np.testing.assert_array_equal(pairing, [0, 1, 2, 3, 4, 5, 2])
    first[6] = first[5]  # the sixth distinct field of the key: past the four compared
    _, pairing = _check_fields(first)
    np.testing.assert_array_equal(pairing, np.arange(7))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_reference_fields_on_drawn_stacks(data: st.DataObject) -> None:
    distinct = data.draw(st.integers(1, 4))
    plane = (data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    values = rng.integers(0, 3, size=(distinct, *plane)).astype(np.float64)  # small values: repeats by chance
    chosen = data.draw(st.lists(st.integers(0, distinct - 1), min_size=1, max_size=12))
    first = values[chosen]
    _, pairing = _check_fields(first)
    for i in range(len(chosen)):
        equal = [j for j in range(len(chosen)) if np.array_equal(first[j], first[i])]
        assert pairing[i] == equal[0], "each pair points at the first field equal to its own"


@pytest.mark.parametrize(("side", "threads"), [(16, "one"), (511, "one"), (512, "all")])
def test_a_lone_pair_is_split_between_threads_only_when_its_field_pays_for_it(
        side: int, threads: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from spacr_accel_core.kit._spectra import SPLIT_PIXELS

    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    asked: list[int] = []

    def pair(reference: np.ndarray, field: np.ndarray, workers: int) -> tuple[int, float]:
        asked.append(workers)
        return 0, 1.0

    fields = np.zeros((1, side, 512))
    correlate_by_reference(fields, fields, np.zeros(1, dtype=np.int64), pair)
    assert (side * 512 >= SPLIT_PIXELS) == (threads == "all")
    assert asked == [cpu_threads() if threads == "all" else 1]


def test_by_reference_gives_each_pair_its_references_spectrum_computed_once_a_group() -> None:
    rng = np.random.default_rng(7)
    first = rng.random((3, 8, 10))
    pairing = np.array([2, 0, 2, 2, 0], dtype=np.int64)
    numbers = np.argsort(pairing, kind="stable")  # grouped by reference, as a run is
    seen = list(toolkit.by_reference(first, pairing, numbers, 1))
    assert [number for number, _ in seen] == numbers.tolist()
    for number, spectrum in seen:
        assert np.array_equal(spectrum, toolkit.real_spectrum(first[pairing[number]], 1))
    # one transform per group of pairs sharing a reference: the same array handed to each of them
    assert len({id(spectrum) for _, spectrum in seen}) == 2
