"""spaCR's own science, patched and not: identical answers, and the seams really served them."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from spacr_accel_core import patch
from spacr_accel_core.patch import first_difference
from spacr_accel_core.testing._spacr_field import sbs_field


def _same(got: object, expected: object) -> None:
    found = first_difference(got, expected)
    assert found is None, found


def _served(seam: str) -> int:
    rows = {row.seam: row for row in patch.report().seams}
    return sum(calls for _backend, calls, _seconds in rows[seam].served) if seam in rows else 0


def _decode(field: object) -> dict[str, object]:
    from spacr import ops_engine

    result = dict(ops_engine._decode_field(field.task))  # type: ignore[attr-defined]  # a spaCR field record, typed as object here
    result.pop("seconds")
    return result


def test_the_decode_of_a_field_is_identical_patched(monkeypatch: pytest.MonkeyPatch) -> None:
    from spacr import ops_engine

    field = sbs_field(size=256, spots=400, nuclei=60, seed=3)
    monkeypatch.setattr(ops_engine, "_read_plane", field.read_plane)
    ops_engine._init_decode_worker(frozenset())
    plain = _decode(field)
    assert plain["spots"] > 50 and plain["attributed"] > 0 and len(plain["kept"]) == 11, plain
    patch.reset()
    assert patch.install(check=True)
    try:
        patched = _decode(field)
        served = {row.seam: row for row in patch.report().seams}
    finally:
        patch.uninstall()
    _same(patched, plain)
    for seam in ("spacr.ops_cycles.phase_correlate", "spacr.ops_sbs.extract_bases",
                 "spacr.ops_accel.maximum_filter", "spacr.ops_engine: scipy.ndimage.gaussian_laplace",
                 "spacr.ops_engine: scipy.ndimage.minimum_filter", "spacr.ops_cycles.align_field"):
        assert served[seam].served and not served[seam].passed, served[seam]
    # the field's 43 registrations, once: the check mode runs spaCR's own align_field beside the
    # seam, and spaCR's own registers in spaCR's own functions, never through a seam
    assert served["spacr.ops_cycles.phase_correlate"].calls == 43


def test_alignment_registration_peaks_bases_and_calls_are_identical(patched: None) -> None:
    from spacr import ops_cycles, ops_register, ops_sbs

    field = sbs_field(size=192, cycles=4, spots=200, seed=5)
    planes = {cycle: [field.planes[(cycle, channel)] for channel in range(4)] for cycle in range(4)}
    aligned = ops_cycles.align_field(planes, reference=0, gpu=False)
    assert aligned.kept == (0, 1, 2, 3)
    tile = field.planes[(0, 0)]
    edge = ops_register.register_edge(tile[:, :120], tile[:, 72:], "horizontal", expected_overlap=48, tolerance=4)
    assert edge.accepted and edge.backend == "numpy"  # spaCR's own record: the surface is NumPy's arithmetic
    score = ops_sbs.estimate_read_locations(aligned.stack)
    peaks = ops_sbs.find_peaks(score, min_distance=2, gpu=False)
    bases = ops_sbs.extract_bases(aligned.stack, peaks, window=1)
    calls = ops_sbs.call_reads(bases)
    assert peaks.shape[0] > 20 and bases.shape == (peaks.shape[0], 4, 4) and len(calls[0]) == peaks.shape[0]
    for seam in ("spacr.ops_cycles.phase_correlate", "spacr.ops_register.phase_correlate",
                 "spacr.ops_sbs.extract_bases", "spacr.ops_accel.maximum_filter"):
        assert _served(seam) > 0, seam  # and the check mode compared each one with spaCR's own


def test_a_registration_made_patched_pickles_and_equals_spacrs(patched: None) -> None:
    from spacr import ops_register

    rng = np.random.default_rng(1)
    first = rng.random((96, 130)).astype(np.float32)
    second = np.roll(first, (4, -9), axis=(0, 1))
    found = ops_register.phase_correlate(first, second, gpu=False)
    original = ops_register.phase_correlate.__wrapped__  # type: ignore[attr-defined]  # the patch's wrapper keeps spaCR's own function as __wrapped__ (functools.wraps)
    expected = original(first, second, gpu=False)
    assert type(found) is ops_register.Registration and found == expected  # spaCR's record, "numpy" included
    again = pickle.loads(pickle.dumps(found))
    for name in ("dy", "dx", "peak_ratio", "accepted"):
        assert repr(getattr(again, name)) == repr(getattr(expected, name)), name
    assert (again.dy, again.dx) == (-4, 9)


def test_cell_matching_and_the_phenotype_alignment_are_identical(patched: None) -> None:
    from spacr import ops_merge, ops_phenotype

    rng = np.random.default_rng(7)
    sbs = rng.uniform(0, 1480, (400, 2))
    angle = np.deg2rad(0.6)
    rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    phenotype = ((sbs[:120] - 700) @ rotation.T) / 2.0 + 400 + rng.normal(0, 0.3, (120, 2))
    pairs = ops_merge.match_cells(sbs, sbs[::-1] + 0.5, threshold=3.0, gpu=False)
    assert pairs.shape[0] == 400
    found = ops_phenotype.align_phenotype_to_sbs(phenotype, sbs, expected_scale=2.0)
    assert found is not None
    assert _served("spacr.ops_accel.nearest_neighbours") >= 2


@pytest.mark.parametrize("threads", [2, 3, 8])
@pytest.mark.parametrize("shape", [(300, 300), (257, 260), (256, 250), (64, 96)])
def test_the_surface_is_spacrs_own_bits_with_the_reference_spectrum_kept(
        shape: tuple[int, int], threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """spaCR's surface bit for bit: on a first pair, on the pairs that repeat its reference (the
    spectrum kept), on a new reference of the same shape, on the reference changed in place, and
    with a NaN; in as many bands as the CPU pool cuts. NumPy reuses ``np.conj(b)`` as the product's
    output from 256 KiB on, swapping the operands of a complex product that is not bit-commutative:
    eight bands of a 300 x 300 pair fall below that size, and a banded product rounded differently
    from spaCR's whole-array one."""
    from spacr import ops_register

    from spacr_accel_core.kit import _surface
    from spacr_accel_core.kit._surface import LAST_REFERENCE, spacr_surface

    monkeypatch.setattr(_surface, "cpu_threads", lambda most=8: threads)
    monkeypatch.setattr(_surface, "_SPLIT_PIXELS", 64 * 64)  # these small pairs in bands too
    rng = np.random.default_rng(threads + sum(shape))
    reference = rng.random(shape)
    LAST_REFERENCE.clear()
    for moving in (rng.random(shape), rng.random(shape), np.roll(reference, (3, -2), axis=(0, 1))):
        _same(spacr_surface(reference, moving), ops_register._surface_numpy(reference, moving))
    other = rng.random(shape)
    moving = rng.random(shape)
    _same(spacr_surface(other, moving), ops_register._surface_numpy(other, moving))
    other[shape[0] // 2, shape[1] // 3] += 1e-9
    _same(spacr_surface(other, moving), ops_register._surface_numpy(other, moving))
    other[0, 0] = -0.0
    _same(spacr_surface(other, moving), ops_register._surface_numpy(other, moving))
    other[1, 2] = np.nan
    _same(spacr_surface(other, moving), ops_register._surface_numpy(other, moving))
