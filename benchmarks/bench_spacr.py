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
(dtypes, shapes, bits, record fields, dictionaries key by key) and a difference is an error, not a
row.

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

``--cold`` gives each run a fresh, empty kernel cache folder and no warm-up: what the first process
after an install sees, while numba compiles in the background.

THE KERNEL'S SHARE. Each run's system seconds and page faults (``getrusage``) are printed beside
its time: on a virtual machine whose free memory goes back to the host, faulting a field's arrays
in again is a large and uneven part of a decode, on both sides. ``--keep-memory`` runs both processes
with ``patch.keep_freed_memory()`` (glibc keeps what it frees), which takes that part out.

NUMBA'S COLD START (``--cold-start [CASE ...]``, every case when none is named): what a process sees
before, while and after the kernels compile, on the decode of one field, each case in fresh
processes with a fresh kernel cache (``NUMBA_CACHE_DIR``), with no warm-up: each patched answer is
compared bit for bit with spaCR's (a difference is an error, not a row).

(a) FIRST PROCESS AFTER AN INSTALL. A fresh cache, nothing compiled: the patched decode against
    spaCR alone, and how long the detached compiler the process started needed to finish after the
    process exited (the compiler's lock in the cache folder says when).
(b) THE SECOND PROCESS. The same cache: one started as soon as the first exited (its compiler still
    running), and one after the compiler finished (every kernel loads from the cache). ``b`` runs
    ``a`` first: it needs the cache ``a`` fills.
(c) ``spacr-accel warm`` FIRST. A fresh cache, the command timed, then the patched decode.
(d) THE FLOOR, PER OPERATION. The decode's own arguments, captured from spaCR's decode of the same
    field (the anchor field's for ``seed_by_scaled_pairs``; the field's nuclei against a jittered
    copy for ``match_cells``' nearest neighbours), each seam the patch installs timed under
    ``config.override(backends=["numpy"], only=True)`` against spaCR's own function, interleaved
    rounds, the fastest of each side. The seams served only above the floor (``gaussian_laplace``,
    ``_translate``, ``_clipped``) hand these calls to spaCR: their rows are "spaCR's own".
(e) THE FLOOR WHILE THE COMPILER RUNS. One floor-served call (``phase_correlate`` on a field's
    pair) on an idle machine and beside a fresh-cache compiler (started in a throwaway cache), in
    interleaved rounds: the compiler is paused (``SIGSTOP``) for the idle rounds.
(f) EIGHT SPAWNED WORKERS on a fresh cache, started together, each making a numba-wanted call and
    waiting for the kernels: the functions numba compiled, in the compiler (the ledger's
    ``compiled``) and in each worker (its dispatchers' cache misses).

Needs spaCR (``pip install -r benchmarks/requirements-peers.txt``).

Run: ``python benchmarks/bench_spacr.py [--quick] [--cold] [--keep-memory] [--warm-first] [--repeat 1]
[--fields 3] [--only decode|align] [--overhead]``, or ``python benchmarks/bench_spacr.py --cold-start
[a b c d e f] [--quick]``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import pickle
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _answers import first_difference  # the benchmarks' bit-for-bit check, beside this file
from _timing import clocked, rounds, side_by_side  # the benchmarks' one timer, beside this file

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

        def spent(took: float, _total: list[float] = total) -> None:
            _total[0] += took
            _total[1] += 1

        timed = clocked(original, spent)
        for module in loaded:
            if getattr(module, name, None) is original:
                setattr(module, name, timed)
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
    def identical(_: int, runs: dict[str, dict[str, Any]]) -> None:
        for number, (mine, theirs) in enumerate(zip(runs["patched"]["runs"], runs["spacr"]["runs"], strict=True),
                                                start=1):
            difference = first_difference(mine["answer"], theirs["answer"], case)
            if difference is not None:
                raise SystemExit(f"{case}, run {number}: the patched answer differs from spaCR's: {difference}")

    with tempfile.TemporaryDirectory(prefix="bench-spacr-") as name:
        folder = Path(name)
        # alternate which runs first, so a machine warming up or slowing down favours neither
        sides = rounds({mode: (lambda mode=mode: _run_child(case, mode, quick, fields, folder))
                        for mode in ("spacr", "patched")}, repeat, alternate=True, after=identical)
    pairs = list(zip(sides["spacr"], sides["patched"], strict=True))

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

    # Interleaved rounds of blocks of calls, the fastest of each kept: a shared machine's noise only
    # ever adds time, and one that strikes one side's block of calls must not read as the patch's cost.
    count = 21
    timed = side_by_side({"direct": lambda: ops.maximum_filter(field, 3),
                          "seam": lambda: ops_accel.maximum_filter(field, 3)}, count, each=calls // count)
    direct, seam = timed["direct"].best, timed["seam"].best
    patch.uninstall()
    own = side_by_side({"own": lambda: ops_accel.maximum_filter(field, 3)}, count, each=calls // count)
    spacr_own = own["own"].best
    print(f"\noverhead: spacr.ops_accel.maximum_filter on a 16x16 field, size 3: patched {seam * 1e6:.1f} us, "
          f"the registry's ops.maximum_filter directly {direct * 1e6:.1f} us, so the patch adds "
          f"{(seam - direct) * 1e6:.1f} us a call (spaCR's own function, unpatched: {spacr_own * 1e6:.1f} us)")


# ---- numba's cold start ---------------------------------------------------------------------------


_ROOTS: list[str] = []
"""The fresh cache folders the cold-start cases made, removed at the end."""


def _fresh_root() -> str:
    root = tempfile.mkdtemp(prefix="bench-cold-cache-")
    _ROOTS.append(root)
    return root


def _cold_env(root: str, **extra: str) -> dict[str, str]:
    """The children's environment (no patch variable) with its own kernel cache."""
    return {**_env(), "NUMBA_CACHE_DIR": root, **extra}


def _folder(root: str) -> Path:
    """The folder numba (and the detached compiler) uses for this package under ``root``."""
    from spacr_accel_numba import _compiler

    return Path(root) / _compiler._subpath(_compiler._PACKAGE)


def _kernels() -> int:
    from spacr_accel_numba import _warm

    return len(_warm._jobs())


# ---- (a), (b), (c): the decode in fresh processes -------------------------------------------------


def _cold_decode(mode: str, root: str, quick: bool, folder: Path) -> dict[str, Any]:
    """One decode in a fresh process (the comparison's own child, ``--cold``: no warm-up, one field):
    the child's record, with that field's ``total`` and ``answer`` and the process's ``wall`` time."""
    out = folder / f"decode-{mode}-{time.monotonic_ns()}.pickle"
    command = [sys.executable, __file__, "--child", "decode", mode, str(out), "--cold", "--fields", "1"]
    command += ["--quick"] if quick else []
    began = time.perf_counter()
    subprocess.run(command, env=_cold_env(root), check=True, timeout=3600)
    wall = time.perf_counter() - began
    with out.open("rb") as source:
        answer: dict[str, Any] = pickle.load(source)  # our own child's file, just written
    field = answer["runs"][0]
    answer.update(total=field["total"], answer=field["answer"], wall=wall)
    return answer


def _same(patched: dict[str, Any], alone: dict[str, Any], what: str) -> None:
    difference = first_difference(patched["answer"], alone["answer"], "decode")
    if difference is not None:
        raise SystemExit(f"({what}) the patched answer differs from spaCR's: {difference}")


def _served_line(report: str) -> str:
    """The patch report's "served by numba / numpy (numba still compiling)" counts, in one line."""
    counts: dict[str, int] = {}
    for line in report.splitlines():
        words = line.strip()
        if words.startswith(("served by ", "spaCR's own")):
            label, _, rest = words.rpartition(": ")
            calls = int(rest.split()[0])
            key = label.removeprefix("served by ")
            key = "spaCR's own" if key.startswith("spaCR's own") else key
            counts[key] = counts.get(key, 0) + calls
    return ", ".join(f"{key} {calls}" for key, calls in sorted(counts.items(), key=lambda kv: -kv[1]))


def _cold_row(label: str, patched: dict[str, Any], alone: float, target: float) -> str:
    ratio = patched["total"] / alone
    mark = "" if ratio <= target else f"  OVER the target {target:.1f}x"
    return (f"  {label:<52} decode {patched['total']:6.2f} s ({ratio:4.2f}x spaCR){mark}; "
            f"process {patched['wall']:6.2f} s\n      calls: {_served_line(patched['report'])}")


def _wait_compiler(folder: Path, total: int) -> float:
    """Seconds until the compiler holding ``folder``'s lock is done (it may start a moment late)."""
    from spacr_accel_numba import _compiler

    began = time.perf_counter()
    while True:
        listed = _compiler.read_ledger(folder)
        if not _compiler.compiling(folder) and (len(listed) >= total or time.perf_counter() - began > 10):
            return time.perf_counter() - began
        time.sleep(0.2)


def _ledger_line(folder: Path) -> str:
    from spacr_accel_numba import _compiler

    listed = _compiler.read_ledger(folder)
    failed = [name for name, entry in listed.items() if entry.failed]
    return (f"the ledger lists {len(listed)} of {_kernels()} kernels, {sum(e.seconds for e in listed.values()):.1f} s "
            f"of the compiler's own, {sum(e.compiled for e in listed.values())} functions compiled"
            + (f"; FAILED: {', '.join(failed)}" if failed else ""))


def case_ab(quick: bool, scratch: Path, with_b: bool) -> None:
    root = _fresh_root()
    folder = _folder(root)
    alone = _cold_decode("spacr", root, quick, scratch)
    first = _cold_decode("patched", root, quick, scratch)
    exited = time.perf_counter()
    _same(first, alone, "a")
    from spacr_accel_numba import _compiler

    running = _compiler.compiling(folder)
    print(f"\n(a) the first process after a fresh install (empty kernel cache, no warm-up); spaCR alone "
          f"{alone['total']:.2f} s (process {alone['wall']:.2f} s); identical answers")
    print(_cold_row("patched, first process", first, alone["total"], 1.0))
    print("\n".join(_steps_table(alone, first)))
    immediate = None
    if with_b:
        immediate = _cold_decode("patched", root, quick, scratch)
        _same(immediate, alone, "b")
    _wait_compiler(folder, _kernels())
    done = time.perf_counter() - exited
    print(f"  the detached compiler (running at exit: {running}) finished {done:.1f} s after the first process "
          f"exited" + (" (the immediate second process below ran beside it for its first "
                       f"{immediate['wall']:.1f} s)" if immediate else "")
          + f"; {_ledger_line(folder)}")
    if not with_b or immediate is None:
        return
    second = _cold_decode("patched", root, quick, scratch)
    _same(second, alone, "b")
    again = _cold_decode("spacr", root, quick, scratch)
    both = statistics.median([alone["total"], again["total"]])
    print(f"\n(b) the second process, the cache the first one's compiler filled; spaCR alone {alone['total']:.2f}, "
          f"{again['total']:.2f} s (median {both:.2f} s); identical answers")
    print(_cold_row("patched, started as the first exited (compiler running)", immediate, both, 0.6))
    print(_cold_row("patched, after the compiler finished", second, both, 0.6))
    print("\n".join(_steps_table(again, second)))


def case_c(quick: bool, scratch: Path) -> None:
    root = _fresh_root()
    began = time.perf_counter()
    warm = subprocess.run([sys.executable, "-m", "spacr_accel_core", "warm"], env=_cold_env(root), check=False,
                          capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - began
    patched = _cold_decode("patched", root, quick, scratch)
    alone = _cold_decode("spacr", root, quick, scratch)
    _same(patched, alone, "c")
    line = next((text for text in warm.stdout.splitlines() if text.startswith("numba")), warm.stdout.strip())
    print(f"\n(c) a fresh cache, then `spacr-accel warm` ({seconds:.1f} s, exit {warm.returncode}: {line}), then the "
          f"decode; spaCR alone {alone['total']:.2f} s; identical answers")
    print(_cold_row("patched, after spacr-accel warm", patched, alone["total"], 0.6))


# ---- (d): the floor against spaCR's own, operation by operation ----------------------------------


_CAPTURED = (
    ("phase_correlate", "spacr.ops_cycles", "phase_correlate"),
    ("extract_bases (window_maxima)", "spacr.ops_sbs", "extract_bases"),
    ("find_peaks' maximum_filter", "spacr.ops_accel", "maximum_filter"),
    ("minimum_filter (the spot score's)", "scipy.ndimage", "minimum_filter"),
    ("sbs_mean_target", "spacr.ops_cycles", "sbs_mean_target"),
    ("estimate_read_locations (spot_score)", "spacr.ops_sbs", "estimate_read_locations"),
    ("attribute_reads", "spacr.ops_sbs", "attribute_reads"),
    ("seed_by_scaled_pairs (count_within)", "spacr.ops_phenotype", "seed_by_scaled_pairs"),
    ("gaussian_laplace", "scipy.ndimage", "gaussian_laplace"),
    ("_translate", "spacr.ops_cycles", "_translate"),
    ("_clipped", "spacr.ops_cycles", "_clipped"),
)
"""(row, module, name): the calls captured from spaCR's own decode (and alignment)."""

_SCOPED = {"minimum_filter", "gaussian_laplace"}
"""Served inside ``_decode_field`` only, through its own ``from scipy import ndimage``."""


def floor_child(quick: bool, out: Path) -> None:
    """(d) in one fresh interpreter: capture spaCR's calls, then time each side by side."""
    import importlib

    from spacr import ops_engine, ops_merge, ops_phenotype

    from spacr_accel_core import config, patch
    from spacr_accel_core.testing import anchor_field, sbs_field

    size = 512 if quick else 1480
    keep = 44 if quick else 11  # calls kept per function (phase_correlate keeps all 43 pairs)
    field = sbs_field(size=size, spots=2 * size, nuclei=600 if not quick else 150)
    ops_engine._read_plane = field.read_plane
    ops_engine._init_decode_worker(frozenset())
    captured: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {row: [] for row, _, _ in _CAPTURED}
    originals: dict[str, Any] = {}
    for row, module_name, name in _CAPTURED:
        module = importlib.import_module(module_name)
        original = getattr(module, name)
        originals[row] = original
        limit = 43 if name == "phase_correlate" else keep

        def capture(*args: Any, _row: str = row, _inner: Any = original, _limit: int = limit, **kwargs: Any) -> Any:
            if len(captured[_row]) < _limit:
                captured[_row].append((args, kwargs))
            return _inner(*args, **kwargs)

        setattr(module, name, capture)
    anchor = anchor_field(sources=300, targets=900) if quick else anchor_field()
    ops_engine._decode_field(field.task)
    ops_phenotype.align_phenotype_to_sbs(anchor.source, anchor.target, expected_scale=anchor.scale)
    for row, module_name, name in _CAPTURED:
        setattr(importlib.import_module(module_name), name, originals[row])
    rng = np.random.default_rng(1)
    centroids = np.asarray(field.task["centroids"], float)
    jittered = centroids + rng.normal(0.0, 0.7, centroids.shape)

    patch.install()
    # The scoped seams as _decode_field meets them: its own builtins' import hands it the patch's
    # ndimage (the served functions), which is what its `from scipy import ndimage` finds.
    scoped = ops_engine._decode_field.__builtins__["__import__"]("scipy", None, None, ("ndimage",), 0).ndimage
    seams: dict[str, Any] = {}
    for row, module_name, name in _CAPTURED:
        if name in _SCOPED:
            seams[row] = getattr(scoped, name)
        else:
            seams[row] = getattr(importlib.import_module(module_name), name)
    repeat = 3
    rows = []
    with config.override(backends=["numpy"], only=True):
        plan: list[tuple[str, Any, Any, list[tuple[tuple[Any, ...], dict[str, Any]]]]] = [
            (row, seams[row], originals[row], captured[row]) for row, _, _ in _CAPTURED]
        plan.insert(7, ("match_cells' nearest_neighbours", ops_merge.match_cells,
                        None, [((jittered, centroids), {"gpu": False})]))
        for row, seam, original, calls in plan:
            if not calls:
                rows.append((row, 0, float("nan"), float("nan"), "no call captured"))
                continue

            def each(function: Any, given: list[tuple[tuple[Any, ...], dict[str, Any]]] = calls) -> Callable[[], Any]:
                return lambda: [function(*a, **k) for a, k in given]

            patch.reset()
            if original is None:  # match_cells: spaCR's own is the same function, the patch taken out
                timed = side_by_side({"served": each(seam), "own": each(seam)}, repeat,
                                     before={"served": patch.install, "own": patch.uninstall})
                patch.install()
            else:
                timed = side_by_side({"served": each(seam), "own": each(original)}, repeat)
            served, own = timed["served"].best, timed["own"].best
            how = "; ".join(f"{backend} {count}" for seam_report in patch.report().seams
                            for backend, count, _ in seam_report.served)
            passed = "; ".join(f"spaCR's own ({reason}) {count}" for seam_report in patch.report().seams
                               for reason, count, _ in seam_report.passed)
            rows.append((row, len(calls), served, own, "; ".join(filter(None, [how, passed]))))
    with out.open("wb") as sink:
        pickle.dump(rows, sink)


def case_d(quick: bool, scratch: Path) -> None:
    out = scratch / "floor.pickle"
    command = [sys.executable, __file__, "--floor-child", str(out)] + (["--quick"] if quick else [])
    # The environment as well as the override: a context override does not reach the threads a seam
    # starts (seed_by_scaled_pairs scores on a worker thread), the environment reaches every thread.
    floor = _cold_env(_fresh_root(), SPACR_ACCEL_BACKENDS="numpy", SPACR_ACCEL_ONLY="1")
    subprocess.run(command, env=floor, check=True, timeout=3600)
    with out.open("rb") as source:
        rows = pickle.load(source)  # our own child's file, just written
    print(f"\n(d) the NumPy floor through the patch (config.override(backends=['numpy'], only=True), and "
          f"SPACR_ACCEL_BACKENDS=numpy SPACR_ACCEL_ONLY=1 for the seams' own threads) against "
          f"spaCR's own function, on the decode's own arguments ({'512' if quick else '1480'}^2 field), the "
          f"fastest of 3 interleaved rounds")
    print(f"    {'operation':<38} {'calls':>5} {'patched s':>10} {'spaCR s':>9} {'ratio':>6}  served")
    for row, calls, served, own, how in rows:
        ratio = served / own if own else float("nan")
        own_row = how.startswith("spaCR's own") and "numpy" not in how
        mark = "" if not ratio > 1.0 else ("  (spaCR's own: noise)" if own_row else "  OVER 1.0")
        label = f"{row} [spaCR's own]" if own_row else row
        print(f"    {label:<38} {calls:>5} {served:>10.4f} {own:>9.4f} {ratio:>6.2f}  {how}{mark}")


# ---- (e): the floor beside a running compiler -----------------------------------------------------


def busy_child(quick: bool, out: Path) -> None:
    """(e): phase_correlate through the patch on the floor, the compiler paused and running in turns."""
    from spacr import ops_cycles

    from spacr_accel_core import config, patch
    from spacr_accel_core.testing import sbs_field
    from spacr_accel_numba import _compiler

    size = 512 if quick else 1480
    field = sbs_field(size=size, spots=2 * size, nuclei=150)
    first, second = field.planes[(0, 0)], field.planes[(1, 0)]
    patch.install()
    folder = _compiler.cache_folder()
    if folder is None or not _compiler.start(folder):
        raise SystemExit("(e) could not start a compiler in the throwaway cache")
    child = _compiler._child
    assert child is not None
    time.sleep(3.0)  # the compiler imports numba and starts its first kernel
    calls = 5 if quick else 3

    def compiler(signal_number: int) -> Callable[[], None]:
        def step() -> None:
            os.kill(child.pid, signal_number)
            time.sleep(0.2)
        return step

    with config.override(backends=["numpy"], only=True):
        ops_cycles.phase_correlate(first, second)
        timed = side_by_side({"idle": lambda: ops_cycles.phase_correlate(first, second),
                              "busy": lambda: ops_cycles.phase_correlate(first, second)}, 5, each=calls,
                             before={"idle": compiler(signal.SIGSTOP), "busy": compiler(signal.SIGCONT)})
    idle, busy = list(timed["idle"].wall), list(timed["busy"].wall)
    listed = len(_compiler.read_ledger(folder))
    still = child.poll() is None
    os.kill(child.pid, signal.SIGCONT)
    if still:
        child.terminate()  # our own compiler of a throwaway cache: its work is not needed
        child.wait(30)
    served = "; ".join(f"{backend} {count}" for seam in patch.report().seams for backend, count, _ in seam.served)
    with out.open("wb") as sink_file:
        pickle.dump({"idle": idle, "busy": busy, "listed": listed, "still": still, "served": served,
                     "size": size}, sink_file)


def case_e(quick: bool, scratch: Path) -> None:
    out = scratch / "busy.pickle"
    command = [sys.executable, __file__, "--busy-child", str(out)] + (["--quick"] if quick else [])
    subprocess.run(command, env=_cold_env(_fresh_root()), check=True, timeout=3600)
    with out.open("rb") as source:
        got = pickle.load(source)  # our own child's file, just written
    ratio = min(got["busy"]) / min(got["idle"])
    mark = "" if ratio <= 1.2 else "  OVER the target 1.2x"
    print(f"\n(e) phase_correlate on a {got['size']}^2 pair through the patch, the NumPy floor only ({got['served']}), "
          f"5 interleaved rounds: compiler paused {min(got['idle']) * 1e3:.1f} ms (median "
          f"{statistics.median(got['idle']) * 1e3:.1f}), compiler running {min(got['busy']) * 1e3:.1f} ms (median "
          f"{statistics.median(got['busy']) * 1e3:.1f}): {ratio:.2f}x{mark}; the compiler had listed "
          f"{got['listed']} kernels and was {'still running' if got['still'] else 'done'}")


# ---- (f): eight spawned workers on one fresh cache ------------------------------------------------


def _worker(slot: int) -> dict[str, Any]:
    """One spawned worker: a numba-wanted call (a 2-D nearest neighbour search), then the kernels."""
    began = time.perf_counter()
    import spacr_accel_core
    from spacr_accel_core import ops

    points = np.random.default_rng(slot).random((2000, 2))
    ops.nearest_neighbours(points, points[::-1].copy())
    ready = spacr_accel_core.warm_up(timeout=1800)
    from spacr_accel_numba import _compile_child

    own = _compile_child._compiles(_compile_child._ours())
    ops.nearest_neighbours(points, points[::-1].copy())
    return {"ready": ready, "own": own, "seconds": time.perf_counter() - began,
            "backend": getattr(spacr_accel_core.last_dispatch(), "backend", None)}


def case_f() -> None:
    root = _fresh_root()
    saved = os.environ.get("NUMBA_CACHE_DIR")
    os.environ["NUMBA_CACHE_DIR"] = root  # the spawned workers inherit it
    try:
        context = multiprocessing.get_context("spawn")
        began = time.perf_counter()
        with context.Pool(8) as pool:
            results = pool.map(_worker, range(8))
        seconds = time.perf_counter() - began
    finally:
        if saved is None:
            os.environ.pop("NUMBA_CACHE_DIR", None)
        else:
            os.environ["NUMBA_CACHE_DIR"] = saved
    from spacr_accel_numba import _compiler

    folder = _folder(root)
    _wait_compiler(folder, _kernels())
    listed = _compiler.read_ledger(folder)
    in_ledger = sum(entry.compiled for entry in listed.values())
    own = [result["own"] for result in results]
    print(f"\n(f) eight spawned workers started together on a fresh cache, each a numba-wanted call then the "
          f"warm-up: all done in {seconds:.1f} s; {_ledger_line(folder)}; each worker's own compiles "
          f"{own} (total {in_ledger + sum(own)} = the ledger's {in_ledger} + the workers' {sum(own)}); ready in "
          f"{sum(all(r['ready'].values()) for r in results)} of 8; backends after: "
          f"{sorted({r['backend'] for r in results})}")


COLD_CASES = ("a", "b", "c", "d", "e", "f")
"""numba's cold-start cases (see the module's docstring)."""


def cold_start(cases: tuple[str, ...], quick: bool) -> None:
    """The cold-start cases asked for, each in fresh processes with a fresh kernel cache."""
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs; "
          f"{'512' if quick else '1480'}^2 field; each case in fresh processes with a fresh kernel cache "
          f"({_kernels()} kernels)")
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as name:
        scratch = Path(name)
        try:
            if "a" in cases or "b" in cases:
                case_ab(quick, scratch, with_b="b" in cases)
            if "c" in cases:
                case_c(quick, scratch)
            if "d" in cases:
                case_d(quick, scratch)
            if "e" in cases:
                case_e(quick, scratch)
            if "f" in cases:
                case_f()
        finally:
            for root in _ROOTS:
                shutil.rmtree(root, ignore_errors=True)
    print(f"\n(the run took {time.perf_counter() - began:.0f} s)")


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
    parser.add_argument("--cold-start", nargs="*", choices=COLD_CASES, metavar="CASE",
                        help="numba's cold start instead: the cases a to f (every one when none is named; "
                             "b runs a first)")
    parser.add_argument("--child", nargs=3, metavar=("CASE", "MODE", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--floor-child", metavar="OUT", help=argparse.SUPPRESS)
    parser.add_argument("--busy-child", metavar="OUT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    global _COLD, _KEEP_MEMORY, _WARM_FIRST  # switches read in the parent and in each child
    _COLD, _KEEP_MEMORY, _WARM_FIRST = args.cold, args.keep_memory, args.warm_first
    if args.child:
        case, mode, out = args.child
        child(case, mode, args.quick, max(1, args.fields), Path(out))
        return 0
    if args.floor_child:
        floor_child(args.quick, Path(args.floor_child))
        return 0
    if args.busy_child:
        busy_child(args.quick, Path(args.busy_child))
        return 0
    try:
        import spacr  # noqa: F401  # only whether it is there
    except ImportError:
        print("spaCR is not installed: pip install -r benchmarks/requirements-peers.txt", file=sys.stderr)
        return 2
    if args.cold_start is not None:
        cold_start(tuple(args.cold_start) or COLD_CASES, args.quick)
        return 0
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
