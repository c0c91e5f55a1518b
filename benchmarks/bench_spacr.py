"""spaCR's own code, patched onto the registry and not: one field's decode and one anchor field's
phenotype alignment, each run in a fresh process, side by side in one run.

WHAT IS TIMED IS spaCR's, NOT OURS. The decode is ``spacr.ops_engine._decode_field`` on a synthetic
11-cycle x 4-channel field (``spacr_accel_core.testing.sbs_field``; its only stand-in is the TIFF
reader, ``_read_plane``), the alignment ``spacr.ops_phenotype.align_phenotype_to_sbs`` on a
synthetic anchor field (600 phenotype nuclei against 2,678 sequencing nuclei,
``spacr_accel_core.testing.anchor_field``, the magnification ratio given as spaCR's merge gives
it). Each case runs in its own interpreter, spaCR alone and then patched (``patch.install()`` in
that interpreter), alternating, so neither inherits the other's caches. The parent fills the kernel
cache first (``warm_up`` in a process of its own); the patched process does not wait for anything
before the clock, so its first field is what a fresh process sees after ``spacr-accel warm`` (each
kernel loaded by the first call that needs it). ``--warm-first`` has the patched process wait for
its compiled backends (``warm_up``) before the clock instead, and prints how long that took.

IDENTICAL OR NOT COUNTED. Each process writes its answer; the parent compares the two bit for bit
(the patch's own comparison: dtypes, shapes, bits, record fields, dictionaries key by key) and a
difference is an error, not a row.

FIELD AFTER FIELD. spaCR decodes a well's fields one after another in one process (or in each of a
pool's workers), and merges a well's six anchor fields the same way: ``--fields N`` (default 3) runs
the case N times in each process and reports the first run (a fresh process: every large array
still to be faulted in from the kernel, which costs both sides the same) and the median of the
later ones (what each further field of a well costs). Every run's answer is compared.

EACH STEP'S SHARE. spaCR's decode reports its own phases (``seconds``: read, align, spots, ...); the
benchmark also times, inclusively, each of spaCR's functions the decode and the merge go through
(a function called inside another counts in both), in both processes, so the table shows where
the time went and what the patch took out of each step. Then the patch's report: per seam, calls
served and by which backend, calls handed to spaCR's own function and why.

THE PATCH'S OWN COST. ``--overhead`` times a seam's call on a tiny input (a 16 x 16 field, the
windowed maximum) against the registry's operation called directly on the same input: the
difference is what the patch adds to a served call (the argument reading, the tally, the
pass-through checks), each side the fastest of 21 interleaved rounds of calls: noise only ever adds
time, and a burst of it during one side's block must not read as the patch's cost.

Needs spaCR (``pip install -r benchmarks/requirements-peers.txt``).
``--cold`` gives each run a fresh, empty kernel cache folder and no warm-up: what the first process
after an install sees, while numba compiles in the background.

THE KERNEL'S SHARE. Each run's system seconds and page faults (``getrusage``) are printed beside
its time: on a virtual machine whose free memory goes back to the host, faulting a field's arrays
in again is a large and uneven part of a decode, on both sides. ``--keep-memory`` runs both processes
with ``patch.keep_freed_memory()`` (glibc keeps what it frees), which takes that part out.

Run: ``python benchmarks/bench_spacr.py [--quick] [--cold] [--keep-memory] [--warm-first] [--repeat 1]
[--fields 3] [--only decode|align] [--overhead]``.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

STEPS: dict[str, tuple[tuple[str, str], ...]] = {
    "decode": (
        ("ops_cycles", "align_field"), ("ops_cycles", "_align_channels"), ("ops_cycles", "register_cycles"),
        ("ops_cycles", "phase_correlate"), ("ops_cycles", "sbs_mean_target"), ("ops_cycles", "_clipped"),
        ("ops_cycles", "_translate"), ("ops_sbs", "estimate_read_locations"), ("ops_sbs", "find_peaks"),
        ("ops_sbs", "extract_bases"), ("ops_sbs", "called_bases"), ("ops_sbs", "call_reads"),
        ("ops_sbs", "attribute_reads"),
    ),
    "align": (
        ("ops_merge", "align_by_triangles"), ("ops_phenotype", "seed_by_scaled_pairs"),
        ("ops_phenotype", "refine_similarity"), ("ops_phenotype", "_chance_inliers"),
    ),
}
"""The spaCR functions each case is timed through, as ``(module, name)`` under ``spacr``."""


_COLD = False
"""``--cold``: no warm-up anywhere, so the patched process computes while its kernels compile."""

_KEEP_MEMORY = False
"""``--keep-memory``: both processes keep the memory they free (``patch.keep_freed_memory``)."""

_WARM_FIRST = False
"""``--warm-first``: the patched process waits for its compiled backends before the clock."""


def _env() -> dict[str, str]:
    """The caller's environment without the patch's variable: each child decides for itself."""
    return {k: v for k, v in os.environ.items() if k != "SPACR_ACCEL_PATCH"}


# ---- the child: one case, one mode, one fresh interpreter ----------------------------------------


def _timed_steps(case: str) -> dict[str, list[float]]:
    """Wrap each of the case's spaCR functions, in every spaCR module that holds it, with a clock.

    The wrapper calls whatever the name held (spaCR's function, or the patch's seam), so it times
    the step as the process runs it.
    """
    import importlib

    seconds: dict[str, list[float]] = {}
    modules = {name: importlib.import_module(f"spacr.{name}") for name in {m for m, _ in STEPS[case]}}
    loaded = [module for name, module in sys.modules.items() if name.startswith("spacr.") and module is not None]
    for module_name, name in STEPS[case]:
        original = getattr(modules[module_name], name, None)
        if original is None:
            continue
        label = f"{module_name}.{name}"
        total = seconds.setdefault(label, [0.0, 0.0])

        def clocked(*args: Any, _inner: Callable[..., Any] = original, _total: list[float] = total,
                    **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return _inner(*args, **kwargs)
            finally:
                _total[0] += time.perf_counter() - start
                _total[1] += 1

        for module in loaded:
            if getattr(module, name, None) is original:
                setattr(module, name, clocked)
    return seconds


def _decode(quick: bool) -> tuple[Callable[[], Any], Callable[[Any], Any]]:
    from spacr import ops_engine

    from spacr_accel_core.testing import sbs_field

    size = 512 if quick else 1480
    field = sbs_field(size=size, spots=2 * size, nuclei=600 if not quick else 150)
    ops_engine._read_plane = field.read_plane
    ops_engine._init_decode_worker(frozenset())

    def kept(answer: Any) -> Any:
        return {key: value for key, value in answer.items() if key != "seconds"}

    return (lambda: ops_engine._decode_field(field.task)), kept


def _align(quick: bool) -> tuple[Callable[[], Any], Callable[[Any], Any]]:
    from spacr import ops_phenotype

    from spacr_accel_core.testing import anchor_field

    field = anchor_field(sources=300, targets=900) if quick else anchor_field()

    def kept(answer: Any) -> Any:
        return None if answer is None else {name: getattr(answer, name) for name in answer.__dataclass_fields__}

    return (lambda: ops_phenotype.align_phenotype_to_sbs(field.source, field.target,
                                                         expected_scale=field.scale)), kept


def _kernel_time() -> tuple[float, float]:
    """This process's system seconds and page faults so far (zeros where ``resource`` is missing):
    how much of a run the kernel spent handing out memory."""
    try:
        import resource
    except ImportError:  # Windows
        return 0.0, 0.0
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_stime, float(used.ru_minflt)


def child(case: str, mode: str, quick: bool, fields: int, out: Path) -> None:
    """Run one case ``fields`` times in this interpreter and write each run's time, the first run's
    and the later runs' steps, every answer and the report."""
    import spacr_accel_core
    from spacr_accel_core import patch

    warm = 0.0
    if _KEEP_MEMORY:  # both sides alike: the setting is the process's, not the patch's
        setting = patch.keep_freed_memory()
        if not setting.applied:
            raise SystemExit(f"--keep-memory: {setting.reason}")
    if mode == "patched":
        if not patch.install():
            raise SystemExit("the patch found no spaCR it knows; nothing to compare")
        start = time.perf_counter()
        if _WARM_FIRST and not _COLD:
            spacr_accel_core.warm_up(timeout=900)
        warm = time.perf_counter() - start
    run, kept = (_decode if case == "decode" else _align)(quick)
    steps = _timed_steps(case)
    runs = []
    for _ in range(fields):
        before = {label: list(spent) for label, spent in steps.items()}
        used = _kernel_time()
        start = time.perf_counter()
        answer = run()
        total = time.perf_counter() - start
        runs.append({"total": total, "answer": kept(answer),
                     "kernel": [after - earlier for after, earlier in zip(_kernel_time(), used, strict=True)],
                     "phases": dict(answer.get("seconds", {})) if isinstance(answer, dict) else {},
                     "steps": {label: [spent[0] - before[label][0], spent[1] - before[label][1]]
                               for label, spent in steps.items()}})
    report = patch.report().format() if mode == "patched" else ""
    with out.open("wb") as sink:
        pickle.dump({"runs": runs, "warm": warm, "report": report}, sink)


