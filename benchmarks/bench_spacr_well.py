"""spaCR's whole well, patched and not: ``run_ops`` from TIFF tiles to ``measurements.db``.

WHAT IS TIMED IS spaCR's ``spacr.ops_engine.run_ops`` with its four phases (stitch, phenotype,
objects, decode) on a synthetic plate (``benchmarks/spacr_plate.py``: overlapping 10X sequencing
tiles with per-cycle and per-channel shifts, a rotated 20X phenotype acquisition, nuclei with
barcoded reads, a guide library). Each side runs in a fresh interpreter, spaCR alone and then with
``SPACR_ACCEL_PATCH=1`` (which also patches the decode's spawned workers), the order alternating
over ``--repeat``; the patched process waits for the compiled backends before the clock starts.
Each phase is timed around spaCR's own phase function, the whole well around ``run_ops``.

THE SEGMENTER IS A STAND-IN. The objects phase asks Cellpose for a model whose weights a benchmark
cannot download, so each child replaces ``spacr.ops_engine._cellpose_model`` (a monkeypatch in that
process, before ``run_ops``) with a threshold on the nuclear composite that labels the planted
nuclei. ``--cellpose`` keeps spaCR's own model, where Cellpose and its weights are installed.

IDENTICAL OR NOT COUNTED. Each side writes its own ``measurements.db``; the parent compares them
table by table, column by column, value by value (floats by their bits). A difference is an error:
the script exits non-zero naming the table, the column and the first differing row.

WHERE THE TIME GOES. A further pair of runs (``--no-profile`` skips it) runs each side under
cProfile in its main process and prints spaCR's ten functions with the most cumulative time; the
decode's workers, separate processes when ``--workers`` is above 1, are not in it.

Run: ``python benchmarks/bench_spacr_well.py [--sites 9] [--size 512] [--cycles 4] [--workers 1]
[--repeat 1] [--seed 0] [--keep] [--cellpose] [--no-profile]``; the measured plate's size is
``--sites 9 --size 1480 --cycles 11 --workers 2``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import shutil
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _timing import clocked, rounds  # the benchmarks' one timer, beside this file

PHASES = ("stitch", "phenotype", "objects", "decode")
"""spaCR's phases, in the order ``run_ops`` runs them."""

_PHASE_FUNCTIONS = {"stitch": "_stitch", "phenotype": "_phenotype", "objects": "_objects", "decode": "_decode"}
"""The ``spacr.ops_engine`` function each phase runs in, which the child times."""


def _env(patched: bool) -> dict[str, str]:
    """The caller's environment, with the patch's variable set for the patched side only."""
    env = {k: v for k, v in os.environ.items() if k != "SPACR_ACCEL_PATCH"}
    if patched:
        env["SPACR_ACCEL_PATCH"] = "1"
    here = str(Path(__file__).resolve().parent)
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


# ---- the child: one side, one fresh interpreter --------------------------------------------------


def child(plan: dict[str, Any], out: Path) -> None:
    """Run ``run_ops`` once on the plate ``plan`` names and write the times (and the profile).

    :param plan: the plate's settings, library and wells, the mode and whether to profile.
    :param out: where the pickle goes.
    """
    import cProfile
    import pstats

    import spacr_accel_core

    warm = 0.0
    if plan["mode"] == "patched":
        from spacr_accel_core import patch

        if not patch.installed() and not patch.install():
            raise SystemExit("the patch found no spaCR it knows; nothing to compare")
        start = time.perf_counter()
        spacr_accel_core.warm_up(timeout=900)
        warm = time.perf_counter() - start
    from spacr import ops_engine

    if not plan["cellpose"]:
        import spacr_plate

        spacr_plate.install_threshold_model(ops_engine)
    seconds: dict[str, float] = {}
    for phase, name in _PHASE_FUNCTIONS.items():

        def spent(took: float, _phase: str = phase) -> None:
            seconds[_phase] = seconds.get(_phase, 0.0) + took

        setattr(ops_engine, name, clocked(getattr(ops_engine, name), spent))
    profiler = cProfile.Profile() if plan["profile"] else None
    start = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    result = ops_engine.run_ops(plan["settings"], wells=plan["wells"], library=plan["library"])
    if profiler is not None:
        profiler.disable()
    total = time.perf_counter() - start
    top: list[tuple[str, int, float, float]] = []
    if profiler is not None:
        stats = pstats.Stats(profiler)
        table = stats.stats  # type: ignore[attr-defined]  # pstats keeps its table in this attribute
        rows = [
            (f"{Path(where).stem}.{function}", calls, own, cumulative)
            for (where, _line, function), (_prim, calls, own, cumulative, _callers) in table.items()
            if f"{os.sep}spacr{os.sep}" in where
        ]
        top = sorted(rows, key=lambda row: -row[3])[:10]
    report = spacr_accel_core.patch.report().format() if plan["mode"] == "patched" else ""
    counts = {
        well: {
            phase: {
                key: value
                for key, value in (per.get(phase) or {}).items()
                if key
                in (
                    "placed",
                    "edges_accepted",
                    "anchors_used",
                    "fields_mapped",
                    "objects",
                    "spots",
                    "reads_owned",
                    "objects_assigned",
                    "ops_reads_rows",
                )
            }
            for phase in PHASES
        }
        for well, per in result["wells"].items()
    }
    with out.open("wb") as sink:
        pickle.dump(
            {
                "seconds": seconds,
                "total": total,
                "warm": warm,
                "top": top,
                "report": report,
                "counts": counts,
                "db": result["db"],
            },
            sink,
        )


