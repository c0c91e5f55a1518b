"""spaCR's read attribution and pair search against the patched seams, side by side in one run.

WHAT IS TIMED. ``spacr.ops_sbs.attribute_reads`` (a KD-tree ball query and a Python loop over the
reads) on a sequencing field's reads and nuclei (10,000 reads; 600 and 3,000 nuclei of spaCR's
areas in a 1480 px tile), and ``spacr.ops_phenotype.seed_by_scaled_pairs`` (one KD-tree query per
candidate transform) on a synthetic anchor field (``spacr_accel_core.testing.anchor_field``: 600
phenotype nuclei against 2,678 sequencing nuclei, the scale given), and
``spacr.ops_merge.align_by_triangles`` (a Python loop over Delaunay triangles and one similarity fit
per descriptor match) on an anchor pair the size of the synthetic plate's (100 phenotype nuclei
against 2,000 sequencing nuclei, whole-pixel centres, the scale 0.19), each as spaCR's own function
and as the patch serves it (``patch.install()``; the registry's best backend, numba warmed first),
interleaved, the best of ``--repeat`` runs each. ``--backend`` forces one backend for the
registry's operations (``numpy``: the floor).

IDENTICAL OR NOT COUNTED. Every patched answer is compared bit for bit with spaCR's; a difference is
an error, not a row. The patch's report then says which backend
served each call.

Needs spaCR (``pip install -r benchmarks/requirements-peers.txt``).
Run: ``python benchmarks/bench_points.py [--repeat 3] [--quick] [--backend numba|numpy]``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
from _answers import first_difference  # the benchmarks' bit-for-bit check, beside this file
from _timing import side_by_side  # the benchmarks' one timer, beside this file

from spacr_accel_core import config, patch, warm_up
from spacr_accel_core.testing import anchor_field


def _cases(quick: bool) -> list[tuple[str, str, Callable[[Callable[..., Any]], Any]]]:
    rng = np.random.default_rng(0)
    cases: list[tuple[str, str, Callable[[Callable[..., Any]], Any]]] = []
    for objects in ((600,) if quick else (600, 3_000)):
        reads = (2_000 if quick else 10_000)
        peaks, centroids = rng.uniform(0, 1480, (reads, 2)), rng.uniform(0, 1480, (objects, 2))
        areas = rng.uniform(150, 450, objects)
        cases.append((f"attribute_reads: {reads:,} reads, {objects:,} nuclei", "spacr.ops_sbs:attribute_reads",
                      lambda f, p=peaks, c=centroids, a=areas: f(p, c, a)))
    field = anchor_field(sources=300, targets=1_200) if quick else anchor_field()
    words = f"seed_by_scaled_pairs: {field.source.shape[0]:,} to {field.target.shape[0]:,} nuclei, scale {field.scale}"
    cases.append((words, "spacr.ops_phenotype:seed_by_scaled_pairs",
                  lambda f: f(field.source, field.target, field.scale)))
    pair = anchor_field(sources=100, targets=2_000, scale=0.19, degrees=3.0, seed=1)
    source, target = np.round(pair.source), np.round(pair.target)
    cases.append(("align_by_triangles: 100 to 2,000 whole-pixel nuclei", "spacr.ops_merge:align_by_triangles",
                  lambda f: f(source, target)))
    return cases


def _function(where: str) -> Callable[..., Any]:
    """The function ``module:name`` names, as its module holds it now."""
    module_name, name = where.split(":")
    found: Callable[..., Any] = getattr(importlib.import_module(module_name), name)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, the best kept (default 3)")
    parser.add_argument("--quick", action="store_true", help="smaller inputs")
    parser.add_argument("--backend", help="the one backend the registry's point operations may use")
    args = parser.parse_args(argv)

    print("warm-up:", warm_up())
    cases = _cases(args.quick)
    owns = {where: _function(where) for _, where, _ in cases}  # spaCR's own, before the patch
    patch.install()
    rows = []
    order = {op: [args.backend] for op in ("attribute_reads", "count_within")} if args.backend else {}
    with config.override(operations=order) if order else contextlib.nullcontext():
        for words, where, call in cases:
            patched, own = _function(where), owns[where]
            timed = side_by_side({"spacr": lambda c=call, o=own: c(o), "patched": lambda c=call, p=patched: c(p)},
                                 args.repeat)
            spacr_seconds, expected = timed["spacr"].best, timed["spacr"].answer
            patched_seconds, got = timed["patched"].best, timed["patched"].answer
            found = first_difference(got, expected)
            if found:
                raise SystemExit(f"{words}: the patched answer differs from spaCR's: {found}")
            rows.append((words, spacr_seconds, patched_seconds))
    print(f"\n{'case':<62} {'spaCR s':>9} {'patched s':>10} {'ratio':>8} {'speed-up':>9}")
    for words, spacr_seconds, patched_seconds in rows:
        print(f"{words:<62} {spacr_seconds:>9.4f} {patched_seconds:>10.4f} {patched_seconds / spacr_seconds:>8.4f} "
              f"{spacr_seconds / patched_seconds:>8.1f}x")
    print("\nidentical answers: every case, bit for bit")
    for seam in patch.report().seams:
        served = [(backend, calls) for backend, calls, _seconds in seam.served]
        passed = [(reason, calls) for reason, calls, _seconds in seam.passed]
        print(f"  {seam.seam}: served {served}, passed {passed}")
    patch.uninstall()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