# ---- the parent: fresh processes, side by side ----------------------------------------------------


def _run_child(case: str, mode: str, quick: bool, fields: int, folder: Path) -> dict[str, Any]:
    out = folder / f"{case}-{mode}.pickle"
    command = [sys.executable, __file__, "--child", case, mode, str(out), "--fields", str(fields)]
    command += ["--quick"] if quick else []
    command += ["--cold"] if _COLD else []
    command += ["--keep-memory"] if _KEEP_MEMORY else []
    command += ["--warm-first"] if _WARM_FIRST else []
    subprocess.run(command, env=_env(), check=True, timeout=3600)
    with out.open("rb") as source:
        answer: dict[str, Any] = pickle.load(source)  # our own child's file, just written
    return answer


def _per_run(runs: list[dict[str, Any]], key: str) -> dict[str, float]:
    """The mean of one table (``steps`` or ``phases``) over runs: seconds per field."""
    labels = runs[0][key]
    return {label: sum(float(run[key][label][0] if key == "steps" else run[key][label]) for run in runs) / len(runs)
            for label in labels}


def _steps_table(plain: dict[str, Any], patched: dict[str, Any]) -> list[str]:
    """Each step's seconds in the first field and (where there were more) per later field."""
    first = [plain["runs"][:1], patched["runs"][:1]]
    later = [plain["runs"][1:], patched["runs"][1:]]
    spans = [("first field", first)] + ([("each later field", later)] if later[0] else [])
    head = f"    {'step (inclusive)':<38} {'calls':>6}"
    for title, _ in spans:
        head += f" | {title + ': spaCR s':>26} {'share':>6} {'patched s':>10} {'ratio':>6}"
    lines = [head]
    for key in ("steps", "phases"):
        tables = [[_per_run(side, key) for side in runs] for _, runs in spans]
        for label in plain["runs"][0][key]:
            calls = plain["runs"][0][key][label][1] if key == "steps" else None
            if key == "steps" and not calls:
                continue
            name = label if key == "steps" else f"phase {label} (spaCR own clock)"
            line = f"    {name:<38} {'' if calls is None else int(calls):>6}"
            for (_, runs), (own, mine) in zip(spans, tables, strict=True):
                whole = statistics.mean(run["total"] for run in runs[0])
                seconds, after = own[label], mine.get(label, 0.0)
                line += f" | {seconds:>26.3f} {seconds / whole:>6.1%} "
                if key == "steps" and not any(run["steps"].get(label, [0, 0])[1] for run in runs[1]):
                    line += f"{'not called':>17}"  # a seam around it (align_field's) does its work
                else:
                    line += f"{after:>10.3f} {after / seconds if seconds else float('nan'):>6.2f}"
            lines.append(line)
    return lines


