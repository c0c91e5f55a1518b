#!/usr/bin/env python3
"""The three operations on every backend, in ONE table: device-resident and end-to-end times,
speed-up over the NumPy backend, agreement with it, and the targets for one data-centre GPU.

Columns:

* ``resident``: the computation with its data already on the device (for NumPy the same as
  end to end). For nearest_neighbours, whose inputs and outputs are a few MB, it is the end-to-end
  time less the measured copies of those arrays.
* ``end to end``: ``spacr_accel_core.ops.<op>(..., backend=name)`` from NumPy to NumPy, copies
  included; the best of a few runs after a warm-up.
* ``speed-up``: NumPy's end-to-end time over this one's.
* ``agrees``: equal to the NumPy backend bit for bit (maximum_filter, nearest_neighbours) or within
  float32 rounding (matmul).
* ``target``: the numbers one data-centre GPU must reach, where one applies: nearest_neighbours end to end
  under 50 ms; maximum_filter resident within 3x of one read and one write of the field at the
  card's bandwidth (measured as a device-to-device copy); matmul end to end within 1.5x of copying
  its operands to the card and the product back.

Then the science calls' table of ``benchmarks/bench_gpu_science.py`` (nearest 1,000,000 x 1,000,000 in
2-D with k=4; Hamming 100,000 x 100,000 x 32 bytes; the peaks of an (11, 4, 1480, 1480) stack,
transfers included), unless ``--primitives-only``.

Run by ``scripts/gpu-check``; ``--small`` shrinks the inputs for a quick run on a CPU.
Exit status 0 when every backend that ran agrees, 1 otherwise (targets are reported, not enforced).
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Row:
    operation: str
    backend: str
    resident: float | None
    end_to_end: float | None
    speedup: float | None
    agrees: str
    target: str


def best(work: Callable[[], object], sync: Callable[[], None], repeats: int) -> float:
    """Best of ``repeats`` timed runs after one warm-up, synchronising the device around each."""
    work()
    sync()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        work()
        sync()
        times.append(time.perf_counter() - start)
    return min(times)


def no_sync() -> None:
    """The host needs no synchronisation."""


def torch_sync() -> Callable[[], None]:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.synchronize
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.mps.synchronize
    return no_sync


def cupy_sync() -> None:
    import cupy

    cupy.cuda.Device().synchronize()


def agreement(operation: str, got: Any, expected: Any, operands: tuple[np.ndarray, ...]) -> str:
    if operation == "matmul":
        from spacr_accel_core.testing import reference_matmul

        exact, tolerance = reference_matmul(operands[0], operands[1])
        return "yes" if np.all(np.abs(got.astype(np.float64) - exact) <= tolerance) else "NO"
    if operation == "nearest_neighbours":
        same = np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
        return "exact" if same else f"NO ({int(np.count_nonzero(got[0] != expected[0]))} differ)"
    return "exact" if np.array_equal(got, expected, equal_nan=True) else "NO"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="small inputs (a quick run on a CPU)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backends", default="torch,cupy", help="accelerated backends to try")
    parser.add_argument("--force", action="store_true",
                        help="run the backends even where automatic dispatch would not (torch on a CPU)")
    parser.add_argument("--primitives-only", action="store_true",
                        help="leave out the science calls' table (benchmarks/bench_gpu_science.py)")
    args = parser.parse_args()

    from spacr_accel_core import ops, plugins
    from spacr_accel_core.accelerator import describe

    side, points, rows = (1024, 20_000, 1_000_000) if args.small else (8192, 100_000, 10_000_000)
    rng = np.random.default_rng(0)
    field = rng.standard_normal((side, side)).astype(np.float32)
    tall = rng.standard_normal((rows, 8)).astype(np.float32)
    tiny = rng.standard_normal((8, 8)).astype(np.float32)
    source = rng.uniform(0, 10_000, (points, 2)).astype(np.float32)
    target = rng.uniform(0, 10_000, (points, 2)).astype(np.float32)
    cases: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
        f"maximum_filter {side}x{side} size 15": (ops.maximum_filter, (field, 15)),
        f"matmul ({rows:,} x 8) @ (8 x 8)": (ops.matmul, (tall, tiny)),
        f"nearest_neighbours N=M={points:,} D=2": (ops.nearest_neighbours, (source, target)),
    }
    status = {p.name: p for p in plugins()}
    table: list[Row] = []
    failed = False
    for label, (function, operands) in cases.items():
        operation = function.__name__
        reference = function(*operands, backend="numpy")
        numpy_time = best(functools.partial(function, *operands, backend="numpy"), no_sync,
                          max(1, args.repeats // 2))
        table.append(Row(label, "numpy", numpy_time, numpy_time, 1.0, "reference", ""))
        for name in [b.strip() for b in args.backends.split(",") if b.strip()]:
            plugin = status.get(name)
            if plugin is None or (not plugin.usable and not args.force):
                why = "not installed" if plugin is None else plugin.reason
                table.append(Row(label, name, None, None, None, f"skipped: {why}"[:60], ""))
                continue
            try:
                got = function(*operands, backend=name)
                sync = torch_sync() if name == "torch" else cupy_sync
                end_to_end = best(functools.partial(function, *operands, backend=name), sync, args.repeats)
                resident, target_text = measure_resident(name, operation, operands, end_to_end, sync,
                                                         args.repeats)
            except Exception as exc:  # a backend that breaks is a row of the table, not a crash
                failed = True
                table.append(Row(label, name, None, None, None, f"FAILED: {type(exc).__name__}: {exc}"[:80], ""))
                continue
            agrees = agreement(operation, got, reference, operands)
            failed |= agrees.startswith("NO")
            table.append(Row(label, name, resident, end_to_end, numpy_time / end_to_end, agrees, target_text))

    print(f"device: {describe()}")
    header = (f"{'operation':<40} {'backend':<7} {'resident ms':>12} {'end to end ms':>14} "
              f"{'speed-up':>9}  {'agrees':<10} target")
    print(header)
    print("-" * len(header))
    for row in table:
        shown_resident = f"{row.resident * 1e3:12.2f}" if row.resident is not None else f"{'-':>12}"
        shown_e2e = f"{row.end_to_end * 1e3:14.2f}" if row.end_to_end is not None else f"{'-':>14}"
        shown_speed = f"{row.speedup:8.1f}x" if row.speedup is not None else f"{'-':>9}"
        print(f"{row.operation:<40} {row.backend:<7} {shown_resident} {shown_e2e} {shown_speed}  "
              f"{row.agrees:<10} {row.target}")
    failed |= not args.primitives_only and science_table(args.small, args.backends, args.force) != 0
    return 1 if failed else 0


def science_table(small: bool, backends: str, force: bool) -> int:
    """The science calls' table (k nearest, Hamming, a stack's peaks) of ``bench_gpu_science.py``."""
    import os

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_gpu_science

    print()
    return bench_gpu_science.table(small, backends, force)


def measure_resident(name: str, operation: str, operands: tuple[Any, ...], end_to_end: float,
                     sync: Callable[[], None], repeats: int) -> tuple[float, str]:
    """The device-resident time of one operation on one backend, and the target for it."""
    if name == "torch":
        import torch

        from spacr_accel_torch import _ops, _runtime

        device = _runtime.target().torch

        def to_device(array: np.ndarray) -> Any:
            return torch.from_numpy(array).to(device)

        def to_host(value: Any) -> Any:
            return value.cpu()

        def copy(value: Any) -> Any:
            return value.clone()

        def pool(field: Any, size: int) -> Any:
            return _ops._pool(field, size), bool(torch.isnan(field).any())

        matmul: Callable[[Any, Any], Any] = torch.matmul
    else:
        import cupy
        from cupyx.scipy import ndimage

        def to_device(array: np.ndarray) -> Any:
            return cupy.asarray(array)

        def to_host(value: Any) -> Any:
            return cupy.asnumpy(value)

        def copy(value: Any) -> Any:
            return value.copy()

        def pool(field: Any, size: int) -> Any:
            return ndimage.maximum_filter(field, size=size, mode="nearest"), bool(cupy.isnan(field).any())

        matmul = cupy.matmul

    if operation == "maximum_filter":
        field_dev = to_device(operands[0])
        resident = best(lambda: pool(field_dev, operands[1]), sync, repeats)
        once = best(lambda: copy(field_dev), sync, repeats)  # one read and one write of the field
        ratio = resident / once
        verdict = "PASS" if ratio <= 3.0 else "miss"
        return resident, f"<= 3x one read+write ({once * 1e3:.2f} ms): {ratio:.1f}x {verdict}"
    if operation == "matmul":
        first_dev, second_dev = to_device(operands[0]), to_device(operands[1])
        resident = best(lambda: matmul(first_dev, second_dev), sync, repeats)
        product_dev = matmul(first_dev, second_dev)
        copies = best(lambda: (to_device(operands[0]), to_device(operands[1]), to_host(product_dev)),
                      sync, repeats)
        ratio = end_to_end / copies
        verdict = "PASS" if ratio <= 1.5 else "miss"
        return resident, f"<= 1.5x copies in+out ({copies * 1e3:.2f} ms): {ratio:.2f}x {verdict}"
    index = np.zeros(operands[0].shape[0], np.int64)
    distance = np.zeros(operands[0].shape[0], np.float32)
    index_dev, distance_dev = to_device(index), to_device(distance)
    copies = best(lambda: (to_device(operands[0]), to_device(operands[1]), to_host(index_dev),
                           to_host(distance_dev)), sync, repeats)
    verdict = "PASS" if end_to_end < 0.050 else "miss"
    return max(0.0, end_to_end - copies), f"end to end < 50 ms: {verdict}" if name == "torch" else ""


if __name__ == "__main__":
    sys.exit(main())
