"""numba's cold start, measured on spaCR's own decode: what a process sees before, while and after
the kernels compile, each case in fresh processes with a fresh kernel cache, side by side in one run.

WHAT IS TIMED IS spaCR's. The decode is ``spacr.ops_engine._decode_field`` of one synthetic field
(``spacr_accel_core.testing.sbs_field``), run by ``benchmarks/bench_spacr.py``'s own child, spaCR
alone and patched (``patch.install()``), with no warm-up: each patched answer is compared bit for
bit with spaCR's (a difference is an error, not a row).

(a) FIRST PROCESS AFTER AN INSTALL. A fresh ``NUMBA_CACHE_DIR``, nothing compiled: the patched
    decode against spaCR alone, and how long the detached compiler the process started needed to
    finish after the process exited (the compiler's lock in the cache folder says when).
(b) THE SECOND PROCESS. The same cache: one started as soon as the first exited (its compiler still
    running), and one after the compiler finished (every kernel loads from the cache).
(c) ``spacr-accel warm`` FIRST. A fresh cache, the command timed, then the patched decode.
(d) THE FLOOR, PER OPERATION. The decode's own arguments, captured from spaCR's decode of the same
    field (the anchor field's for ``seed_by_scaled_pairs``; the field's nuclei against a jittered
    copy for ``match_cells``' nearest neighbours), each seam the patch installs timed under
    ``config.override(backends=["numpy"], only=True)`` against spaCR's own function, interleaved
    rounds, the fastest of each side. The seams served only above the floor (``gaussian_laplace``,
    ``_translate``, ``_clipped``) hand these calls to spaCR: their rows are "spaCR's own".
(e) THE FLOOR WHILE THE COMPILER RUNS. One floor-served call (``phase_correlate`` on a field's
    pair) on an idle machine and beside a fresh-cache compiler (``_compiler.start`` in a throwaway
    cache), in interleaved rounds: the compiler is paused (``SIGSTOP``) for the idle rounds.
(f) EIGHT SPAWNED WORKERS on a fresh cache, started together, each making a numba-wanted call and
    waiting for the kernels: the functions numba compiled, in the compiler (the ledger's
    ``compiled``) and in each worker (its dispatchers' cache misses).

Needs spaCR (``pip install -r benchmarks/requirements-peers.txt``).

Run: ``python benchmarks/bench_cold.py [--quick] [--only a|b|c|d|e|f]`` (``b`` runs ``a`` first:
it needs the cache ``a`` fills).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_spacr  # the sibling benchmark: its decode child and its environment

CASES = ("a", "b", "c", "d", "e", "f")

_ROOTS: list[str] = []
"""The fresh cache folders this run made, removed at the end."""


def _fresh_root() -> str:
    root = tempfile.mkdtemp(prefix="bench-cold-cache-")
    _ROOTS.append(root)
    return root


def _env(root: str, **extra: str) -> dict[str, str]:
    """bench_spacr's child environment (no patch variable) with its own kernel cache."""
    return {**bench_spacr._env(), "NUMBA_CACHE_DIR": root, **extra}


def _folder(root: str) -> Path:
    """The folder numba (and the detached compiler) uses for this package under ``root``."""
    from spacr_accel_numba import _compiler

    return Path(root) / _compiler._subpath(_compiler._PACKAGE)


def _kernels() -> int:
    from spacr_accel_numba import _warm

    return len(_warm._jobs())


# ---- (a), (b), (c): the decode in fresh processes -----------------------------------------------


def _decode(mode: str, root: str, quick: bool, folder: Path) -> dict[str, Any]:
    """One decode in a fresh process (bench_spacr's own child, ``--cold``: no warm-up)."""
    out = folder / f"decode-{mode}-{time.monotonic_ns()}.pickle"
    command = [sys.executable, bench_spacr.__file__, "--child", "decode", mode, str(out), "--cold"]
    command += ["--quick"] if quick else []
    began = time.perf_counter()
    subprocess.run(command, env=_env(root), check=True, timeout=3600)
    wall = time.perf_counter() - began
    with out.open("rb") as source:
        answer: dict[str, Any] = pickle.load(source)  # our own child's file, just written
    answer["wall"] = wall
    return answer


def _same(patched: dict[str, Any], alone: dict[str, Any], what: str) -> None:
    from spacr_accel_core.patch._calls import first_difference

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


