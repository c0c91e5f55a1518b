"""The NumPy backend's performance targets, each a ratio measured side by side in one run.

These machines are shared and noisy, so nothing here is an absolute time: every target is the
ratio of two things timed alternately in the same process (best of a few repeats).

    python benchmarks/bench_numpy.py            # all of it, about two minutes on 2 cores
    python benchmarks/bench_numpy.py --quick    # smaller KD-tree extrapolation sample
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap

import numpy as np
from _timing import fastest, rounds, side_by_side  # the benchmarks' one timer, beside this file

from spacr_accel_core import ops
from spacr_accel_core.testing import reference_nearest


def broadcast_chunk(source: np.ndarray, target: np.ndarray) -> None:
    """One chunk of the plain NumPy search: a full (chunk, M, D) broadcast, then argmin."""
    diff = source[:, None, :] - target[None, :, :]
    squared = (diff * diff).sum(-1)
    np.argmin(squared, axis=1)


def peak_rss_above_inputs() -> float:
    """MiB of peak resident memory the 100k x 100k, D=2 search adds above its inputs."""
    code = textwrap.dedent(
        """
        import numpy as np
        from spacr_accel_core import ops
        rng = np.random.default_rng(0)
        s = rng.uniform(0, 2048, (100_000, 2)).astype(np.float32)
        t = rng.uniform(0, 2048, (100_000, 2)).astype(np.float32)
        ops.nearest_neighbours(s[:10], t[:10])  # discovery and imports, outside the measurement
        import scipy.spatial  # noqa: F401  (loaded before the measurement, never used by name)
        def status(key):
            for line in open("/proc/self/status"):
                if line.startswith(key):
                    return int(line.split()[1])
        base = status("VmRSS:")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak (VmHWM) to the current resident set
        ops.nearest_neighbours(s, t)
        print((status("VmHWM:") - base) / 1024)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def import_overhead_ms() -> tuple[float, bool]:
    """Milliseconds `import spacr_accel_core.ops` adds over `import numpy`; and heavy imports seen."""
    code = textwrap.dedent(
        """
        import sys, time
        t0 = time.perf_counter(); import numpy; t1 = time.perf_counter()
        import spacr_accel_core.ops; t2 = time.perf_counter()
        heavy = any(m in sys.modules for m in ("torch", "cupy", "scipy.spatial", "scipy"))
        print((t2 - t1) * 1000, heavy)
        """
    )
    def fresh() -> tuple[float, bool]:
        ms, flag = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  check=True).stdout.split()
        return float(ms), flag == "True"

    runs = rounds({"fresh": fresh}, 5)["fresh"]
    return min(ms for ms, _ in runs), any(heavy for _, heavy in runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows: list[tuple[str, float, str, bool]] = []

    def report(name: str, value: float, target: str, ok: bool) -> None:
        rows.append((name, value, target, ok))
        if not args.json:
            print(f"{'PASS' if ok else 'FAIL'}  {name:<62} {value:>12.3f}   target {target}", flush=True)

    from scipy.spatial import cKDTree

    # 1. nearest, 100k x 100k, D = 2
    source = rng.uniform(0, 2048, (100_000, 2)).astype(np.float32)
    target = rng.uniform(0, 2048, (100_000, 2)).astype(np.float32)
    ops.nearest_neighbours(source[:100], target[:100], backend="numpy")
    ours, kd = fastest(lambda: ops.nearest_neighbours(source, target, backend="numpy"),
                       lambda: cKDTree(target).query(source, k=1), repeat=3)
    chunk = 256  # a 4096-row chunk of the broadcast needs 9.2 GiB; time smaller ones and extrapolate
    (broadcast_time,) = fastest(lambda: broadcast_chunk(source[:chunk], target), repeat=2)
    broadcast_total = broadcast_time * (source.shape[0] / chunk)
    speedup = broadcast_total / ours
    report("nearest 100k x 100k D=2: broadcast brute force / ours (x)", speedup, ">= 1000", speedup >= 1000)
    report("nearest 100k x 100k D=2: ours / cKDTree(target).query(k=1)", ours / kd, "<= 1.3", ours / kd <= 1.3)
    index, _ = ops.nearest_neighbours(source, target, backend="numpy")
    sample = rng.choice(source.shape[0], 300, replace=False)
    exact = np.array_equal(index[sample], reference_nearest(source[sample], target)[0])
    report("nearest 100k x 100k D=2: exact on a 300-row sample (1 = yes)", float(exact), "== 1", exact)
    peak = peak_rss_above_inputs()
    report("nearest 100k x 100k D=2: peak MiB above the inputs", peak, "<= 200", peak <= 200)

    # 2. nearest, 20k x 20k, D = 64
    wide_source = rng.standard_normal((20_000, 64)).astype(np.float32)
    wide_target = rng.standard_normal((20_000, 64)).astype(np.float32)
    (wide,) = fastest(lambda: ops.nearest_neighbours(wide_source, wide_target, backend="numpy"), repeat=2)
    part = 500 if args.quick else 2000
    tree = cKDTree(wide_target.astype(np.float64))
    kd_build, kd_query = fastest(lambda: cKDTree(wide_target.astype(np.float64)),
                                 lambda: tree.query(wide_source[:part].astype(np.float64), k=1), repeat=1)
    kd_wide = kd_build + kd_query * wide_source.shape[0] / part
    report("nearest 20k x 20k D=64: KD-tree / ours (x)", kd_wide / wide, ">= 10", kd_wide / wide >= 10)
    wide_index, _ = ops.nearest_neighbours(wide_source, wide_target, backend="numpy")
    wide_sample = rng.choice(wide_source.shape[0], 300, replace=False)
    wide_exact = np.array_equal(wide_index[wide_sample],
                                reference_nearest(wide_source[wide_sample], wide_target)[0])
    report("nearest 20k x 20k D=64: exact on a 300-row sample (1 = yes)", float(wide_exact), "== 1", wide_exact)

    # 3. maximum_filter, 4096 x 4096, size 15
    from scipy import ndimage

    field = rng.random((4096, 4096), dtype=np.float32)
    ops.maximum_filter(field[:64, :64], 15, backend="numpy")
    ours_mf, scipy_mf = fastest(lambda: ops.maximum_filter(field, 15, backend="numpy"),
                                lambda: ndimage.maximum_filter(field, 15, mode="nearest"), repeat=5)
    report("maximum_filter 4096^2 size 15: scipy / ours (x)", scipy_mf / ours_mf, ">= 10", scipy_mf / ours_mf >= 10)
    same = np.array_equal(ops.maximum_filter(field, 15, backend="numpy"),
                          ndimage.maximum_filter(field, 15, mode="nearest"))
    report("maximum_filter 4096^2 size 15: equal to scipy (1 = yes)", float(same), "== 1", same)

    # 4. matmul
    tall = rng.standard_normal((4_000_000, 4)).astype(np.float32)
    small = rng.standard_normal((4, 4)).astype(np.float32)
    ours_mm, numpy_mm = fastest(lambda: ops.matmul(tall, small), lambda: tall @ small, repeat=9)
    report("matmul (4e6 x 4) @ (4 x 4): ours / numpy @", ours_mm / numpy_mm, "<= 1.2", ours_mm / numpy_mm <= 1.2)
    tile, mix = tall[:8].copy(), small
    ops.matmul(tile, mix)
    tiny = side_by_side({"ops": lambda: ops.matmul(tile, mix), "numpy": lambda: tile @ mix}, 5, each=20_000)
    per_tile = tiny["ops"].best * 1e6
    report("matmul (8 x 4) @ (4 x 4) through ops: us per call", per_tile, "<= 5", per_tile <= 5)
    report("matmul (8 x 4) @ (4 x 4) numpy @ alone: us per call", tiny["numpy"].best * 1e6, "(reference)", True)

    # 5. import cost
    overhead, heavy = import_overhead_ms()
    report("import spacr_accel_core.ops over import numpy: ms", overhead, "<= 50", overhead <= 50)
    report("import spacr_accel_core.ops imports torch/cupy/scipy (1 = yes)", float(heavy), "== 0", not heavy)

    if args.json:
        print(json.dumps([{"name": n, "value": v, "target": t, "ok": ok} for n, v, t, ok in rows], indent=2))
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
