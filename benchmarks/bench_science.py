"""The neighbour and science calls against what a user would write instead, and backend against
backend: one run, side by side.

Four groups of sections; ``--only`` picks sections or whole groups (by the group's name). Where more
than one group is asked for, each runs in a fresh process of its own, as a separate script would:
torch's idle OpenMP threads keep spinning after its calls and would slow the threads of whatever is
measured after them, and each group draws its own data from its own seed, the same whichever
others run.

SCIENCE (``science``: ``k_nearest``, ``max_distance``, ``mutual``, ``hamming``, ``local_maxima``,
``out``, ``stacks``). k nearest (the ratio test's k = 2, a neighbourhood's k = 4) against pykdtree
and SciPy's cKDTree; a ``max_distance`` search of two fields overlapping by half (a shifted second
imaging cycle) against the same search without one; mutual matching against two cKDTree queries
and their intersection; Hamming matching of ORB-like descriptors against OpenCV's ``BFMatcher`` and
faiss's ``IndexBinaryFlat``; peaks as coordinates against the windowed maximum alone and against
``np.argwhere((cv2.dilate(f, k) == f) & (f > t))``; a matrix product into ``out=`` against NumPy's
``@``; a stack of 64 fields in one call against 64 calls. The project's answers are checked exact
against the plain reference (:mod:`spacr_accel_core.reference`) on a sample, and where a peer's
answer differs, the row says how (a different neighbour at the same distance is a tie the peer
broke otherwise). "Ours" is :data:`OURS`, a table of callables: the compiled backend's functions
called directly (:func:`direct_calls`), or with ``--ops`` :func:`ops_calls`, the public operations
with automatic dispatch. Target: every ratio at most 1.0, but ``local_maxima / maximum_filter`` at
most 1.1, ``max_distance / unbounded`` at most 0.7 and ``matmul out= / numpy @`` at most 0.75.

PEERS (``peers``: ``nearest``, ``wide``, ``maximum_filter``, ``matmul``, ``first_call``). The
project's shipped CPU backends against what a user would pick instead: pykdtree, faiss, OpenCV.
"Ours" is automatic dispatch over the shipped backends (the example plugins under ``examples/`` are
blocked, ``SPACR_ACCEL_DISABLE=opencv,openvino`` unless set otherwise), after the numba backend's
kernels are compiled (``spacr_accel_numba.warm()``); each row names the backend that served it. The
project's answers are checked exact on a 2,000-row sample against the plain float64 reference; the
peers' are not ours to check, but the float32 ones (pykdtree, faiss) are counted where they differ
from it. ``wide`` also times the bare float32 GEMM the D=64 search is built on. Target: every
"ours / peer" at most 1.0 (the project's own goal), and the first primitive calls of a fresh
process at most 0.5 s over warm ones.

TIES (``ties``). Tie-heavy nearest-neighbour inputs: each backend of ``--backends`` (numpy and
torch, forced; torch on the CPU here) against ``cKDTree(target).query(source, k=1)``, each backend
in a fresh process of its own. Duplicate centroids are common in spaCR's data (a segmentation that
emits the same object twice, coordinates quantised to the pixel grid), and they are the worst case
of an exact search: every duplicate is a tie the lowest-index rule must settle. Each answer is
checked against the plain reference on a sample of rows. Target: every ratio at most 3.0.

TORCH ON THE CPU (``torch``: ``torch_nearest``, ``torch_hamming``). The torch backend forced onto
the CPU (``backend="torch", gpu=False``) against numba on the same inputs: ``nearest_neighbours``
k=4, N = M = ``--points`` (100,000) points in 2-D (uniform over a 10,000-pixel plate), and
``metric="hamming"`` on ``--descriptors`` (20,000) x the same descriptors of 32 bytes: k=1, k=2
(the ratio test), k=4 and k=2 within ``max_distance=64``. Both answers are compared with the NumPy
floor, bit for bit. The CPU's feature flags that decide torch's Hamming product (bfloat16 on AMX,
int8 on VNNI, else float32; emulated bfloat16 is several times slower) are printed beside the
figures, as the same code on two CPUs can differ by that much. Target: torch within 3x of numba.

Every row is a ratio of the best of ``--repeat`` interleaved repeats (3; 5 for the peers), so that
a shared, noisy machine slows every contender alike. ``--quick`` draws a tenth of the points and
smaller fields, for a run in seconds rather than minutes.

    pip install -r benchmarks/requirements-peers.txt
    python benchmarks/bench_science.py                       # every group: about ten minutes on 2 cores
    python benchmarks/bench_science.py --only science --ops  # through spacr_accel_core.ops
    python benchmarks/bench_science.py --only max_distance   # one section's rows (the same data)
    python benchmarks/bench_science.py --only peers --repeat 7
    python benchmarks/bench_science.py --only wide           # the D=64 rows: ours, faiss and the bare GEMM
    python benchmarks/bench_science.py --only ties --backends numpy
    python benchmarks/bench_science.py --only torch_hamming  # it prints the CPU's flags

The science and peer targets are printed, not asserted; the run exits non-zero when a tie or torch
row misses its target or an answer of ours differs.
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _timing import fastest, rounds  # the benchmarks' one timer, beside this file

Calls = dict[str, Callable[..., Any]]

GROUPS: dict[str, tuple[str, ...]] = {
    "science": ("k_nearest", "max_distance", "mutual", "hamming", "local_maxima", "out", "stacks"),
    "peers": ("nearest", "wide", "maximum_filter", "matmul", "first_call"),
    "ties": ("ties",),
    "torch": ("torch_nearest", "torch_hamming"),
}
"""Each group's sections, in the order they run (every section's data is still drawn, so a row
measures the same points whichever others of its group run)."""

SECTIONS = tuple(section for sections in GROUPS.values() for section in sections)

HERE = Path(__file__).resolve().parent


# ---- science: the calls a screen's analysis makes --------------------------------------------------


def direct_calls() -> Calls:
    """The numba backend's functions (and the NumPy floor's stack filter), called directly.

    Every entry takes the arguments of the public operation it stands for; ``k_nearest`` and
    ``hamming`` answer ``(N, k)`` for every ``k``.
    """
    from spacr_accel_numba import _neighbours_kernels, _peaks_kernels, nearest, warm
    from spacr_accel_numba import window_maximum as numba_filter
    from spacr_accel_numpy._filters import maximum_filter_stack

    warm()
    for job in (_neighbours_kernels.warm_knearest, _neighbours_kernels.warm_hamming, _peaks_kernels.warm_peaks):
        job()

    return {
        "nearest": nearest,  # the compiled one-neighbour search ops.nearest_neighbours dispatches to
        "k_nearest": lambda s, t, k, max_distance=None: _neighbours_kernels.k_nearest(s, t, k, max_distance),
        "hamming": lambda s, t, k, max_distance=None: _neighbours_kernels.hamming_nearest(s, t, k, max_distance),
        "local_maxima": lambda f, size, threshold=None: _peaks_kernels.local_maxima(f, size, threshold),
        # The floor's filter takes stacks and out= (so its rows compare it with itself); the
        # compiled one is the fastest for one field (the row local maxima are compared with).
        "maximum_filter": lambda f, size, out=None: maximum_filter_stack(f, size, out=out),
        "fastest_maximum_filter": numba_filter,
        "matmul": lambda a, b, out=None: np.matmul(a, b, out=out),
    }


def ops_calls() -> Calls:
    """The public operations, dispatched to the fastest shipped backend that serves them (the example
    plugins under ``examples/`` blocked, ``SPACR_ACCEL_DISABLE=opencv,openvino``, unless set otherwise)."""
    os.environ.setdefault("SPACR_ACCEL_DISABLE", "opencv,openvino")
    from spacr_accel_core import ops, warm_up

    warm_up()

    def k_nearest(s: np.ndarray, t: np.ndarray, k: int, max_distance: float | None = None) -> Any:
        index, found = ops.nearest_neighbours(s, t, k=k, max_distance=max_distance)
        return index.reshape(len(s), k), found.reshape(len(s), k)

    def hamming(s: np.ndarray, t: np.ndarray, k: int, max_distance: float | None = None) -> Any:
        index, found = ops.nearest_neighbours(s, t, k=k, max_distance=max_distance, metric="hamming")
        return index.reshape(len(s), k), found.reshape(len(s), k)

    return {
        "nearest": ops.nearest_neighbours,
        "k_nearest": k_nearest,
        "hamming": hamming,
        "local_maxima": lambda f, size, threshold=None: ops.local_maxima(f, size, threshold=threshold),
        "maximum_filter": lambda f, size, out=None: ops.maximum_filter(f, size, out=out),
        "fastest_maximum_filter": ops.maximum_filter,
        "matmul": lambda a, b, out=None: ops.matmul(a, b, out=out),
    }


OURS: Callable[[], Calls] = direct_calls
"""What "ours" is in the science rows: :func:`direct_calls` or :func:`ops_calls`."""


def _row(name: str, ours: float, peer_name: str, peer: float, note: str = "") -> None:
    print(f"{name:<44} {ours * 1e3:9.1f} ms  {peer_name:<30} {peer * 1e3:9.1f} ms  {ours / peer:5.2f}x  {note}",
          flush=True)


def _differences(ours: np.ndarray, ours_d: np.ndarray, peer: np.ndarray, peer_d: np.ndarray) -> str:
    """How a peer's neighbours differ from ours: same distance (a tie broken otherwise) or not."""
    differ = ours != peer
    if not differ.any():
        return "peer identical"
    tied = np.isclose(ours_d[differ], peer_d[differ], rtol=1e-6, atol=0)
    return f"peer differs in {int(differ.sum())} (ties: {int(tied.sum())})"


