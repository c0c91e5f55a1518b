#!/usr/bin/env python3
"""The torch backend forced onto the CPU against the plain torch code it replaces.

Measured side by side in one run, on the same inputs:

* ``maximum_filter`` on a 4096 x 4096 field, size 15: a full-window max-pool
  (``max_pool2d`` with a k x k kernel, stride 1, on a replicate-padded field) against
  ``ops.maximum_filter(..., backend="torch")``. Target: at least 2x.
* ``nearest_neighbours`` with N = M = 100,000 points in 2-D: the chunked ``cdist`` path
  (4096 source rows per chunk, ``cdist`` + ``argmin``; a few chunks timed and extrapolated to the
  whole set, since the full run takes minutes) against ``ops.nearest_neighbours(...,
  backend="torch")``, which must also be exact (equal to the NumPy backend). Target: at least 10x.

Run: ``python benchmarks/bench_torch_cpu.py`` (about a minute on two cores). Exits non-zero when
a target is missed or an answer differs.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from _timing import fastest, side_by_side  # the benchmarks' one timer, beside this file


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--side", type=int, default=4096, help="field edge (default 4096)")
    parser.add_argument("--size", type=int, default=15, help="window edge (default 15)")
    parser.add_argument("--points", type=int, default=100_000, help="N = M (default 100,000)")
    parser.add_argument("--cdist-chunks", type=int, default=3, help="cdist chunks to time (default 3)")
    args = parser.parse_args()

    import torch
    from torch.nn import functional

    from spacr_accel_core import ops

    rng = np.random.default_rng(0)
    field = rng.standard_normal((args.side, args.side)).astype(np.float32)
    radius = args.size // 2
    tensor = torch.from_numpy(field)

    def pooled_filter() -> torch.Tensor:
        padded = functional.pad(tensor[None, None], (radius,) * 4, mode="replicate")
        return functional.max_pool2d(padded, args.size, stride=1)[0, 0]

    ops.maximum_filter(field[:64, :64], args.size, backend="torch")  # discovery and warm-up
    ours = ops.maximum_filter(field, args.size, backend="torch")
    agree_filter = np.array_equal(ours, pooled_filter().numpy()) and np.array_equal(
        ours, ops.maximum_filter(field, args.size, backend="numpy"))
    pooled_f, ours_f = fastest(pooled_filter, lambda: ops.maximum_filter(field, args.size, backend="torch"), repeat=3)

    n = args.points
    source = rng.uniform(0, 10_000, (n, 2)).astype(np.float32)
    target = rng.uniform(0, 10_000, (n, 2)).astype(np.float32)
    s_t, t_t = torch.from_numpy(source), torch.from_numpy(target)
    chunk = 4096

    def cdist_chunk(start: int) -> None:
        distance = torch.cdist(s_t[start:start + chunk], t_t)
        index = distance.argmin(dim=1)
        distance.gather(1, index[:, None])

    cdist_chunk(0)  # warm-up
    starts = iter(range(0, args.cdist_chunks * chunk, chunk))  # each timed run the next chunk
    timed = side_by_side({"chunk": lambda: cdist_chunk(next(starts))}, args.cdist_chunks)
    cdist_n = timed["chunk"].median * (n / chunk)
    (ours_n,) = fastest(lambda: ops.nearest_neighbours(source, target, backend="torch"), repeat=2)
    index, distance = ops.nearest_neighbours(source, target, backend="torch")
    expected = ops.nearest_neighbours(source, target, backend="numpy")
    exact = np.array_equal(index, expected[0]) and np.array_equal(distance, expected[1])

    rows = [
        (f"maximum_filter {args.side}x{args.side} size {args.size}", "max_pool2d k x k",
         pooled_f, ours_f, 2.0, agree_filter),
        (f"nearest_neighbours N=M={n:,} D=2", f"cdist, {chunk}-row chunks (extrapolated)",
         cdist_n, ours_n, 10.0, exact),
    ]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, forced backend='torch' on the CPU")
    print(f"{'operation':<40} {'baseline':<42} {'baseline s':>10} {'torch s':>9} {'ratio':>8} "
          f"{'target':>7} {'agrees':>7}")
    failed = False
    for name, baseline, baseline_s, ours_s, target_ratio, agrees in rows:
        ratio = baseline_s / ours_s
        failed |= ratio < target_ratio or not agrees
        print(f"{name:<40} {baseline:<42} {baseline_s:>10.3f} {ours_s:>9.3f} {ratio:>7.1f}x "
              f"{target_ratio:>6.0f}x {'yes' if agrees else 'NO':>7}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
