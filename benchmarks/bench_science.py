"""The calls a screen's analysis makes, against what a user would write instead: one run, side by side.

k nearest (the ratio test's k = 2, a neighbourhood's k = 4) against pykdtree and SciPy's cKDTree;
a ``max_distance`` search of two fields overlapping by half (a shifted second imaging cycle)
against the same search without one; mutual matching against two cKDTree queries and their
intersection; Hamming matching of ORB-like descriptors against OpenCV's ``BFMatcher`` and faiss's
``IndexBinaryFlat``; peaks as coordinates against the windowed maximum alone and against
``np.argwhere((cv2.dilate(f, k) == f) & (f > t))``; a matrix product into ``out=`` against NumPy's
``@``; a stack of 64 fields in one call against 64 calls.

Each row is a ratio "ours / peer" of the best of several interleaved repeats (the machine is
shared and noisy); the project's answers are checked exact against the plain reference
(:mod:`spacr_accel_core.reference`) on a sample, and where a peer's answer differs, the row says
how (a different neighbour at the same distance is a tie the peer broke otherwise).

"Ours" is :data:`OURS`, a table of callables: the compiled backend's functions called directly
(:func:`direct_calls`), or :func:`ops_calls`, the public operations with automatic dispatch.

    pip install -r benchmarks/requirements-peers.txt
    python benchmarks/bench_science.py             # about five minutes on 2 cores (the peers are slow)
    python benchmarks/bench_science.py --repeat 7  # steadier ratios
    python benchmarks/bench_science.py --ops       # through spacr_accel_core.ops
    python benchmarks/bench_science.py --only max_distance  # one section's rows (the same data)

Target: every ratio at most 1.0, but ``local_maxima / maximum_filter`` at most 1.1, ``max_distance
/ unbounded`` at most 0.7 and ``matmul out= / numpy @`` at most 0.75 (it prints, it does not assert).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

Calls = dict[str, Callable[..., Any]]

SECTIONS = ("k_nearest", "max_distance", "mutual", "hamming", "local_maxima", "out", "stacks")
"""The sections of rows, in the order they run; ``--only`` picks some (every section's data is still
drawn, so a row measures the same points whichever others run)."""


def direct_calls() -> Calls:
    """The numba backend's functions (and the NumPy floor's stack filter), called directly.

    Every entry takes the arguments of the public operation it stands for; ``k_nearest`` and
    ``hamming`` answer ``(N, k)`` for every ``k``.
    """
    from spacr_accel_numba import _hamming, _knearest, _peaks, nearest, warm
    from spacr_accel_numba import window_maximum as numba_filter
    from spacr_accel_numpy._peaks import maximum_filter_stack

    warm()
    for job in (_knearest.warm_job, _hamming.warm_job, _peaks.warm_job):
        job()

    return {
        "nearest": nearest,  # the compiled one-neighbour search ops.nearest_neighbours dispatches to
        "k_nearest": lambda s, t, k, max_distance=None: _knearest.k_nearest(s, t, k, max_distance),
        "hamming": lambda s, t, k, max_distance=None: _hamming.hamming_nearest(s, t, k, max_distance),
        "local_maxima": lambda f, size, threshold=None: _peaks.local_maxima(f, size, threshold),
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
"""What "ours" is: :func:`direct_calls` or :func:`ops_calls`."""


def _best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def side_by_side(contenders: list[Callable[[], object]], repeat: int) -> list[float]:
    """Best times of the callables, run alternately so all see the same machine load."""
    times: list[list[float]] = [[] for _ in contenders]
    for _ in range(repeat):
        for spent, fn in zip(times, contenders, strict=True):
            spent.append(_best(fn, 1))
    return [min(spent) for spent in times]


def _row(name: str, ours: float, peer_name: str, peer: float, note: str = "") -> None:
    print(f"{name:<44} {ours * 1e3:9.1f} ms  {peer_name:<30} {peer * 1e3:9.1f} ms  {ours / peer:5.2f}x  {note}")


def _differences(ours: np.ndarray, ours_d: np.ndarray, peer: np.ndarray, peer_d: np.ndarray) -> str:
    """How a peer's neighbours differ from ours: same distance (a tie broken otherwise) or not."""
    differ = ours != peer
    if not differ.any():
        return "peer identical"
    tied = np.isclose(ours_d[differ], peer_d[differ], rtol=1e-6, atol=0)
    return f"peer differs in {int(differ.sum())} (ties: {int(tied.sum())})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ops", action="store_true", help="measure the public operations (ops_calls)")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=SECTIONS, help="the sections to run")
    args = parser.parse_args()
    repeat = args.repeat
    wanted = set(args.only)

    import cv2
    import faiss
    from pykdtree.kdtree import KDTree
    from scipy.spatial import cKDTree

    from spacr_accel_core import reference

    calls = ops_calls if args.ops else OURS
    ours = calls()
    rng = np.random.default_rng(2024)
    print(f"ours: {calls.__name__}; best of {repeat} interleaved repeats\n")

    def exact(answer: tuple[np.ndarray, np.ndarray], expected: tuple[np.ndarray, np.ndarray]) -> str:
        same = np.array_equal(answer[0], expected[0]) and answer[1].tobytes() == expected[1].tobytes()
        return "exact" if same else "NOT EXACT"

    # ---- k nearest ---------------------------------------------------------------------------
    source = rng.random((100_000, 2)).astype(np.float32)
    target = rng.random((100_000, 2)).astype(np.float32)
    sample = source[:300]
    for k in (2, 4) if "k_nearest" in wanted else ():
        answer = ours["k_nearest"](source, target, k)
        verdict = exact((answer[0][:300], answer[1][:300]), reference.k_nearest(sample, target, k))
        t_ours, t_pyk, t_ck = side_by_side([
            lambda k=k: ours["k_nearest"](source, target, k),
            lambda k=k: KDTree(target).query(source, k=k),
            lambda k=k: cKDTree(target).query(source, k=k, workers=-1)], repeat)
        found_ck, index_ck = cKDTree(target).query(source, k=k, workers=-1)
        _row(f"k={k}, 100k x 100k, D=2", t_ours, "pykdtree (build + query)", t_pyk, verdict)
        _row(f"k={k}, 100k x 100k, D=2", t_ours, "cKDTree workers=-1", t_ck,
             _differences(answer[0], answer[1], index_ck, found_ck.astype(np.float32)))

    # ---- max_distance: a second field shifted by half its width ------------------------------
    shifted = (rng.random((100_000, 2)) + np.array([0.5, 0.0])).astype(np.float32)
    limit = 0.01  # about three typical spacings
    if "max_distance" in wanted:
        bounded = ours["k_nearest"](source, shifted, 1, limit)
        verdict = exact((bounded[0][:300], bounded[1][:300]), reference.k_nearest(sample, shifted, 1, limit))
        t_bounded, t_unbounded = side_by_side([lambda: ours["k_nearest"](source, shifted, 1, limit),
                                               lambda: ours["nearest"](source, shifted)], repeat)
        share = float(np.mean(bounded[0][:, 0] < 0))
        _row("k=1, max_distance=0.01, shifted half a field", t_bounded, "ours k=1 unbounded", t_unbounded,
             f"{verdict}; {share:.0%} unmatched")

    # ---- mutual matching ---------------------------------------------------------------------
    moved = (source + rng.normal(0, 0.001, source.shape)).astype(np.float32)

    def mutual_ours() -> np.ndarray:
        forward = ours["k_nearest"](source, moved, 1)[0][:, 0]
        backward = ours["k_nearest"](moved, source, 1)[0][:, 0]
        rows = np.flatnonzero(forward >= 0)
        return rows[backward[forward[rows]] == rows]

    def mutual_ckdtree() -> np.ndarray:
        forward = cKDTree(moved).query(source, workers=-1)[1]
        backward = cKDTree(source).query(moved, workers=-1)[1]
        return np.flatnonzero(backward[forward] == np.arange(len(source)))

    if "mutual" in wanted:
        t_ours, t_peer = side_by_side([mutual_ours, mutual_ckdtree], repeat)
        same = "same pairs" if np.array_equal(mutual_ours(), mutual_ckdtree()) else "pairs differ"
        _row("mutual, 100k x 100k, D=2", t_ours, "2 cKDTree queries + intersect", t_peer, same)

    # ---- Hamming -----------------------------------------------------------------------------
    first = rng.integers(0, 256, (20_000, 32), dtype=np.uint8)
    second = rng.integers(0, 256, (20_000, 32), dtype=np.uint8)
    if "hamming" in wanted:
        answer = ours["hamming"](first, second, 1)
        verdict = exact((answer[0][:200], answer[1][:200]), reference.hamming_nearest(first[:200], second, 1))
        matcher = cv2.BFMatcher(cv2.NORM_HAMMING)

        def faiss_search() -> tuple[np.ndarray, np.ndarray]:
            index = faiss.IndexBinaryFlat(256)
            index.add(second)
            return index.search(first, 1)

        t_ours, t_bf, t_faiss = side_by_side([lambda: ours["hamming"](first, second, 1),
                                              lambda: matcher.match(first, second), faiss_search], repeat)
        matches = matcher.match(first, second)
        bf_index = np.array([m.trainIdx for m in matches])
        bf_found = np.array([m.distance for m in matches], dtype=np.float32)
        faiss_found, faiss_index = faiss_search()
        _row("Hamming k=1, 20k x 20k x 32 bytes", t_ours, "cv2.BFMatcher(NORM_HAMMING)", t_bf,
             f"{verdict}; {_differences(answer[0][:, 0], answer[1][:, 0], bf_index, bf_found)}")
        _row("Hamming k=1, 20k x 20k x 32 bytes", t_ours, "faiss.IndexBinaryFlat", t_faiss,
             _differences(answer[0][:, 0], answer[1][:, 0], faiss_index[:, 0], faiss_found[:, 0].astype(np.float32)))
        t_ours, t_bf = side_by_side([lambda: ours["hamming"](first, second, 2),
                                     lambda: matcher.knnMatch(first, second, k=2)], repeat)
        _row("Hamming k=2 (ratio test)", t_ours, "cv2.BFMatcher.knnMatch k=2", t_bf)

    # ---- local maxima ------------------------------------------------------------------------
    field = rng.random((4096, 4096), dtype=np.float32)
    threshold = 0.5
    kernel = np.ones((7, 7), np.uint8)
    if "local_maxima" in wanted:
        def with_cv2() -> np.ndarray:
            return np.argwhere((cv2.dilate(field, kernel) == field) & (field > threshold))

        peaks = ours["local_maxima"](field, 7, threshold)
        same = "same peaks as cv2" if np.array_equal(peaks, with_cv2()) else "PEAKS DIFFER from cv2"
        t_ours, t_filter, t_cv2 = side_by_side([lambda: ours["local_maxima"](field, 7, threshold),
                                                lambda: ours["fastest_maximum_filter"](field, 7), with_cv2], repeat)
        _row("local_maxima 4096^2 size 7", t_ours, "ours maximum_filter alone", t_filter, f"{len(peaks)} peaks")
        _row("local_maxima 4096^2 size 7", t_ours, "argwhere(cv2.dilate == f & f > t)", t_cv2, same)

    # ---- out= --------------------------------------------------------------------------------
    spots = rng.standard_normal((4_000_000, 4)).astype(np.float32)
    unmix = rng.standard_normal((4, 4)).astype(np.float32)
    into = np.empty((4_000_000, 4), np.float32)
    if "out" in wanted:
        t_ours, t_numpy = side_by_side([lambda: ours["matmul"](spots, unmix, out=into), lambda: spots @ unmix], repeat)
        _row("matmul (4e6 x 4) @ (4 x 4) into out=", t_ours, "numpy @ (a fresh result)", t_numpy)
        big = np.empty_like(field)
        t_ours, t_fresh = side_by_side([lambda: ours["maximum_filter"](field, 7, out=big),
                                        lambda: ours["maximum_filter"](field, 7)], repeat)
        _row("maximum_filter 4096^2 size 7 into out=", t_ours, "ours, a fresh result", t_fresh)

    # ---- stacks ------------------------------------------------------------------------------
    plate = rng.random((64, 512, 512), dtype=np.float32)
    if "stacks" in wanted:
        t_stack, t_loop = side_by_side([lambda: ours["local_maxima"](plate, 7, threshold),
                                        lambda: [ours["local_maxima"](f, 7, threshold) for f in plate]], repeat)
        _row("local_maxima, 64 fields 512^2, one call", t_stack, "64 calls", t_loop)
        t_stack, t_loop = side_by_side([lambda: ours["maximum_filter"](plate, 7),
                                        lambda: [ours["maximum_filter"](f, 7) for f in plate]], repeat)
        _row("maximum_filter, 64 fields 512^2, one call", t_stack, "64 calls", t_loop)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