def science(wanted: set[str], repeat: int, through_ops: bool, quick: bool) -> int:
    import cv2
    import faiss
    from pykdtree.kdtree import KDTree
    from scipy.spatial import cKDTree

    from spacr_accel_core import reference

    calls = ops_calls if through_ops else OURS
    ours = calls()
    rng = np.random.default_rng(2024)
    points, codes, side, rows, plate_shape = ((10_000, 2_000, 1024, 400_000, (16, 256, 256)) if quick else
                                              (100_000, 20_000, 4096, 4_000_000, (64, 512, 512)))
    thousands, code_thousands = f"{points // 1000}k", f"{codes // 1000}k"
    print(f"science; ours: {calls.__name__}; best of {repeat} interleaved repeats\n")

    def exact(answer: tuple[np.ndarray, np.ndarray], expected: tuple[np.ndarray, np.ndarray]) -> str:
        same = np.array_equal(answer[0], expected[0]) and answer[1].tobytes() == expected[1].tobytes()
        return "exact" if same else "NOT EXACT"

    # ---- k nearest ---------------------------------------------------------------------------
    source = rng.random((points, 2)).astype(np.float32)
    target = rng.random((points, 2)).astype(np.float32)
    sample = source[:300]
    for k in (2, 4) if "k_nearest" in wanted else ():
        answer = ours["k_nearest"](source, target, k)
        verdict = exact((answer[0][:300], answer[1][:300]), reference.k_nearest(sample, target, k))
        t_ours, t_pyk, t_ck = fastest(
            lambda k=k: ours["k_nearest"](source, target, k),
            lambda k=k: KDTree(target).query(source, k=k),
            lambda k=k: cKDTree(target).query(source, k=k, workers=-1), repeat=repeat)
        found_ck, index_ck = cKDTree(target).query(source, k=k, workers=-1)
        _row(f"k={k}, {thousands} x {thousands}, D=2", t_ours, "pykdtree (build + query)", t_pyk, verdict)
        _row(f"k={k}, {thousands} x {thousands}, D=2", t_ours, "cKDTree workers=-1", t_ck,
             _differences(answer[0], answer[1], index_ck, found_ck.astype(np.float32)))

    # ---- max_distance: a second field shifted by half its width ------------------------------
    shifted = (rng.random((points, 2)) + np.array([0.5, 0.0])).astype(np.float32)
    limit = 0.01 * np.sqrt(100_000 / points)  # about three typical spacings
    if "max_distance" in wanted:
        bounded = ours["k_nearest"](source, shifted, 1, limit)
        verdict = exact((bounded[0][:300], bounded[1][:300]), reference.k_nearest(sample, shifted, 1, limit))
        t_bounded, t_unbounded = fastest(lambda: ours["k_nearest"](source, shifted, 1, limit),
                                         lambda: ours["nearest"](source, shifted), repeat=repeat)
        share = float(np.mean(bounded[0][:, 0] < 0))
        _row(f"k=1, max_distance={limit:.2g}, shifted half a field", t_bounded, "ours k=1 unbounded", t_unbounded,
             f"{verdict}; {share:.0%} unmatched")

    # ---- mutual matching ---------------------------------------------------------------------
    moved = (source + rng.normal(0, 0.001, source.shape)).astype(np.float32)

    def mutual_ours() -> np.ndarray:
        forward = ours["k_nearest"](source, moved, 1)[0][:, 0]
        backward = ours["k_nearest"](moved, source, 1)[0][:, 0]
        matched = np.flatnonzero(forward >= 0)
        return matched[backward[forward[matched]] == matched]

    def mutual_ckdtree() -> np.ndarray:
        forward = cKDTree(moved).query(source, workers=-1)[1]
        backward = cKDTree(source).query(moved, workers=-1)[1]
        return np.flatnonzero(backward[forward] == np.arange(len(source)))

    if "mutual" in wanted:
        t_ours, t_peer = fastest(mutual_ours, mutual_ckdtree, repeat=repeat)
        same = "same pairs" if np.array_equal(mutual_ours(), mutual_ckdtree()) else "pairs differ"
        _row(f"mutual, {thousands} x {thousands}, D=2", t_ours, "2 cKDTree queries + intersect", t_peer, same)

    # ---- Hamming -----------------------------------------------------------------------------
    first = rng.integers(0, 256, (codes, 32), dtype=np.uint8)
    second = rng.integers(0, 256, (codes, 32), dtype=np.uint8)
    if "hamming" in wanted:
        answer = ours["hamming"](first, second, 1)
        verdict = exact((answer[0][:200], answer[1][:200]), reference.hamming_nearest(first[:200], second, 1))
        matcher = cv2.BFMatcher(cv2.NORM_HAMMING)

        def faiss_search() -> tuple[np.ndarray, np.ndarray]:
            index = faiss.IndexBinaryFlat(256)
            index.add(second)
            return index.search(first, 1)

        t_ours, t_bf, t_faiss = fastest(lambda: ours["hamming"](first, second, 1),
                                        lambda: matcher.match(first, second), faiss_search, repeat=repeat)
        matches = matcher.match(first, second)
        bf_index = np.array([m.trainIdx for m in matches])
        bf_found = np.array([m.distance for m in matches], dtype=np.float32)
        faiss_found, faiss_index = faiss_search()
        label = f"Hamming k=1, {code_thousands} x {code_thousands} x 32 bytes"
        _row(label, t_ours, "cv2.BFMatcher(NORM_HAMMING)", t_bf,
             f"{verdict}; {_differences(answer[0][:, 0], answer[1][:, 0], bf_index, bf_found)}")
        _row(label, t_ours, "faiss.IndexBinaryFlat", t_faiss,
             _differences(answer[0][:, 0], answer[1][:, 0], faiss_index[:, 0], faiss_found[:, 0].astype(np.float32)))
        t_ours, t_bf = fastest(lambda: ours["hamming"](first, second, 2),
                               lambda: matcher.knnMatch(first, second, k=2), repeat=repeat)
        _row("Hamming k=2 (ratio test)", t_ours, "cv2.BFMatcher.knnMatch k=2", t_bf)

    # ---- local maxima ------------------------------------------------------------------------
    field = rng.random((side, side), dtype=np.float32)
    threshold = 0.5
    kernel = np.ones((7, 7), np.uint8)
    if "local_maxima" in wanted:
        def with_cv2() -> np.ndarray:
            return np.argwhere((cv2.dilate(field, kernel) == field) & (field > threshold))

        peaks = ours["local_maxima"](field, 7, threshold)
        same = "same peaks as cv2" if np.array_equal(peaks, with_cv2()) else "PEAKS DIFFER from cv2"
        t_ours, t_filter, t_cv2 = fastest(lambda: ours["local_maxima"](field, 7, threshold),
                                          lambda: ours["fastest_maximum_filter"](field, 7), with_cv2, repeat=repeat)
        _row(f"local_maxima {side}^2 size 7", t_ours, "ours maximum_filter alone", t_filter, f"{len(peaks)} peaks")
        _row(f"local_maxima {side}^2 size 7", t_ours, "argwhere(cv2.dilate == f & f > t)", t_cv2, same)

    # ---- out= --------------------------------------------------------------------------------
    spots = rng.standard_normal((rows, 4)).astype(np.float32)
    unmix = rng.standard_normal((4, 4)).astype(np.float32)
    into = np.empty((rows, 4), np.float32)
    if "out" in wanted:
        t_ours, t_numpy = fastest(lambda: ours["matmul"](spots, unmix, out=into), lambda: spots @ unmix,
                                  repeat=repeat)
        _row(f"matmul ({rows / 1e6:g}e6 x 4) @ (4 x 4) into out=", t_ours, "numpy @ (a fresh result)", t_numpy)
        big = np.empty_like(field)
        t_ours, t_fresh = fastest(lambda: ours["maximum_filter"](field, 7, out=big),
                                  lambda: ours["maximum_filter"](field, 7), repeat=repeat)
        _row(f"maximum_filter {side}^2 size 7 into out=", t_ours, "ours, a fresh result", t_fresh)

    # ---- stacks ------------------------------------------------------------------------------
    plate = rng.random(plate_shape, dtype=np.float32)
    fields, plate_side = plate_shape[0], plate_shape[1]
    if "stacks" in wanted:
        t_stack, t_loop = fastest(lambda: ours["local_maxima"](plate, 7, threshold),
                                  lambda: [ours["local_maxima"](f, 7, threshold) for f in plate], repeat=repeat)
        _row(f"local_maxima, {fields} fields {plate_side}^2, one call", t_stack, f"{fields} calls", t_loop)
        t_stack, t_loop = fastest(lambda: ours["maximum_filter"](plate, 7),
                                  lambda: [ours["maximum_filter"](f, 7) for f in plate], repeat=repeat)
        _row(f"maximum_filter, {fields} fields {plate_side}^2, one call", t_stack, f"{fields} calls", t_loop)
    return 0


