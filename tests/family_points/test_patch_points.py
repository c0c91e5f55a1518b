"""spaCR's read attribution and pair search, patched and not: identical answers (every bit of the
transform, every owner), the seams really serving them, and what they leave to spaCR."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("spacr", reason="spaCR is not installed (pip install --no-deps spacr==1.5.1.5)")

from spacr_accel_core import patch
from spacr_accel_core.patch import first_difference
from spacr_accel_core.patch._install import original_of
from spacr_accel_core.testing import anchor_field

pytestmark = pytest.mark.usefixtures("compiled_backends")  # while numba compiles, a seam may pass calls to spaCR

SEED = "spacr.ops_phenotype.seed_by_scaled_pairs"
ATTRIBUTE = "spacr.ops_sbs.attribute_reads"


def _row(seam: str) -> Any:
    rows = {row.seam: row for row in patch.report().seams}
    return rows.get(seam)


def _served(seam: str) -> int:
    row = _row(seam)
    return sum(calls for _backend, calls, _seconds in row.served) if row else 0


def _passed(seam: str) -> list[str]:
    row = _row(seam)
    return [reason for reason, _calls, _seconds in row.passed] if row else []


def _same(got: object, expected: object) -> None:
    found = first_difference(got, expected)
    assert found is None, found


def test_the_seed_of_an_anchor_field_is_spacrs_to_the_bit(served_only: None) -> None:
    """600 phenotype nuclei against 2,678 sequencing nuclei, the scale known: spaCR's full search."""
    from spacr import ops_phenotype

    field = anchor_field()
    got = ops_phenotype.seed_by_scaled_pairs(field.source, field.target, field.scale)
    assert _served(SEED) == 1
    expected = original_of(ops_phenotype.seed_by_scaled_pairs)(field.source, field.target, field.scale)
    _same(got, expected)
    assert got is not None and abs(np.degrees(np.arctan2(got[1][1, 0], got[1][0, 0])) - field.degrees) < 1.0


@pytest.mark.parametrize("options", [
    {"seed": 3, "trials": 400},
    {"seed": 11, "trials": 300, "radius": 1.5, "tolerance": 0.01},
    {"seed": 5, "trials": 250, "max_rotation": 2.0},
    {"seed": 9, "trials": 200, "max_rotation": 180.0, "tolerance": 0.2},
    {"seed": 2, "trials": 1},
])
def test_small_searches_are_spacrs(served_only: None, options: dict[str, Any]) -> None:
    from spacr import ops_phenotype

    field = anchor_field(sources=120, targets=400, degrees=-3.0, seed=options["seed"])
    own = original_of(ops_phenotype.seed_by_scaled_pairs)
    got = ops_phenotype.seed_by_scaled_pairs(field.source, field.target, field.scale, **options)
    _same(got, own(field.source, field.target, field.scale, **options))
    assert _served(SEED) == 1


def test_no_candidate_and_lattice_ties_are_spacrs(served_only: None) -> None:
    """A lattice (every separation repeated, scores tied: the first best must win) and a search
    where no pair passes (spaCR's None)."""
    from spacr import ops_phenotype

    own = original_of(ops_phenotype.seed_by_scaled_pairs)
    grid = np.stack(np.meshgrid(np.arange(12.0), np.arange(12.0)), axis=-1).reshape(-1, 2) * 10.0
    for source, target, scale in ((grid[:40], grid, 1.0), (grid[:30] * 2.0, grid, 0.5), (grid[:5], grid * 100, 1.0)):
        got = ops_phenotype.seed_by_scaled_pairs(source, target, scale, trials=300)
        _same(got, own(source, target, scale, trials=300))
    assert ops_phenotype.seed_by_scaled_pairs(grid[:5], grid * 100, 1.0, trials=300) is None


def test_the_alignment_of_an_anchor_field_is_spacrs(served_only: None) -> None:
    """align_phenotype_to_sbs reaches the seam through its module's global, looked up per call."""
    from spacr import ops_phenotype

    field = anchor_field(sources=300, targets=1200, seed=4)
    got = ops_phenotype.align_phenotype_to_sbs(field.source, field.target, expected_scale=field.scale)
    assert _served(SEED) == 1
    patch.uninstall()
    expected = ops_phenotype.align_phenotype_to_sbs(field.source, field.target, expected_scale=field.scale)
    assert got is not None
    _same(got, expected)


