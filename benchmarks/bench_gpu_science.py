#!/usr/bin/env python3
"""The science calls on every accelerated backend, in ONE table: end-to-end times (NumPy in,
NumPy out, every transfer included), the NumPy floor's time on the same work, and agreement.

Rows (full size, for one data-centre GPU):

* ``nearest k=4``: 1,000,000 x 1,000,000 points in 2-D, the four nearest of each, exact.
* ``Hamming k=2``: 100,000 x 100,000 ORB descriptors of 32 bytes (the ratio test's two nearest).
* ``local_maxima stack``: an (11, 4, 1480, 1480) sequencing field, size 5, in one call; only the
  coordinates come back from the card.

The floor is timed on the whole work where that takes seconds, and on a sample of source rows
(scaled to the whole, marked ``est.``) where it would take minutes; agreement is checked on that
sample against the floor, bit for bit, and the backend must have served the call itself
(``last_dispatch()``: no decline). ``--small`` shrinks every input for a quick run on a CPU.

Run: ``python benchmarks/bench_gpu_science.py [--small] [--force]`` (``scripts/gpu-check`` and
``benchmarks/bench_gpu.py`` run it). Exit status 1 when a backend that ran disagrees or declined.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Case:
    """One row: the call, and the sample of it the floor answers."""

    label: str
    run: Callable[..., Any]
    sample: Callable[[Any], Any]
    sampled_fraction: float


def cases(small: bool) -> list[Case]:
    """The three rows, full size or small."""
    from spacr_accel_core import ops

    rng = np.random.default_rng(0)
    points, bits, stack = (20_000, 5_000, (2, 2, 256, 256)) if small else (1_000_000, 100_000, (11, 4, 1480, 1480))
    source = rng.uniform(0, 10_000, (points, 2)).astype(np.float32)
    target = rng.uniform(0, 10_000, (points, 2)).astype(np.float32)
    descriptors = rng.integers(0, 256, (bits, 32), dtype=np.uint8)
    other = rng.integers(0, 256, (bits, 32), dtype=np.uint8)
    field = rng.gamma(2.0, 50.0, stack).astype(np.float32)
    near_rows = min(points, 50_000)
    ham_rows = min(bits, 2_000)

    def nearest(**options: Any) -> Any:
        return ops.nearest_neighbours(source, target, k=4, **options)

    def hamming(**options: Any) -> Any:
        return ops.nearest_neighbours(descriptors, other, k=2, metric="hamming", **options)

    def peaks(**options: Any) -> Any:
        return ops.local_maxima(field, 5, threshold=100.0, **options)

    return [
        Case(f"nearest {points:,} x {points:,} D=2, k=4", nearest,
             lambda got: (ops.nearest_neighbours(source[:near_rows], target, k=4, backend="numpy"),
                          (got[0][:near_rows], got[1][:near_rows])), near_rows / points),
        Case(f"Hamming {bits:,} x {bits:,} x 32 bytes, k=2", hamming,
             lambda got: (ops.nearest_neighbours(descriptors[:ham_rows], other, k=2, metric="hamming",
                                                 backend="numpy"), (got[0][:ham_rows], got[1][:ham_rows])),
             ham_rows / bits),
        Case(f"local_maxima {stack} size 5, transfer incl.", peaks,
             lambda got: (ops.local_maxima(field, 5, threshold=100.0, backend="numpy"), got), 1.0),
    ]


def synchronise(name: str) -> None:
    """Wait for the device, so a time covers the work and not only its launch."""
    try:
        if name == "torch":
            import torch

            if torch.cuda.is_available():
                torch.cuda.synchronize()
        elif name == "cupy":
            import cupy

            cupy.cuda.Device().synchronize()
    except Exception:  # nothing to wait for (no device): the call itself already returned its NumPy
        return


def timed(work: Callable[[], Any], name: str) -> tuple[Any, float]:
    synchronise(name)
    start = time.perf_counter()
    result = work()
    synchronise(name)
    return result, time.perf_counter() - start


def same(expected: Any, got: Any) -> bool:
    if isinstance(expected, tuple):
        return all(np.array_equal(e, g) for e, g in zip(expected, got, strict=True))
    return bool(np.array_equal(expected, got))


def row(case: Case, name: str, force: bool) -> tuple[str, str, str, str, bool]:
    """``(backend ms, floor ms, agrees, who served, failed)`` for one backend on one case."""
    from spacr_accel_core import last_dispatch

    options: dict[str, Any] = {"backend": name}
    if force and name == "torch":
        options["gpu"] = False  # torch on the CPU, where no card is
    try:
        case.run(**options)  # warm-up: kernels compiled, caches filled
        got, took = timed(lambda: case.run(**options), name)
    except RuntimeError as exc:
        return "-", "-", f"declined: {str(exc).splitlines()[0][:60]}", name, not force
    dispatch = last_dispatch()
    served = dispatch.backend if dispatch is not None else "?"
    declined = bool(dispatch is not None and dispatch.declined)
    start = time.perf_counter()
    expected, sampled = case.sample(got)
    floor = (time.perf_counter() - start) / case.sampled_fraction
    agrees = same(expected, sampled)
    estimate = " est." if case.sampled_fraction < 1.0 else ""
    verdict = "exact" if agrees else "NO"
    return f"{took * 1e3:.1f}", f"{floor * 1e3:.0f}{estimate}", verdict, served, (not agrees) or declined


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="small inputs (a quick run on a CPU)")
    parser.add_argument("--backends", default="torch,cupy", help="accelerated backends to try")
    parser.add_argument("--force", action="store_true",
                        help="run torch on the CPU where no card is (gpu=False), and report declines only")
    args = parser.parse_args()
    return table(args.small, args.backends, args.force)


def table(small: bool, backends: str, force: bool) -> int:
    """Print the table; 1 when a backend that ran disagreed or (without ``force``) declined."""
    from spacr_accel_core.accelerator import describe

    print(f"device: {describe()}")
    header = f"{'call':<52} {'backend':<7} {'ms':>10} {'floor ms':>12}  {'agrees':<8} served by"
    print(header)
    print("-" * len(header))
    failed = False
    for case in cases(small):
        for name in [b.strip() for b in backends.split(",") if b.strip()]:
            took, floor, agrees, served, bad = row(case, name, force)
            failed |= bad
            print(f"{case.label:<52} {name:<7} {took:>10} {floor:>12}  {agrees:<8} {served}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