# ---- the parent ----------------------------------------------------------------------------------


def _bits(value: Any) -> Any:
    """A value as compared: floats by their 64 bits (so NaN meets NaN, and -0.0 is not 0.0)."""
    return struct.pack("<d", value) if isinstance(value, float) else value


def compare_databases(mine: Path, theirs: Path) -> str | None:
    """The first difference between two ``measurements.db`` files, or None when identical.

    Every table either holds, its columns in order, its rows in stored order, each value by type
    and (floats) bits.

    :param mine: the patched side's database.
    :param theirs: spaCR's.
    :returns: a sentence naming the table, column and row, or None.
    """
    with sqlite3.connect(mine) as left, sqlite3.connect(theirs) as right:
        query = "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"
        tables = [[row[0] for row in db.execute(query)] for db in (left, right)]
        if tables[0] != tables[1]:
            return f"the tables differ: patched {tables[0]}, spaCR {tables[1]}"
        for table in tables[0]:
            cursors = [db.execute(f'SELECT * FROM "{table}"') for db in (left, right)]
            columns = [[item[0] for item in cursor.description] for cursor in cursors]
            if columns[0] != columns[1]:
                return f"table {table}: the columns differ: patched {columns[0]}, spaCR {columns[1]}"
            rows = [cursor.fetchall() for cursor in cursors]
            if len(rows[0]) != len(rows[1]):
                return f"table {table}: patched {len(rows[0])} rows, spaCR {len(rows[1])}"
            for number, (a, b) in enumerate(zip(*rows, strict=True)):
                for column, x, y in zip(columns[0], a, b, strict=True):
                    if type(x) is not type(y) or _bits(x) != _bits(y):
                        return f"table {table}, column {column}, row {number}: patched {x!r}, spaCR {y!r}"
    return None


def _tables(db: Path) -> dict[str, int]:
    """Each table's row count."""
    with sqlite3.connect(db) as conn:
        names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        return {name: int(conn.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0]) for name in names}


def run_side(
    spec: Any, mode: str, folder: Path, *, workers: int, cellpose: bool, profile: bool, tag: str
) -> dict[str, Any]:
    """One side's ``run_ops`` in a fresh interpreter, its database under ``folder/<tag>-<mode>``.

    :param spec: the plate (``spacr_plate.PlateSpec``).
    :param mode: ``spacr`` or ``patched``.
    :param folder: the run's scratch folder.
    :param workers: ``n_workers``.
    :param cellpose: keep spaCR's own Cellpose model.
    :param profile: run under cProfile.
    :param tag: names this run's output folder.
    :returns: the child's pickle, with ``db`` its database's path.
    """
    destination = folder / f"{tag}-{mode}"
    if destination.exists():
        shutil.rmtree(destination)
    plan = {
        "mode": mode,
        "cellpose": cellpose,
        "profile": profile,
        "wells": list(spec.wells),
        "library": list(spec.library),
        "settings": spec.settings(destination, workers=workers),
    }
    plan_path, out = folder / f"{tag}-{mode}.json", folder / f"{tag}-{mode}.pickle"
    plan_path.write_text(json.dumps(plan))
    log = folder / f"{tag}-{mode}.log"
    with log.open("w") as sink:
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(plan_path), str(out)],
            check=False,
            env=_env(mode == "patched"),
            stdout=sink,
            stderr=subprocess.STDOUT,
            timeout=7200,
        )
    if done.returncode:
        tail = log.read_text().splitlines()[-30:]
        raise SystemExit(f"the {mode} run failed (exit {done.returncode}); its log ends:\n" + "\n".join(tail))
    with out.open("rb") as source:
        answer: dict[str, Any] = pickle.load(source)  # our own child's file, just written
    answer["db"] = Path(answer["db"])
    return answer