def _row(label: str, patched: dict[str, Any], alone: float, target: float) -> str:
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
    alone = _decode("spacr", root, quick, scratch)
    first = _decode("patched", root, quick, scratch)
    exited = time.perf_counter()
    _same(first, alone, "a")
    from spacr_accel_numba import _compiler

    running = _compiler.compiling(folder)
    print(f"\n(a) the first process after a fresh install (empty kernel cache, no warm-up); spaCR alone "
          f"{alone['total']:.2f} s (process {alone['wall']:.2f} s); identical answers")
    print(_row("patched, first process", first, alone["total"], 1.0))
    print("\n".join(bench_spacr._steps_table(alone, first)))
    immediate = None
    if with_b:
        immediate = _decode("patched", root, quick, scratch)
        _same(immediate, alone, "b")
    _wait_compiler(folder, _kernels())
    done = time.perf_counter() - exited
    print(f"  the detached compiler (running at exit: {running}) finished {done:.1f} s after the first process "
          f"exited" + (" (the immediate second process below ran beside it for its first "
                       f"{immediate['wall']:.1f} s)" if immediate else "")
          + f"; {_ledger_line(folder)}")
    if not with_b or immediate is None:
        return
    second = _decode("patched", root, quick, scratch)
    _same(second, alone, "b")
    again = _decode("spacr", root, quick, scratch)
    both = statistics.median([alone["total"], again["total"]])
    print(f"\n(b) the second process, the cache the first one's compiler filled; spaCR alone {alone['total']:.2f}, "
          f"{again['total']:.2f} s (median {both:.2f} s); identical answers")
    print(_row("patched, started as the first exited (compiler running)", immediate, both, 0.6))
    print(_row("patched, after the compiler finished", second, both, 0.6))
    print("\n".join(bench_spacr._steps_table(again, second)))


def case_c(quick: bool, scratch: Path) -> None:
    root = _fresh_root()
    began = time.perf_counter()
    warm = subprocess.run([sys.executable, "-m", "spacr_accel_core", "warm"], env=_env(root), check=False,
                          capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - began
    patched = _decode("patched", root, quick, scratch)
    alone = _decode("spacr", root, quick, scratch)
    _same(patched, alone, "c")
    line = next((text for text in warm.stdout.splitlines() if text.startswith("numba")), warm.stdout.strip())
    print(f"\n(c) a fresh cache, then `spacr-accel warm` ({seconds:.1f} s, exit {warm.returncode}: {line}), then the "
          f"decode; spaCR alone {alone['total']:.2f} s; identical answers")
    print(_row("patched, after spacr-accel warm", patched, alone["total"], 0.6))


# ---- (d): the floor against spaCR's own, operation by operation ----------------------------------


def _best(functions: list[Callable[[], Any]], rounds: int) -> list[float]:
    """Interleaved rounds, the fastest of each side kept: noise only ever adds time."""
    best = [float("inf")] * len(functions)
    for _ in range(rounds):
        for slot, function in enumerate(functions):
            start = time.perf_counter()
            function()
            best[slot] = min(best[slot], time.perf_counter() - start)
    return best


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
    from spacr_accel_core.patch import _calls
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
    wrap = _calls.make_wrapper(patch._tally, patch._modes)
    seams: dict[str, Any] = {}
    for row, module_name, name in _CAPTURED:
        if name in _SCOPED:
            seams[row] = wrap(f"spacr.ops_engine: scipy.ndimage.{name}", name, originals[row], {})
        else:
            seams[row] = getattr(importlib.import_module(module_name), name)
    rounds = 3
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

            if original is None:  # match_cells: spaCR's own is the unpatched function
                patch.uninstall()
                (own,) = _best([each(seam)], rounds)
                patch.install()
                patch.reset()
                (served,) = _best([each(seam)], rounds)
            else:
                patch.reset()
                served, own = _best([each(seam), each(original)], rounds)
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
    floor = _env(_fresh_root(), SPACR_ACCEL_BACKENDS="numpy", SPACR_ACCEL_ONLY="1")
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
    idle: list[float] = []
    busy: list[float] = []
    with config.override(backends=["numpy"], only=True):
        ops_cycles.phase_correlate(first, second)
        for _ in range(5):
            for paused, sink in ((True, idle), (False, busy)):
                os.kill(child.pid, signal.SIGSTOP if paused else signal.SIGCONT)
                time.sleep(0.2)
                start = time.perf_counter()
                for _ in range(calls):
                    ops_cycles.phase_correlate(first, second)
                sink.append((time.perf_counter() - start) / calls)
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
    subprocess.run(command, env=_env(_fresh_root()), check=True, timeout=3600)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 512^2 field")
    parser.add_argument("--only", choices=CASES, help="one case (b runs a first)")
    parser.add_argument("--floor-child", metavar="OUT", help=argparse.SUPPRESS)
    parser.add_argument("--busy-child", metavar="OUT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
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
    cases = (args.only,) if args.only else CASES
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs; "
          f"{'512' if args.quick else '1480'}^2 field; each case in fresh processes with a fresh kernel cache "
          f"({_kernels()} kernels)")
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as name:
        scratch = Path(name)
        try:
            if "a" in cases or "b" in cases:
                case_ab(args.quick, scratch, with_b="b" in cases)
            if "c" in cases:
                case_c(args.quick, scratch)
            if "d" in cases:
                case_d(args.quick, scratch)
            if "e" in cases:
                case_e(args.quick, scratch)
            if "f" in cases:
                case_f()
        finally:
            for root in _ROOTS:
                shutil.rmtree(root, ignore_errors=True)
    print(f"\n(the run took {time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