# ---- peers: the shipped CPU backends against pykdtree, faiss and OpenCV ----------------------------


def bare_gemm(source: np.ndarray, target: np.ndarray) -> Callable[[], object]:
    """The float32 product ``source @ target.T`` alone, no search: in the numba backend's tiles (the
    same blocking, into one preallocated tile), ``D`` deep where the search's is ``D + 1`` (it
    carries ``|t|^2`` as one more coordinate). What an exact search built on it cannot go below."""
    try:
        from spacr_accel_numba import _neighbours_kernels
        rows, columns = _neighbours_kernels._TILE_ROWS, _neighbours_kernels._TILE_COLUMNS
    except ImportError:
        rows, columns = 2048, 1024
    right = np.ascontiguousarray(target.T)
    tile = np.empty((rows, columns), dtype=np.float32)

    def gemm() -> None:
        n, m = source.shape[0], target.shape[0]
        for start in range(0, n, rows):
            for column in range(0, m, columns):
                block = tile[:min(n, start + rows) - start, :min(m, column + columns) - column]
                np.matmul(source[start:start + rows], right[:, column:column + block.shape[1]], out=block)

    return gemm


FIRST_CALLS = """
import sys, time
sys.path.insert(0, {here!r})
import numpy as np
from _timing import side_by_side
t = time.perf_counter()
from spacr_accel_core import ops
ops.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
discovery = time.perf_counter() - t
rng = np.random.default_rng(0)
s = rng.uniform(0, 2048, ({points}, 2)).astype(np.float32)
f = rng.random(({side}, {side}), dtype=np.float32)
m = rng.standard_normal((10_000, 4)).astype(np.float32)
def calls():
    ops.nearest_neighbours(s, s[::-1])
    ops.maximum_filter(f, 15)
    ops.matmul(m, m[:4])
t0 = time.perf_counter(); calls(); t1 = time.perf_counter()
warm = side_by_side({{"warm": calls}}, 3)["warm"].best
print(discovery, (t1 - t0) - warm)
"""
"""A fresh process: the registry's first dispatch, then the first primitive calls against warm ones."""


