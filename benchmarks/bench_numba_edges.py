"""The numba backend at its edges: sources far from every target, sources in an empty hole, forks.

Two parts, each printing measured numbers (it prints, it does not assert):

- **Far sources and holes.** The numba backend (``backend="numba"``, its kernels compiled first)
  against the NumPy floor (``backend="numpy"``, the KD-tree) on the same inputs, side by side in
  one process (best of ``--repeat`` interleaved runs); every answer is checked equal to the floor's,
  bit for bit. Target: numba at most 1.2x the floor on each row. The uniform 100k x 100k row is
  also measured against pykdtree (``pip install -r benchmarks/requirements-peers.txt``); target:
  numba at most 0.8x pykdtree.
- **Forks during the warm-up.** Fresh interpreters start numba's background warm-up and fork at
  random moments of it (``--forks`` children in all); each child times its first calls (answered
  exactly, by the floor while its own kernels compile, within 2 s), then ``warm()`` without a
  timeout must return and numba must answer exactly. Target: every child, within 2 s.

    python benchmarks/bench_numba_edges.py                # about a minute on 2 cores
    python benchmarks/bench_numba_edges.py --part far     # or --part fork
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap

import numpy as np

FIELD = 2048.0
"""A field's edge in pixels: the targets lie uniformly in a FIELD x FIELD square (a cube in 3-D)."""


def _holed(rng: np.random.Generator, count: int, radius: float, dims: int) -> np.ndarray:
    """``count`` points uniform in the field, none within ``radius`` of its centre."""
    kept: list[np.ndarray] = []
    total = 0
    while total < count:
        points = rng.uniform(0, FIELD, (2 * count, dims))
        points = points[np.linalg.norm(points - FIELD / 2, axis=1) > radius]
        kept.append(points)
        total += len(points)
    return np.concatenate(kept)[:count].astype(np.float32)


def _inside(rng: np.random.Generator, count: int, radius: float, dims: int) -> np.ndarray:
    """``count`` points uniform in the ball of ``radius`` around the field's centre."""
    direction = rng.standard_normal((count, dims))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    length = radius * rng.random(count) ** (1 / dims)
    return (FIELD / 2 + direction * length[:, None]).astype(np.float32)


def cases(rng: np.random.Generator) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(name, source, target)`` of each far-source and hole workload."""
    plane = rng.uniform(0, FIELD, (100_000, 2)).astype(np.float32)
    million = rng.uniform(0, FIELD, (1_000_000, 2)).astype(np.float32)
    cube = rng.uniform(0, FIELD, (100_000, 3)).astype(np.float32)

    def shifted(count: int, dims: int, offset: list[float]) -> np.ndarray:
        # A field's worth of sources moved off: a gap of offset - FIELD to the targets.
        return (rng.uniform(0, FIELD, (count, dims)) + np.asarray(offset) * FIELD).astype(np.float32)

    return [
        ("100k targets, 300 sources 1.5 heights above", shifted(300, 2, [0, 2.5]), plane),
        ("100k targets, 1,000 sources 2 heights aside", shifted(1000, 2, [3, 0]), plane),
        ("100k targets, 1,000 sources 2 heights off a corner", shifted(1000, 2, [-3, -3]), plane),
        ("1e6 targets, 10 sources 1.5 heights below", shifted(10, 2, [0, -2.5]), million),
        ("20k targets, 5,000 sources in an empty hole (r = 0.25)",
         _inside(rng, 5000, 0.25 * FIELD, 2), _holed(rng, 20_000, 0.25 * FIELD, 2)),
        ("20k targets, 5,000 sources in an empty hole (r = 0.45)",
         _inside(rng, 5000, 0.45 * FIELD, 2), _holed(rng, 20_000, 0.45 * FIELD, 2)),
        ("100k targets in 3-D, 300 sources 1.5 edges above", shifted(300, 3, [0, 0, 2.5]), cube),
        ("20k targets in 3-D, 5,000 sources in an empty ball (r = 0.3)",
         _inside(rng, 5000, 0.3 * FIELD, 3), _holed(rng, 20_000, 0.3 * FIELD, 3)),
        ("100k targets, 100k sources, half of them 1.5 heights above",
         np.concatenate([plane[:50_000] + 0.25, shifted(50_000, 2, [0, 2.5])]).astype(np.float32), plane),
    ]


def far_part(repeat: int) -> None:
    # The timer is imported here, not at the top: tests/numba_cache_warm loads this file by its path for
    # its forking script, without this folder on sys.path.
    from _timing import fastest  # the benchmarks' one timer, beside this file

    import spacr_accel_numba
    from spacr_accel_core import last_dispatch, ops

    if not spacr_accel_numba.warm(timeout=600):
        print(f"numba cannot run here: {spacr_accel_numba.failure()}")
        return
    rng = np.random.default_rng(0)
    print(f"{'workload':<62} {'numba ms':>9} {'floor ms':>9} {'numba/floor':>11}  exact")
    for name, source, target in cases(rng):
        index, distance = ops.nearest_neighbours(source, target, backend="numba")
        served = last_dispatch()
        floor_index, floor_distance = ops.nearest_neighbours(source, target, backend="numpy")
        exact = np.array_equal(index, floor_index) and distance.tobytes() == floor_distance.tobytes()
        ours, floor = fastest(lambda s=source, t=target: ops.nearest_neighbours(s, t, backend="numba"),
                              lambda s=source, t=target: ops.nearest_neighbours(s, t, backend="numpy"),
                              repeat=repeat)  # interleaved: the machine's load hits both alike
        print(f"{name:<62} {ours * 1e3:9.1f} {floor * 1e3:9.1f} {ours / floor:11.2f}  "
              f"{'yes' if exact else 'NO'}  [{served.backend if served else '?'}]", flush=True)

    try:
        from pykdtree.kdtree import KDTree
    except ImportError:
        print("pykdtree is not installed: pip install -r benchmarks/requirements-peers.txt")
        return
    source = rng.uniform(0, FIELD, (100_000, 2)).astype(np.float32)
    target = rng.uniform(0, FIELD, (100_000, 2)).astype(np.float32)
    ours, peer = fastest(lambda: ops.nearest_neighbours(source, target, backend="numba"),
                         lambda: KDTree(target).query(source, k=1), repeat=repeat)
    print(f"{'uniform 100k x 100k, D=2 (against pykdtree, float32)':<62} {ours * 1e3:9.1f} {peer * 1e3:9.1f} "
          f"{ours / peer:11.2f}  (numba/pykdtree)", flush=True)


FORKING = """
# Forked children at the given moments of the warm-up; each says how it answered (also the script of
# tests/numba_cache_warm/test_numba_fork.py, which asserts what this benchmark prints).
import os, sys, time
import numpy as np
from spacr_accel_core import ops
import spacr_accel_numba
delays = [float(d) for d in sys.argv[1:]]
rng = np.random.default_rng(len(delays))
plane = rng.uniform(0, 100, (3000, 2))
cube = rng.uniform(0, 100, (3000, 3)).astype(np.float32)
wide = rng.standard_normal((400, 16)).astype(np.float32)
field = rng.standard_normal((96, 96)).astype(np.float32)
calls = [lambda b: ops.nearest_neighbours(plane[:500], plane, backend=b),
         lambda b: ops.nearest_neighbours(plane[:40] + 500.0, plane, backend=b),
         lambda b: ops.nearest_neighbours(cube[:500], cube[::-1], backend=b),
         lambda b: ops.nearest_neighbours(wide[:50], wide, backend=b),
         lambda b: ops.maximum_filter(field, 7, backend=b),
         lambda b: ops.maximum_filter((field * 40).astype(np.uint8), 5, backend=b),
         lambda b: ops.maximum_filter((field * 900).astype(np.uint16), 5, backend=b)]
