"""spaCR's whole well on the synthetic plate: ``run_ops`` unpatched and patched give the same database.

The plate (``benchmarks/spacr_plate.py``) is what ``benchmarks/bench_spacr_well.py`` times; here a
small one runs through every phase of spaCR's ``run_ops`` in two fresh interpreters, spaCR alone and
with ``SPACR_ACCEL_PATCH=1``, and the two ``measurements.db`` must agree value for value and hold
what the plate planted (every tile placed, the phenotype fields mapped, objects and reads found,
the planted barcodes read back). The comparison itself is checked to catch a one-value change.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

pytest.importorskip("spacr.ops_engine")
pytest.importorskip("tifffile")
pytest.importorskip("pandas")
pytest.importorskip("skimage")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_spacr_well  # the benchmarks folder is not a package, so its path was put first above
import spacr_plate  # the benchmarks folder is not a package, so its path was put first above


@pytest.fixture(scope="module")
def well_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[spacr_plate.PlateSpec, dict, dict]:
    """One small plate, run by spaCR alone and patched, each in its own interpreter."""
    folder = tmp_path_factory.mktemp("spacr_well")
    spec = spacr_plate.write_plate(folder / "plate", sites=9, size=512, cycles=4, seed=3)
    sides = {
        mode: bench_spacr_well.run_side(spec, mode, folder, workers=1, cellpose=False, profile=False, tag="test")
        for mode in ("spacr", "patched")
    }
    return spec, sides["spacr"], sides["patched"]


def _rows(db: Path, query: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(query).fetchall()


def test_the_patched_well_is_spacrs_value_for_value(well_runs: tuple) -> None:
    _spec, plain, patched = well_runs
    assert bench_spacr_well.compare_databases(patched["db"], plain["db"]) is None
    assert bench_spacr_well._tables(patched["db"]) == bench_spacr_well._tables(plain["db"])
    assert patched["report"]  # the patched side did run patched: its report lists the seams
    assert not plain["report"]


def test_every_phase_did_real_work(well_runs: tuple) -> None:
    spec, plain, _patched = well_runs
    tables = bench_spacr_well._tables(plain["db"])
    assert tables["ops_geometry"] == spec.sites
    assert tables["ops_phenotype"] == spec.phenotype_fields
    assert tables["ops_objects"] > 0.8 * spec.nuclei
    assert tables["ops_barcodes"] > 0.5 * spec.nuclei
    assert tables["ops_reads"] > 0
    found = plain["counts"][spacr_plate.WELL]
    assert found["stitch"]["placed"] == spec.sites
    assert found["phenotype"]["anchors_used"] >= 3
    assert found["phenotype"]["fields_mapped"] == spec.phenotype_fields
    barcodes = [code for (code,) in _rows(plain["db"], "SELECT barcode FROM ops_barcodes")]
    planted = set(spec.library)
    assert sum(code in planted for code in barcodes) > 0.9 * len(barcodes)


def test_a_changed_value_is_named_by_table_column_and_row(well_runs: tuple, tmp_path: Path) -> None:
    _spec, plain, _patched = well_runs
    changed = tmp_path / "measurements.db"
    shutil.copy(plain["db"], changed)
    with sqlite3.connect(changed) as conn:
        rowid, area = conn.execute("SELECT rowid, area FROM ops_objects LIMIT 1 OFFSET 5").fetchone()
        conn.execute("UPDATE ops_objects SET area = ? WHERE rowid = ?", (area + 1, rowid))
    difference = bench_spacr_well.compare_databases(changed, plain["db"])
    assert difference is not None
    assert "table ops_objects, column area, row 5" in difference


def test_a_float_differing_only_in_its_bits_is_a_difference(well_runs: tuple, tmp_path: Path) -> None:
    _spec, plain, _patched = well_runs
    changed = tmp_path / "measurements.db"
    shutil.copy(plain["db"], changed)
    with sqlite3.connect(changed) as conn:
        (value,) = conn.execute("SELECT centre_y FROM ops_phenotype WHERE site = 0").fetchone()
        conn.execute("UPDATE ops_phenotype SET centre_y = ? WHERE site = 0", (float(value) * (1 + 2**-52),))
    assert "column centre_y" in str(bench_spacr_well.compare_databases(changed, plain["db"]))


def test_the_plate_is_the_same_bytes_from_the_same_seed(tmp_path: Path) -> None:
    first = spacr_plate.write_plate(tmp_path / "a", sites=5, size=128, cycles=3, seed=11)
    second = spacr_plate.write_plate(tmp_path / "b", sites=5, size=128, cycles=3, seed=11)
    other = spacr_plate.write_plate(tmp_path / "c", sites=5, size=128, cycles=3, seed=12)
    names = sorted(path.relative_to(tmp_path / "a") for path in (tmp_path / "a").rglob("*.tif"))
    assert len(names) == 5 * (1 + 2 * 4) + first.phenotype_fields
    assert all((tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes() for name in names)
    assert any((tmp_path / "a" / name).read_bytes() != (tmp_path / "c" / name).read_bytes() for name in names)
    assert first.library == second.library and first.library != other.library


@pytest.mark.parametrize(
    ("arguments", "error", "word"),
    [
        ({"sites": 4}, ValueError, "sites"),
        ({"size": 64}, ValueError, "size"),
        ({"cycles": 2}, ValueError, "cycles"),
        ({"size": 384.0}, TypeError, "size"),
        ({"seed": True}, TypeError, "seed"),
    ],
)
def test_bad_arguments_are_refused_by_name(tmp_path: Path, arguments: dict, error: type, word: str) -> None:
    with pytest.raises(error, match=word):
        spacr_plate.write_plate(tmp_path, **arguments)
    assert not any(tmp_path.iterdir())
