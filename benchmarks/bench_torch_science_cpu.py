#!/usr/bin/env python3
"""The torch backend forced onto the CPU (``backend="torch", gpu=False``) against numba, on the
science calls, measured side by side in one run on the same inputs:

* ``nearest_neighbours`` k=4, N = M = 100,000 points in 2-D (uniform over a 10,000-pixel plate).
  Target: torch within 3x of numba.
* ``nearest_neighbours`` ``metric="hamming"``, 20,000 x 20,000 descriptors of 32 bytes: k=1, k=2
  (the ratio test), k=4 and k=2 within ``max_distance=64``. Target: torch within 3x of numba.

The CPU's feature flags that decide torch's Hamming product (bfloat16 on AMX, int8 on VNNI, else
float32; emulated bfloat16 is several times slower) are printed beside the figures, as the same
code on two CPUs can differ by that much.

Both answers are also compared with the NumPy floor, bit for bit. Times are the best of
``--repeats`` runs, the two backends alternating so that a busy machine slows both alike.

Run: ``python benchmarks/bench_torch_science_cpu.py`` (about a minute on two cores). Exits
non-zero when a target is missed or an answer differs.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def alternating(repeats: int, *works: Callable[[], object]) -> list[float]:
    """The best time of each work over ``repeats`` rounds, run in turn within each round."""
    best = [float("inf")] * len(works)
    for _ in range(repeats):
        for number, work in enumerate(works):
            start = time.perf_counter()
            work()
            best[number] = min(best[number], time.perf_counter() - start)
    return best


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=100_000, help="N = M for k=4 (default 100,000)")
    parser.add_argument("--descriptors", type=int, default=20_000, help="N = M for Hamming (default 20,000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hamming-only", action="store_true", help="only the Hamming rows")
    args = parser.parse_args()

    import torch

    from spacr_accel_core import ops, warm_up

    warm_up()  # numba compiles its kernels in the background: wait, so compile time is not timed
    rng = np.random.default_rng(0)
    source = rng.uniform(0, 10_000, (args.points, 2)).astype(np.float32)
    target = rng.uniform(0, 10_000, (args.points, 2)).astype(np.float32)
    bits = rng.integers(0, 256, (args.descriptors, 32), dtype=np.uint8)
    other = rng.integers(0, 256, (args.descriptors, 32), dtype=np.uint8)
    cases: list[tuple[str, Callable[..., Any]]] = []
    if not args.hamming_only:
        cases.append((f"nearest k=4, N=M={args.points:,} D=2",
                      lambda **o: ops.nearest_neighbours(source, target, k=4, **o)))
    size = f"{args.descriptors // 1000}k x {args.descriptors // 1000}k x 32 B"
    for k, bound in ((1, None), (2, None), (4, None), (2, 64)):
        within = "" if bound is None else f" <= {bound}"
        cases.append((f"Hamming k={k}{within}, {size}",
                      functools.partial(_hamming_call, ops, bits, other, k, bound)))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; torch forced onto the CPU (gpu=False)")
    print(f"CPU: {cpu_model()}; flags: {cpu_flags()}")
    from spacr_accel_torch import _hamming
    from spacr_accel_torch._runtime import Device

    print(f"torch's Hamming product on this CPU: {_hamming._plan(Device(torch.device('cpu'), True))[0]}")
    print(f"{'call':<44} {'numba s':>9} {'torch s':>9} {'torch/numba':>12} {'target':>7} {'agrees':>7}")
    failed = False
    for label, call in cases:
        floor = call(backend="numpy")
        by_numba = call(backend="numba")
        by_torch = call(backend="torch", gpu=False)
        agrees = same(floor, by_numba) and same(floor, by_torch)
        numba_s, torch_s = alternating(args.repeats, functools.partial(call, backend="numba"),
                                       functools.partial(call, backend="torch", gpu=False))
        ratio = torch_s / numba_s
        failed |= ratio > 3.0 or not agrees
        print(f"{label:<44} {numba_s:>9.3f} {torch_s:>9.3f} {ratio:>11.1f}x {'<= 3x':>7} "
              f"{'yes' if agrees else 'NO':>7}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