def flat(answer):
    return b"".join(a.tobytes() for a in answer) if isinstance(answer, tuple) else answer.tobytes()
expected = [flat(call("numpy")) for call in calls]
def say(line):  # one write: the children's lines never interleave
    os.write(1, (line + "\\n").encode())
def child():
    start = time.perf_counter()
    exact = all(flat(call(None)) == want for call, want in zip(calls, expected))
    say(f"answered {exact} {time.perf_counter() - start:.3f}")
    ready = spacr_accel_numba.warm()  # no timeout: it must return in a child too
    by_numba = ready and all(flat(call("numba")) == want for call, want in zip(calls, expected))
    say(f"warmed {ready} {by_numba} {spacr_accel_numba.failure()} {time.perf_counter() - start:.2f}")
    os._exit(0)
start = time.perf_counter()
ops.nearest_neighbours(plane[:10], plane)  # the first call: the warm-up starts
children = []
for delay in delays:
    time.sleep(max(0.0, delay - (time.perf_counter() - start)))
    pid = os.fork()
    if pid == 0:
        child()
    children.append(pid)
deadline = time.perf_counter() + LIMIT
while children and time.perf_counter() < deadline:
    children = [pid for pid in children if os.waitpid(pid, os.WNOHANG)[0] == 0]
    time.sleep(0.05)
for pid in children:  # hung: killed, and reported by the lines they never printed
    os.kill(pid, 9)
    os.waitpid(pid, 0)
say(f"parent {spacr_accel_numba.warm(timeout=LIMIT)}")
"""


def forking_script(limit: float) -> str:
    """The script of :data:`FORKING`, children killed (and the parent's warm-up given up) after ``limit`` s;
    run as ``python -c SCRIPT DELAY ...``."""
    return textwrap.dedent(FORKING).replace("LIMIT", repr(limit))


def fork_part(forks: int, per_parent: int, span: float, limit: float) -> None:
    """``forks`` children, ``per_parent`` from each fresh parent at random moments of its first
    ``span`` seconds (the warm-up's length from numba's cache), each killed after ``limit`` s."""
    rng = np.random.default_rng()
    answered: list[float] = []
    warmed: list[float] = []
    inexact = lost = 0
    script = forking_script(limit)
    for first in range(0, forks, per_parent):
        delays = sorted(rng.uniform(0, span, min(per_parent, forks - first)))
        done = subprocess.run([sys.executable, "-c", script, *map(str, delays)], capture_output=True, text=True,
                              timeout=limit + 120, env=os.environ.copy(), check=False)
        for kind, *fields in (line.split() for line in done.stdout.splitlines()):
            if kind == "answered":
                inexact += fields[0] != "True"
                answered.append(float(fields[1]))
            elif kind == "warmed":
                lost += fields[:2] != ["True", "True"]
                warmed.append(float(fields[3]))
    within = sum(1 for seconds in answered if seconds <= 2.0)
    print(f"forks at random moments of the warm-up: {within} of {forks} children answered within 2 s "
          f"(slowest {max(answered, default=float('nan')):.3f} s, {inexact} inexactly, {forks - len(answered)} "
          f"never); warm() returned in {len(warmed)} of {forks} (slowest "
          f"{max(warmed, default=float('nan')):.2f} s), {lost} of them without numba answering exactly",
          flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=["far", "fork", "all"], default="all")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--forks", type=int, default=20)
    args = parser.parse_args()
    if args.part in {"far", "all"}:
        far_part(args.repeat)
    if args.part in {"fork", "all"}:
        fork_part(args.forks, per_parent=4, span=2.0, limit=30.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