def _table(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[str]:
    """Each phase's median seconds on both sides and the median of the pairs' ratios."""
    lines = [f"    {'phase':<12} {'spaCR s':>9} {'patched s':>10} {'ratio':>6}   (pairs)"]
    for key in (*PHASES, "whole run_ops"):

        def get(side: dict[str, Any], key: str = key) -> float:
            return float(side["total"] if key == "whole run_ops" else side["seconds"].get(key, math.nan))

        own = [get(plain) for plain, _ in pairs]
        mine = [get(patched) for _, patched in pairs]
        ratios = [b / a if a else math.nan for a, b in zip(own, mine, strict=True)]
        lines.append(
            f"    {key:<12} {statistics.median(own):>9.2f} {statistics.median(mine):>10.2f} "
            f"{statistics.median(ratios):>6.2f}   ({', '.join(f'{r:.2f}' for r in ratios)})"
        )
    return lines


def _top(side: dict[str, Any], title: str) -> list[str]:
    lines = [
        f"  {title}: spaCR's functions by cumulative time in the main process (cProfile)",
        f"    {'function':<48} {'calls':>8} {'own s':>8} {'cumulative s':>13}",
    ]
    lines += [
        f"    {name:<48} {calls:>8} {own:>8.2f} {cumulative:>13.2f}" for name, calls, own, cumulative in side["top"]
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sites", type=int, default=9, help="sequencing tiles: a round well's count (5, 9, 13, ...)")
    parser.add_argument("--size", type=int, default=512, help="a sequencing tile's side in px (the plate's: 1480)")
    parser.add_argument("--cycles", type=int, default=4, help="sequencing cycles (the plate's: 11)")
    parser.add_argument("--workers", type=int, default=1, help="n_workers: fields decoded at once")
    parser.add_argument("--repeat", type=int, default=1, help="pairs of fresh processes (medians)")
    parser.add_argument("--seed", type=int, default=0, help="the plate's seed")
    parser.add_argument("--keep", action="store_true", help="keep the plate and the databases")
    parser.add_argument("--cellpose", action="store_true", help="segment with spaCR's own Cellpose model")
    parser.add_argument("--no-profile", action="store_true", help="skip the profiled pair")
    parser.add_argument("--child", nargs=2, metavar=("PLAN", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(Path(args.child[0]).read_text()), Path(args.child[1]))
        return 0
    for name in ("workers", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    try:
        import spacr  # noqa: F401  # only whether it is there
        import spacr_plate
        import tifffile  # noqa: F401  # the plate's and spaCR's reader
    except ImportError as missing:
        print(f"{missing.name} is not installed: pip install -r benchmarks/requirements-peers.txt", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="bench-spacr-well-"))
    try:
        start = time.perf_counter()
        spec = spacr_plate.write_plate(
            folder / "plate", sites=args.sites, size=args.size, cycles=args.cycles, seed=args.seed
        )
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; a plate of {spec.sites} x {spec.size}^2 "
            f"sequencing tiles ({spec.overlap} px overlap, {spec.cycles} cycles), {spec.phenotype_fields} "
            f"phenotype fields of {spec.phenotype_size}^2, {spec.nuclei:,} nuclei and {spec.reads:,} reads under "
            f"the tiles, a library of {len(spec.library)}, written in {time.perf_counter() - start:.1f} s "
            f"({folder})"
        )
        print(
            "segmentation: "
            + (
                "spaCR's own Cellpose model"
                if args.cellpose
                else "a threshold stand-in for Cellpose (spacr.ops_engine._cellpose_model replaced in "
                "each child), the same on both sides"
            )
        )
        subprocess.run(
            [sys.executable, "-c", "import spacr_accel_core as s; s.warm_up(timeout=900)"],
            env=_env(False),
            check=True,
            timeout=1800,
        )
        total = args.repeat + (0 if args.no_profile else 1)  # the last pair profiled
        attempts = {mode: iter(range(total)) for mode in ("spacr", "patched")}

        def side(mode: str) -> dict[str, Any]:
            attempt = next(attempts[mode])
            return run_side(spec, mode, folder, workers=args.workers, cellpose=args.cellpose,
                            profile=attempt == args.repeat, tag=f"run{attempt}")

        def identical(attempt: int, sides: dict[str, dict[str, Any]]) -> None:
            difference = compare_databases(sides["patched"]["db"], sides["spacr"]["db"])
            if difference is not None:
                raise SystemExit(f"run {attempt + 1}: the patched database differs from spaCR's: {difference}")

        # alternate which side runs first, so a machine warming up or slowing down favours neither
        done = rounds({mode: (lambda mode=mode: side(mode)) for mode in ("spacr", "patched")}, total,
                      alternate=True, after=identical)
        both = list(zip(done["spacr"], done["patched"], strict=True))
        pairs = both[:args.repeat]
        profiled = None if args.no_profile else both[-1]
        plain, patched = pairs[0]
        rows = _tables(plain["db"])
        print(
            f"identical databases in all {total} pairs: "
            + ", ".join(f"{name} {count:,} rows" for name, count in rows.items())
        )
        print(f"what spaCR found: {json.dumps(plain['counts'])}")
        print(
            f"\nrun_ops, n_workers {args.workers}, the median of {len(pairs)} pair(s); the patched process waited "
            f"{statistics.median(p['warm'] for _, p in pairs):.1f} s for the compiled backends before the clock"
        )
        print("\n".join(_table(pairs)))
        if profiled is not None:
            print()
            print("\n".join(_top(profiled[0], "spaCR")))
            print("\n".join(_top(profiled[1], "patched")))
        print("\n".join("    " + line for line in patched["report"].splitlines()))
    finally:
        if args.keep:
            print(f"kept: {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