@pytest.mark.parametrize(("args", "options", "reason"), [
    ((np.full((5, 2), np.nan), np.zeros((9, 2)), 0.5), {}, "NaN"),
    ((np.zeros((5, 3)), np.zeros((9, 2)), 0.5), {}, "not (N, 2)"),
    ((np.zeros((1, 2)), np.zeros((9, 2)), 0.5), {}, "fewer than two"),
    ((np.ones((5, 2)), np.zeros((9, 2)), np.float32(0.5)), {}, "scale="),
    ((np.ones((5, 2)), np.zeros((9, 2)), 0.5), {"radius": np.float32(3.0)}, "radius="),
    ((np.ones((5, 2)), np.zeros((9, 2)), 0.5), {"trials": 2.5}, "trials="),
    ((np.ones((5, 2)), np.zeros((9, 2)), -0.5), {}, "not positive"),
    ((np.ones((5, 2)), np.zeros((9, 2)), 0.5), {"tolerance": -0.1}, "negative radius or tolerance"),
])
def test_what_the_seed_seam_leaves_to_spacr(served_only: None, args: tuple[Any, ...], options: dict[str, Any],
                                           reason: str) -> None:
    from spacr import ops_phenotype

    own = original_of(ops_phenotype.seed_by_scaled_pairs)
    try:
        expected: Any = own(*args, **options)
    except Exception as error:  # spaCR's own error for spaCR's own bad input (not counted: it raised)
        with pytest.raises(type(error)):
            ops_phenotype.seed_by_scaled_pairs(*args, **options)
        assert _served(SEED) == 0
        return
    _same(ops_phenotype.seed_by_scaled_pairs(*args, **options), expected)
    assert _served(SEED) == 0 and any(reason in why for why in _passed(SEED)), _passed(SEED)


def test_read_attribution_is_spacrs(served_only: None) -> None:
    from spacr import ops_sbs

    rng = np.random.default_rng(8)
    peaks, centroids, areas = rng.uniform(0, 1480, (10_000, 2)), rng.uniform(0, 1480, (3_000, 2)), \
        rng.uniform(150, 450, 3_000)
    own = original_of(ops_sbs.attribute_reads)
    for footprint, tie in ((10.0, 1.0), (3.0, 0.0), (25.0, 4.0)):
        got = ops_sbs.attribute_reads(peaks, centroids, areas, footprint=footprint, tie=tie)
        _same(got, own(peaks, centroids, areas, footprint=footprint, tie=tie))
    _same(ops_sbs.attribute_reads(peaks[:0], centroids, areas), own(peaks[:0], centroids, areas))
    assert _served(ATTRIBUTE) == 4


@pytest.mark.parametrize(("args", "options", "reason"), [
    ((np.zeros(6), np.zeros((2, 2)), [1.0, 2.0]), {}, "not (N, 2)"),
    ((np.full((3, 2), np.inf), np.zeros((2, 2)), [1.0, 2.0]), {}, "NaN or infinity"),
    ((np.zeros((3, 2)), np.zeros((2, 2)), [1.0, 2.0, 3.0]), {}, "one area"),
    ((np.zeros((3, 2)), np.zeros((2, 2)), [1.0, 2.0]), {"footprint": -1.0}, "negative"),
    ((np.zeros((3, 2)), np.zeros((2, 2)), [1.0, 2.0]), {"tie": np.float32(1.0)}, "tie="),
])
def test_what_the_attribution_seam_leaves_to_spacr(served_only: None, args: tuple[Any, ...],
                                                  options: dict[str, Any], reason: str) -> None:
    from spacr import ops_sbs

    own = original_of(ops_sbs.attribute_reads)
    try:
        expected: Any = own(*args, **options)
    except Exception as error:  # spaCR's own error (not counted: it raised)
        with pytest.raises(type(error)):
            ops_sbs.attribute_reads(*args, **options)
        assert _served(ATTRIBUTE) == 0
        return
    _same(ops_sbs.attribute_reads(*args, **options), expected)
    assert _served(ATTRIBUTE) == 0 and any(reason in why for why in _passed(ATTRIBUTE)), _passed(ATTRIBUTE)