def compare(case: str, quick: bool, repeat: int, fields: int) -> float:
    """Run one case in ``repeat`` pairs of processes, ``fields`` runs each; print its table and
    return the median ratio of the later fields (of the first, where each process ran one)."""
    from spacr_accel_core.patch._calls import first_difference

    pairs = []
    with tempfile.TemporaryDirectory(prefix="bench-spacr-") as name:
        folder = Path(name)
        for attempt in range(repeat):
            # alternate which runs first, so a machine warming up or slowing down favours neither
            order = ("spacr", "patched") if attempt % 2 == 0 else ("patched", "spacr")
            runs = {mode: _run_child(case, mode, quick, fields, folder) for mode in order}
            for number, (mine, theirs) in enumerate(zip(runs["patched"]["runs"], runs["spacr"]["runs"],
                                                        strict=True), start=1):
                difference = first_difference(mine["answer"], theirs["answer"], case)
                if difference is not None:
                    raise SystemExit(f"{case}, run {number}: the patched answer differs from spaCR's: {difference}")
            pairs.append((runs["spacr"], runs["patched"]))

    def totals(side: dict[str, Any], later: bool) -> float:
        chosen = side["runs"][1:] if later else side["runs"][:1]
        return statistics.median(run["total"] for run in chosen)

    ratios: dict[bool, list[float]] = {}
    for later in (False, True) if fields > 1 else (False,):
        ratios[later] = [totals(mine, later) / totals(own, later) for own, mine in pairs]
        what = f"each later field (median of {fields - 1})" if later else "the first field of a fresh process"
        print(f"\n{case}, {what}: spaCR {statistics.median(totals(own, later) for own, _ in pairs):.2f} s, patched "
              f"{statistics.median(totals(mine, later) for _, mine in pairs):.2f} s, ratio "
              f"{statistics.median(ratios[later]):.2f} (runs: {', '.join(f'{r:.2f}' for r in ratios[later])})")
    for later in ratios:
        spent = {mode: [run["kernel"] for pair in pairs for run in (pair[side]["runs"][1:] if later else
                                                                   pair[side]["runs"][:1])]
                 for side, mode in ((0, "spaCR"), (1, "patched"))}
        print(f"    system time (page faults) per {'later' if later else 'first'} field: " + ", ".join(
            f"{mode} {statistics.median(s for s, _ in runs):.2f} s ({statistics.median(f for _, f in runs):,.0f})"
            for mode, runs in spent.items()))
    key = fields > 1
    middle = int(np.argsort(ratios[key])[len(pairs) // 2])
    plain, patched = pairs[middle]
    waited = (f"the patched process waited {patched['warm']:.1f} s for the compiled backends before the clock"
              if _WARM_FIRST and not _COLD else "the patched process waited for nothing before the clock")
    print(f"    identical answers in all {fields * len(pairs)} runs; {waited}")
    print("\n".join(_steps_table(plain, patched)))
    print("\n".join("    " + line for line in patched["report"].splitlines()))
    return statistics.median(ratios[key])


def overhead(calls: int = 20_000) -> None:
    """What a served seam call costs over the registry's operation on the same tiny input."""
    import spacr_accel_core
    from spacr_accel_core import ops, patch

    patch.install()
    spacr_accel_core.warm_up(timeout=900)
    from spacr import ops_accel

    field = np.random.default_rng(0).random((16, 16), dtype=np.float32)
    ops.maximum_filter(field, 3)
    ops_accel.maximum_filter(field, 3)

    def rounds(*functions: Callable[[], Any], count: int = 21) -> list[float]:
        # Interleaved rounds, the fastest of each kept: a shared machine's noise only ever adds time,
        # and one that strikes one side's block of calls must not read as the patch's cost.
        best = [float("inf")] * len(functions)
        each = calls // count
        for _ in range(count):
            for slot, function in enumerate(functions):
                start = time.perf_counter()
                for _ in range(each):
                    function()
                best[slot] = min(best[slot], (time.perf_counter() - start) / each)
        return best

    direct, seam = rounds(lambda: ops.maximum_filter(field, 3), lambda: ops_accel.maximum_filter(field, 3))
    patch.uninstall()
    (spacr_own,) = rounds(lambda: ops_accel.maximum_filter(field, 3))
    print(f"\noverhead: spacr.ops_accel.maximum_filter on a 16x16 field, size 3: patched {seam * 1e6:.1f} us, "
          f"the registry's ops.maximum_filter directly {direct * 1e6:.1f} us, so the patch adds "
          f"{(seam - direct) * 1e6:.1f} us a call (spaCR's own function, unpatched: {spacr_own * 1e6:.1f} us)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 512^2 field and a smaller anchor field")
    parser.add_argument("--repeat", type=int, default=1, help="pairs of fresh processes per case (median)")
    parser.add_argument("--fields", type=int, default=3,
                        help="runs of the case in each process: the first, then a well's later fields")
    parser.add_argument("--only", choices=tuple(STEPS), help="one case")
    parser.add_argument("--overhead", action="store_true", help="only the per-call cost of a served seam")
    parser.add_argument("--cold", action="store_true",
                        help="a fresh, empty kernel cache and no warm-up: the first process after an install")
    parser.add_argument("--keep-memory", action="store_true",
                        help="both processes keep the memory they free (patch.keep_freed_memory)")
    parser.add_argument("--warm-first", action="store_true",
                        help="the patched process waits for its compiled backends before the clock")
    parser.add_argument("--child", nargs=3, metavar=("CASE", "MODE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    global _COLD, _KEEP_MEMORY, _WARM_FIRST  # switches read in the parent and in each child
    _COLD, _KEEP_MEMORY, _WARM_FIRST = args.cold, args.keep_memory, args.warm_first
    if args.child:
        case, mode, out = args.child
        child(case, mode, args.quick, max(1, args.fields), Path(out))
        return 0
    try:
        import spacr  # noqa: F401  # only whether it is there
    except ImportError:
        print("spaCR is not installed: pip install -r benchmarks/requirements-peers.txt", file=sys.stderr)
        return 2
    if args.overhead:
        overhead()
        return 0
    if args.cold:
        os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-spacr-cache-")
        print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs; each run a fresh "
              f"process; a fresh kernel cache ({os.environ['NUMBA_CACHE_DIR']}) and no warm-up")
    else:
        print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs; "
              "each run a fresh process; warming the kernel cache first")
        subprocess.run([sys.executable, "-c", "import spacr_accel_core as s; s.warm_up(timeout=900)"],
                       env=_env(), check=True, timeout=1800)
    for case in (args.only,) if args.only else tuple(STEPS):
        compare(case, args.quick, max(1, args.repeat), max(1, args.fields))
    overhead()
    return 0


if __name__ == "__main__":
    sys.exit(main())