def first_call_overhead(quick: bool) -> tuple[float, float]:
    """``(discovery, primitives)``: seconds the registry's first dispatch takes (it imports every
    installed plugin), then what the first nearest/filter/matmul calls add over warm ones (our own
    lazy imports, scipy.spatial, the thread pool); the least of three fresh processes each."""
    code = FIRST_CALLS.format(here=str(HERE), points=2_000 if quick else 20_000, side=256 if quick else 1024)

    def fresh() -> tuple[float, ...]:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              check=True)
        return tuple(float(v) for v in done.stdout.split())

    runs = rounds({"fresh": fresh}, 3)["fresh"]
    return min(r[0] for r in runs), min(r[1] for r in runs)


def peers(wanted: set[str], repeat: int, quick: bool) -> int:
    import cv2
    import faiss
    from pykdtree.kdtree import KDTree

    os.environ.setdefault("SPACR_ACCEL_DISABLE", "opencv,openvino")  # ours: the shipped backends only
    from spacr_accel_core import last_dispatch, ops
    from spacr_accel_core.testing import reference_nearest
    try:
        import spacr_accel_numba
    except ImportError:
        print("spacr-accel-numba is not installed: the NumPy floor answers every row")
        from spacr_accel_numpy import window_maximum
    else:
        spacr_accel_numba.warm()
        from spacr_accel_numba import window_maximum

    rng = np.random.default_rng(0)
    points, wide_points, side, camera_side, rows = ((10_000, 2_000, 1024, 512, 400_000) if quick else
                                                    (100_000, 20_000, 4096, 2048, 4_000_000))
    thousands, wide_thousands = f"{points // 1000}k", f"{wide_points // 1000}k"
    print(f"peers; best of {repeat} interleaved repeats")
    print(f"{'workload':<58} {'ours ms':>8} {'peer':<22} {'peer ms':>8} {'ours/peer':>9}  exact")

    def row(name: str, ours: float, peer_name: str, peer: float, exact: str) -> None:
        served = last_dispatch()
        print(f"{name:<58} {ours * 1e3:8.1f} {peer_name:<22} {peer * 1e3:8.1f} {ours / peer:9.2f}  {exact}"
              f"  [{served.backend if served else '?'}]", flush=True)

    def check(source: np.ndarray, target: np.ndarray, index: np.ndarray, peer_index: np.ndarray) -> str:
        sample = rng.choice(source.shape[0], 2000, replace=False)
        want = reference_nearest(source[sample], target)[0]
        ours_ok = np.array_equal(index[sample], want)
        wrong = int(np.count_nonzero(peer_index[sample] != want))
        return f"{'yes' if ours_ok else 'NO'} (peer wrong on {wrong}/2000)"

    def nearest_row(name: str, source: np.ndarray, target: np.ndarray) -> None:
        ops.nearest_neighbours(source[:100], target[:100])
        tree_peer = lambda: KDTree(target).query(source, k=1)  # noqa: E731  (the peer as a user calls it)
        ours, peer = fastest(lambda: ops.nearest_neighbours(source, target), tree_peer, repeat=repeat)
        index, _ = ops.nearest_neighbours(source, target)
        peer_index = KDTree(target).query(source, k=1)[1].astype(np.int64)
        row(name, ours, "pykdtree (float32)", peer, check(source, target, index, peer_index))

    uniform_s = rng.uniform(0, 2048, (points, 2)).astype(np.float32)
    uniform_t = rng.uniform(0, 2048, (points, 2)).astype(np.float32)
    views = (uniform_s + rng.normal(0, 0.5, uniform_s.shape)).astype(np.float32)[rng.permutation(points)]
    solid_s = rng.uniform(0, 2048, (points, 3)).astype(np.float32)
    solid_t = rng.uniform(0, 2048, (points, 3)).astype(np.float32)
    if "nearest" in wanted:  # drawn all the same, so the wide points are the same either way
        nearest_row(f"nearest {thousands} x {thousands}, D=2, uniform", uniform_s, uniform_t)
        nearest_row(f"nearest {thousands} x {thousands}, D=2, two views of the same nuclei", uniform_s, views)
        nearest_row(f"nearest {thousands} x {thousands}, D=3", solid_s, solid_t)

    wide_s = rng.standard_normal((wide_points, 64)).astype(np.float32)
    wide_t = rng.standard_normal((wide_points, 64)).astype(np.float32)

    def flat() -> np.ndarray:
        index = faiss.IndexFlatL2(64)
        index.add(wide_t)
        return index.search(wide_s, 1)[1][:, 0]

    if "wide" in wanted:
        ours, peer, gemm = fastest(lambda: ops.nearest_neighbours(wide_s, wide_t), flat, bare_gemm(wide_s, wide_t),
                                   repeat=max(2, repeat - 2))
        index, _ = ops.nearest_neighbours(wide_s, wide_t)
        row(f"nearest {wide_thousands} x {wide_thousands}, D=64", ours, "faiss IndexFlatL2", peer,
            check(wide_s, wide_t, index, flat()))
        row("  the same, against the bare float32 GEMM it is built on", ours, "numpy sgemm, tiled", gemm, "")
        row("  faiss IndexFlatL2, against that GEMM", peer, "numpy sgemm, tiled", gemm, "")

    field = rng.random((side, side), dtype=np.float32)
    camera = rng.integers(0, 4096, (camera_side, camera_side)).astype(np.uint16)
    if "maximum_filter" in wanted:
        for size in (3, 15, 31):
            kernel = cv2.getStructuringElement(cv2.MORPH_RECT, (size, size))
            ops.maximum_filter(field[:64, :64], size)
            ours, peer = fastest(lambda s=size: ops.maximum_filter(field, s),
                                 lambda k=kernel: cv2.dilate(field, k, borderType=cv2.BORDER_REPLICATE),
                                 repeat=repeat)
            same = np.array_equal(ops.maximum_filter(field, size),
                                  cv2.dilate(field, kernel, borderType=cv2.BORDER_REPLICATE))
            row(f"maximum_filter {side}^2 float32, size {size}", ours, "cv2.dilate", peer,
                "yes (= cv2)" if same else "differs from cv2")

        kernel = cv2.getStructuringElement(cv2.MORPH_RECT, (5, 5))

        def dilate_cast() -> np.ndarray:
            return cv2.dilate(camera, kernel, borderType=cv2.BORDER_REPLICATE).astype(np.float32)

        ops.maximum_filter(camera[:64, :64], 5)
        ours, peer = fastest(lambda: ops.maximum_filter(camera, 5), dilate_cast, repeat=repeat)
        same = np.array_equal(ops.maximum_filter(camera, 5), dilate_cast())
        row(f"maximum_filter {camera_side}^2 uint16, size 5 (through ops)", ours, "cv2.dilate u16 + cast", peer,
            "yes (= cv2)" if same else "differs")
        ours, peer = fastest(lambda: window_maximum(camera, 5), dilate_cast, repeat=repeat)
        same = np.array_equal(window_maximum(camera, 5), dilate_cast())
        row(f"maximum_filter {camera_side}^2 uint16, size 5 (backend, uint16 in)", ours, "cv2.dilate u16 + cast",
            peer, "yes (= cv2)" if same else "differs")

    tall = rng.standard_normal((rows, 4)).astype(np.float32)
    small = rng.standard_normal((4, 4)).astype(np.float32)
    if "matmul" in wanted:
        ops.matmul(tall[:8], small)
        ours, peer = fastest(lambda: ops.matmul(tall, small), lambda: tall @ small, repeat=2 * repeat + 1)
        row(f"matmul ({rows / 1e6:g}e6 x 4) @ (4 x 4)", ours, "numpy @", peer, "= numpy @" if np.array_equal(
            ops.matmul(tall, small), tall @ small) else "differs")

    if "first_call" in wanted:
        discovery, first = first_call_overhead(quick)
        print(f"fresh process: registry discovery {discovery:.3f} s; first primitive calls over warm ones "
              f"{first:.3f} s (target <= 0.5)")
    return 0


