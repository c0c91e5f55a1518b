"""spaCR's decode of a well: its own pool of ``n_workers`` spawned processes against a Dask cluster
(``SPACR_ACCEL_PATCH=1,dask=local:N``), both patched, the databases compared value by value.

WHAT IS TIMED. The synthetic plate of ``benchmarks/spacr_plate.py`` is stitched, placed and
segmented once (patched, timed per phase: the serial part of a well). Each decode then runs in a
fresh interpreter on a copy of that database, the order alternating over ``--repeat``:

* ``one``: ``n_workers=1``, every field in the process running spaCR, each ``_decode_field`` call
  timed (the per-field time of one worker);
* ``pool``: ``n_workers=N``, spaCR's own pool of spawned processes;
* ``cluster``: ``n_workers=N`` with ``dask=local:N``, a ``LocalCluster`` of N single-threaded process
  workers started by the decode itself; the start is timed apart and is inside the decode's time.

Each side's ``spacr.ops_engine._decode`` is clocked around spaCR's own function. The ``pool`` and
``cluster`` databases must equal the ``one`` database (table, column, row, floats by their bits),
or the script exits non-zero naming the first difference.

THE PLATE MODEL. From the measured per-field decode time and the measured serial phases, the script
prints the modelled wall time of a plate of ``--model-wells`` wells of ``--model-fields`` fields on
one machine (the pool) and on 8 and 64 cluster workers: the serial phases scale with the fields of a
well, the decode is the per-field time times the fields over the workers, plus the cluster's start
once. It is a model from measured per-field times, not a measurement of such a plate.

WHY ONE PRIVATE NAME. The benchmarks import only public names, but for one: the cluster's start is
timed around ``spacr_accel_core.patch._cluster._connection.client``, the one call that starts
``local:N`` and connects to it inside the decode. The patch has no public hook into that moment
(its public face installs, reports and counts the fields each worker decoded), and wrapping
``distributed.LocalCluster`` instead would time the cluster without the client's connection.

Run: ``python benchmarks/bench_spacr_cluster.py [--sites 9] [--size 1024] [--cycles 6] [--workers 2]
[--repeat 1] [--seed 0] [--keep]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _timing import clocked, rounds  # the benchmarks' one timer, beside this file

HERE = Path(__file__).resolve().parent


def _env(word: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "SPACR_ACCEL_PATCH"}
    env["SPACR_ACCEL_PATCH"] = word
    env["PYTHONPATH"] = str(HERE) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def child(plan: dict[str, Any], out: Path) -> None:
    """One side: ``run_ops`` for the plan's phases, each phase and each in-process field timed.

    :param plan: the settings, wells, library and phases.
    :param out: where the JSON answer goes.
    """
    import spacr_plate
    from spacr import ops_engine

    import spacr_accel_core
    from spacr_accel_core import patch
    from spacr_accel_core.patch import _cluster

    spacr_accel_core.warm_up(timeout=900)
    spacr_plate.install_threshold_model(ops_engine)
    seconds: dict[str, float] = {}
    fields: list[float] = []

    def clock(name: str, into: Any) -> None:
        setattr(ops_engine, name, clocked(getattr(ops_engine, name), into))

    for phase, name in (("stitch", "_stitch"), ("phenotype", "_phenotype"), ("objects", "_objects"),
                        ("decode", "_decode")):
        clock(name, lambda spent, phase=phase: seconds.__setitem__(phase, seconds.get(phase, 0.0) + spent))
    if plan["workers"] == 1:  # spaCR decodes in this process: each field is timed (a pool pickles it by name)
        clock("_decode_field", fields.append)
    def started(spent: float) -> None:
        seconds["cluster_start"] = seconds.get("cluster_start", 0.0) + spent

    # the start of local:N, timed
    _cluster._connection.client = clocked(  # type: ignore[method-assign]  # the instance's method, timed in place
        _cluster._connection.client, started)
    result = ops_engine.run_ops(plan["settings"], wells=plan["wells"], phases=plan["phases"], library=plan["library"])
    out.write_text(json.dumps({"db": result["db"], "seconds": seconds, "fields": fields,
                               "workers": patch.fields_on_workers()}))
    patch.uninstall()


def _side(spec: Any, root: Path, tag: str, word: str, workers: int, phases: list[str],
          base: Path | None) -> dict[str, Any]:
    destination = root / tag
    if destination.exists():
        shutil.rmtree(destination)
    destination.mkdir(parents=True)
    if base is not None:
        shutil.copy(base, destination / "measurements.db")
    plan = {"settings": spec.settings(destination, workers=workers), "wells": list(spec.wells),
            "library": list(spec.library), "phases": phases, "workers": workers}
    plan_path, out = root / f"{tag}.json", root / f"{tag}.out.json"
    plan_path.write_text(json.dumps(plan))
    log = root / f"{tag}.log"
    with log.open("w") as sink:
        done = subprocess.run([sys.executable, __file__, "--child", str(plan_path), str(out)], env=_env(word),
                              stdout=sink, stderr=subprocess.STDOUT, check=False, timeout=3600)
    if done.returncode:
        tail = "\n".join(log.read_text().splitlines()[-30:])
        raise SystemExit(f"the {tag} side failed (exit {done.returncode}); its log ends:\n{tail}")
    answer: dict[str, Any] = json.loads(out.read_text())
    return answer


def main(argv: list[str] | None = None) -> int:
    """Write the plate, run the sides, compare, print the times, the ratio and the model."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=9)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--cycles", type=int, default=6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model-wells", type=int, default=6)
    parser.add_argument("--model-fields", type=int, default=333)
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder and say where it is")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(Path(args.child[0]).read_text()), Path(args.child[1]))
        return 0
    if args.workers < 2:
        parser.error("--workers must be at least 2 (spaCR decodes in its own process below that)")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    sys.path.insert(0, str(HERE))
    import bench_spacr_well
    import spacr_plate

    root = Path(tempfile.mkdtemp(prefix="bench_spacr_cluster_"))
    try:
        spec = spacr_plate.write_plate(root / "plate", sites=args.sites, size=args.size, cycles=args.cycles,
                                       seed=args.seed)
        base = _side(spec, root, "objects", "1", 1, ["stitch", "phenotype", "objects"], None)
        one = _side(spec, root, "one", "1", 1, ["decode"], Path(base["db"]))
        words = {"pool": "1", "cluster": f"1,dask=local:{args.workers}"}
        turns = {side: iter(range(args.repeat)) for side in words}

        def decode(side: str) -> dict[str, Any]:
            answer = _side(spec, root, f"{side}{next(turns[side])}", words[side], args.workers, ["decode"],
                           Path(base["db"]))
            difference = bench_spacr_well.compare_databases(Path(answer["db"]), Path(one["db"]))
            if difference is not None:
                raise SystemExit(f"{side}: the database differs from the one-process decode: {difference}")
            return answer

        # alternate which side runs first, so a machine warming up or slowing down favours neither
        runs = rounds({side: (lambda side=side: decode(side)) for side in words}, args.repeat, alternate=True)
        pool = min(run["seconds"]["decode"] for run in runs["pool"])
        cluster = min(run["seconds"]["decode"] for run in runs["cluster"])
        start = min(run["seconds"].get("cluster_start", 0.0) for run in runs["cluster"])
        per_field = statistics.median(one["fields"])
        serial = {phase: base["seconds"][phase] for phase in ("stitch", "phenotype", "objects")}
        print(f"plate: {spec.sites} sites x {spec.size}^2 px, {spec.cycles} cycles; {args.workers} workers; "
              f"best of {args.repeat}; every database identical to the one-process decode")
        print(f"decode, spaCR's pool (n_workers={args.workers}):   {pool:7.2f} s")
        print(f"decode, dask=local:{args.workers}:                 {cluster:7.2f} s "
              f"(of which the cluster's start {start:.2f} s)")
        print(f"ratio cluster / pool: {cluster / pool:.3f}; without the start: {(cluster - start) / pool:.3f}")
        print(f"fields per worker on the cluster: {runs['cluster'][-1]['workers']}")
        print(f"per field, one worker (median of {len(one['fields'])}): {per_field:.2f} s; "
              f"one-process decode {one['seconds']['decode']:.2f} s")
        print("serial phases of the well: " + ", ".join(f"{k} {v:.2f} s" for k, v in serial.items()))
        # the model: the serial phases per field, the decode per field over the workers
        serial_per_field = sum(serial.values()) / spec.sites
        fields = args.model_fields
        write = max(0.0, one["seconds"]["decode"] - sum(one["fields"])) / spec.sites
        print(f"model (from measured per-field times) of {args.model_wells} wells x {fields} fields:")
        for label, workers, extra in (("one machine, spaCR's pool", args.workers, 0.0), ("8 cluster workers", 8, start),
                                      ("64 cluster workers", 64, start)):
            well = serial_per_field * fields + write * fields + per_field * fields / workers
            total = args.model_wells * well + extra
            print(f"  {label:28s} {total / 3600:6.2f} h ({args.model_wells} x {well / 60:.1f} min"
                  f"; serial {serial_per_field * fields / 60:.1f} min a well)")
        if args.keep:
            print(f"kept: {root}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