def test_the_decode_of_a_field_attributes_through_the_seam(served_only: None) -> None:
    """spaCR's engine imports attribute_reads inside the function: the patched name is the one it gets."""
    from spacr import ops_engine, ops_sbs

    assert getattr(ops_sbs.attribute_reads, "__spacr_accel_original__", None) is not None
    source = ops_engine.__dict__.get("attribute_reads")
    assert source is None or source is ops_sbs.attribute_reads  # never bound at the engine's import


@pytest.mark.parametrize("draw", range(12))
def test_drawn_searches_are_spacrs(served_only: None, draw: int) -> None:
    """Drawn fields (sizes, magnifications, rotations past the bound, noise, outliers) and drawn
    options: the same seed transform, or the same None, to the bit."""
    from spacr import ops_phenotype

    rng = np.random.default_rng(100 + draw)
    field = anchor_field(sources=int(rng.integers(20, 160)), targets=int(rng.integers(60, 500)),
                         scale=float(rng.choice([0.25, 0.5, 1.0, 2.0])), degrees=float(rng.uniform(-20, 20)),
                         noise=float(rng.uniform(0, 2)), outliers=float(rng.uniform(0, 0.5)), seed=draw)
    options = {"seed": int(rng.integers(0, 1000)), "trials": int(rng.integers(50, 400)),
               "radius": float(rng.choice([0.5, 3.0, 6.0])), "tolerance": float(rng.choice([0.0, 0.04, 0.3])),
               "max_rotation": float(rng.choice([5.0, 15.0, 90.0]))}
    got = ops_phenotype.seed_by_scaled_pairs(field.source, field.target, field.scale, **options)
    _same(got, original_of(ops_phenotype.seed_by_scaled_pairs)(field.source, field.target, field.scale, **options))
    assert _served(SEED) == 1


def test_a_context_override_chooses_the_backend_that_scores_the_search(served_only: None) -> None:
    """The search is scored on a worker thread of the seam's own and on the CPU pool: a
    ``config.override`` around spaCR's call reaches both (it once did not, and numba scored it)."""
    from spacr import ops_phenotype

    from spacr_accel_core import config

    field = anchor_field(sources=120, targets=400, degrees=-3.0, seed=3)
    own = original_of(ops_phenotype.seed_by_scaled_pairs)
    with config.override(backends=["numpy"], only=True):
        got = ops_phenotype.seed_by_scaled_pairs(field.source, field.target, field.scale, trials=400)
    _same(got, own(field.source, field.target, field.scale, trials=400))
    row = _row(SEED)
    assert row is not None and [backend for backend, _calls, _seconds in row.served] == ["numpy"]


def test_a_generator_passed_as_the_seed_is_advanced_as_spacr_advances_it(served_only: None) -> None:
    """A generator given as ``seed`` is shared (``default_rng`` returns it): the seam draws with its
    own calls, so the answer and the generator's state after are spaCR's."""
    from spacr import ops_phenotype

    field = anchor_field(sources=120, targets=400, degrees=-3.0, seed=5)
    mine, theirs = np.random.default_rng(21), np.random.default_rng(21)
    got = ops_phenotype.seed_by_scaled_pairs(field.source, field.target, field.scale, trials=300, seed=mine)
    own = original_of(ops_phenotype.seed_by_scaled_pairs)
    _same(got, own(field.source, field.target, field.scale, trials=300, seed=theirs))
    assert mine.bit_generator.state == theirs.bit_generator.state
    assert _served(SEED) == 1


def test_a_field_of_thousands_of_nuclei_is_spacrs(served_only: None) -> None:
    """2,088 phenotype nuclei: each drawn pair's span is spaCR's ``np.hypot`` of that pair."""
    from spacr import ops_phenotype

    field = anchor_field(sources=2088, targets=9000, degrees=2.0, seed=8)
    own = original_of(ops_phenotype.seed_by_scaled_pairs)
    got = ops_phenotype.seed_by_scaled_pairs(field.source, field.target, field.scale, trials=150)
    _same(got, own(field.source, field.target, field.scale, trials=150))
    assert _served(SEED) == 1