# ---- ties: duplicate and tie-heavy points --------------------------------------------------------------

TIE_TARGET = 3.0
"""The most a backend may take over the KD-tree on a tie-heavy input."""


def tie_cases(quick: bool) -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    scale = 10 if quick else 1
    out = []
    count = 10_000 // scale
    same = np.full((count, 2), 7.0)
    out.append((f"{count // 1000}k identical points x the same, D=2", same, same))
    count = 30_000 // scale
    same30 = np.full((count, 2), 7.0)
    out.append((f"{count // 1000}k identical points x the same, D=2", same30, same30))
    # Distinct in float64, one point once rounded to float32 (its spacing at 1e7 is 1.0).
    count = 20_000 // scale
    jitter_s = 1e7 + rng.uniform(0, 1e-3, (count, 2))
    jitter_t = 1e7 + rng.uniform(0, 1e-3, (count, 2))
    out.append((f"1e7 + 1e-3 jitter (equal in float32), {count // 1000}k x {count // 1000}k, D=2", jitter_s, jitter_t))

    def cluster_and_outliers(count: int) -> np.ndarray:
        points = rng.normal(0.0, 1e-3, (count, 8))
        far = rng.choice(count, count // 100, replace=False)
        points[far] = rng.normal(0.0, 1e4, (far.size, 8))
        return points

    count = 30_000 // scale
    out.append((f"tight cluster + far outliers, D=8, {count // 1000}k x {count // 1000}k",
                cluster_and_outliers(count), cluster_and_outliers(count)))
    centres = rng.uniform(0, 1000, (50, 3))

    def clusters(count: int) -> np.ndarray:
        return centres[rng.integers(0, 50, count)] + rng.normal(0.0, 1.0, (count, 3))

    count = 100_000 // scale
    out.append((f"50 clusters, D=3, {count // 1000}k x {count // 1000}k", clusters(count), clusters(count)))
    return out


def ties(backends: list[str], repeat: int, quick: bool) -> int:
    if len(backends) > 1:
        # One process per backend: torch's idle OpenMP threads keep spinning after its calls and
        # would slow the NumPy backend's (and the KD-tree's) threads measured after them.
        command = [sys.executable, __file__, "--only", "ties", "--repeat", str(repeat)] + (["--quick"] if quick else [])
        return max(subprocess.run([*command, "--backends", name], check=False).returncode for name in backends)

    from scipy.spatial import cKDTree

    from spacr_accel_core import ops
    from spacr_accel_core.testing import reference_nearest

    ok = True
    rng = np.random.default_rng(1)
    for backend in backends:
        ops.nearest_neighbours(np.zeros((300, 2)), np.ones((300, 2)), backend=backend)  # imports, discovery
    print(f"{'case':<56} {'backend':<7} {'ours s':>8} {'kd s':>8} {'ratio':>7}  exact")
    for name, source, target in tie_cases(quick):
        for backend in backends:
            ours, kd = fastest(lambda s=source, t=target, b=backend: ops.nearest_neighbours(s, t, backend=b),
                               lambda s=source, t=target: cKDTree(t).query(s, k=1), repeat=repeat)
            index, distance = ops.nearest_neighbours(source, target, backend=backend)
            rows = rng.choice(source.shape[0], 200, replace=False)
            want_index, want_distance = reference_nearest(source[rows], target)
            exact = bool(np.array_equal(index[rows], want_index) and np.array_equal(distance[rows], want_distance))
            ratio = ours / kd
            passed = exact and ratio <= TIE_TARGET
            ok = ok and passed
            print(f"{name:<56} {backend:<7} {ours:8.3f} {kd:8.3f} {ratio:7.2f}  {'yes' if exact else 'NO'}"
                  f"{'' if passed else '   FAIL'}", flush=True)
    print(f"target: ratio <= {TIE_TARGET} and exact on a 200-row sample")
    return 0 if ok else 1


# ---- torch on the CPU against numba ------------------------------------------------------------------


def same(first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray]) -> bool:
    return bool(np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1]))


_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8",
          "avx512_vpopcntdq")
"""The flags behind the products' speeds (numba's popcount vectorizes with ``avx512_vpopcntdq``)."""


def _cpuinfo() -> dict[str, str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            text = info.read()
    except OSError:
        return {}
    first = text.split("\n\n", 1)[0]
    return {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in first.splitlines())}


def cpu_model() -> str:
    import platform

    return _cpuinfo().get("model name") or platform.processor() or platform.machine()


def cpu_flags() -> str:
    """Each of :data:`_FLAGS` with ``+`` (present) or ``-``, from ``/proc/cpuinfo`` (Linux)."""
    have = set(_cpuinfo().get("flags", "").split())
    if not have:
        return "unknown (no /proc/cpuinfo)"
    return " ".join(("+" if flag in have else "-") + flag for flag in _FLAGS)


def _hamming_call(ops: Any, bits: np.ndarray, other: np.ndarray, k: int, bound: float | None,
                  **options: Any) -> Any:
    return ops.nearest_neighbours(bits, other, k=k, max_distance=bound, metric="hamming", **options)


def torch_cpu(wanted: set[str], repeat: int, points: int, descriptors: int) -> int:
    import torch

    from spacr_accel_core import ops, warm_up

    warm_up()  # numba compiles its kernels in the background: wait, so compile time is not timed
    rng = np.random.default_rng(0)
    source = rng.uniform(0, 10_000, (points, 2)).astype(np.float32)
    target = rng.uniform(0, 10_000, (points, 2)).astype(np.float32)
    bits = rng.integers(0, 256, (descriptors, 32), dtype=np.uint8)
    other = rng.integers(0, 256, (descriptors, 32), dtype=np.uint8)
    cases: list[tuple[str, Callable[..., Any]]] = []
    if "torch_nearest" in wanted:
        cases.append((f"nearest k=4, N=M={points:,} D=2",
                      lambda **o: ops.nearest_neighbours(source, target, k=4, **o)))
    size = f"{descriptors // 1000}k x {descriptors // 1000}k x 32 B"
    for k, bound in ((1, None), (2, None), (4, None), (2, 64)) if "torch_hamming" in wanted else ():
        within = "" if bound is None else f" <= {bound}"
        cases.append((f"Hamming k={k}{within}, {size}",
                      functools.partial(_hamming_call, ops, bits, other, k, bound)))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; torch forced onto the CPU (gpu=False)")
    print(f"CPU: {cpu_model()}; flags: {cpu_flags()}")
    from spacr_accel_torch import _neighbours_kernels
    from spacr_accel_torch._runtime import Device

    print(f"torch's Hamming product on this CPU: {_neighbours_kernels._plan(Device(torch.device('cpu'), True))[0]}")
    print(f"{'call':<44} {'numba s':>9} {'torch s':>9} {'torch/numba':>12} {'target':>7} {'agrees':>7}")
    failed = False
    for label, call in cases:
        floor = call(backend="numpy")
        by_numba = call(backend="numba")
        by_torch = call(backend="torch", gpu=False)
        agrees = same(floor, by_numba) and same(floor, by_torch)
        numba_s, torch_s = fastest(functools.partial(call, backend="numba"),
                                   functools.partial(call, backend="torch", gpu=False), repeat=repeat)
        ratio = torch_s / numba_s
        failed |= ratio > 3.0 or not agrees
        print(f"{label:<44} {numba_s:>9.3f} {torch_s:>9.3f} {ratio:>11.1f}x {'<= 3x':>7} "
              f"{'yes' if agrees else 'NO':>7}", flush=True)
    return 1 if failed else 0


# ---- the run -------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="+", choices=(*GROUPS, *SECTIONS), default=list(GROUPS),
                        help="the sections to run, or whole groups (default: every group)")
    parser.add_argument("--repeat", type=int, default=None,
                        help="interleaved repeats; the best of each is kept (default 3; 5 for the peers)")
    parser.add_argument("--quick", action="store_true", help="a tenth of the points, smaller fields")
    parser.add_argument("--ops", action="store_true", help="the science rows through the public operations (ops_calls)")
    parser.add_argument("--backends", nargs="+", default=["numpy", "torch"], help="the backends the ties rows force")
    parser.add_argument("--points", type=int, default=None, help="N = M for the torch k=4 row (default 100,000)")
    parser.add_argument("--descriptors", type=int, default=None,
                        help="N = M for the torch Hamming rows (default 20,000)")
    args = parser.parse_args(argv)
    wanted = {section for name in args.only for section in GROUPS.get(name, (name,))}
    groups = [group for group, sections in GROUPS.items() if wanted & set(sections)]
    if len(groups) > 1:  # each group in a fresh process of its own (see the module's docstring)
        codes = []
        for group in groups:
            command = [sys.executable, __file__, "--only", *[s for s in GROUPS[group] if s in wanted]]
            command += ["--repeat", str(args.repeat)] if args.repeat else []
            command += ["--quick"] if args.quick else []
            command += ["--ops"] if args.ops else []
            command += ["--backends", *args.backends]
            command += ["--points", str(args.points)] if args.points else []
            command += ["--descriptors", str(args.descriptors)] if args.descriptors else []
            print(f"\n== {group}", flush=True)
            codes.append(subprocess.run(command, check=False).returncode)
        return max(codes)
    (group,) = groups
    if group == "science":
        return science(wanted, args.repeat or 3, args.ops, args.quick)
    if group == "peers":
        return peers(wanted, args.repeat or 5, args.quick)
    if group == "ties":
        return ties(args.backends, args.repeat or 3, args.quick)
    points = args.points or (10_000 if args.quick else 100_000)
    descriptors = args.descriptors or (2_000 if args.quick else 20_000)
    return torch_cpu(wanted, args.repeat or 3, points, descriptors)


if __name__ == "__main__":
    sys.exit(main())
