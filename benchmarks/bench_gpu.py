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

Then the science calls on every accelerated backend, in a second table (``--science-only``: that
table alone; ``--primitives-only``: the first alone): end-to-end times (NumPy in, NumPy out, every
transfer included), the NumPy floor's time on the same work, and agreement. Rows (full size, for
one data-centre GPU):

* ``nearest k=4``: 1,000,000 x 1,000,000 points in 2-D, the four nearest of each, exact.
* ``Hamming k=2``: 100,000 x 100,000 ORB descriptors of 32 bytes (the ratio test's two nearest).
* ``local_maxima stack``: an (11, 4, 1480, 1480) sequencing field, size 5, in one call; only the
  coordinates come back from the card.

The floor is timed on the whole work where that takes seconds, and on a sample of source rows
(scaled to the whole, marked ``est.``) where it would take minutes; agreement is checked on that
sample against the floor, bit for bit, and the backend must have served the call itself
(``last_dispatch()``: no decline).

Run by ``scripts/gpu-check``: ``python benchmarks/bench_gpu.py [--small] [--force]``; ``--small``
shrinks the inputs for a quick run on a CPU. Exit status 0 when every backend that ran agrees (and,
in the science table, served the call itself, unless ``--force``), 1 otherwise (targets are
reported, not enforced).
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from _timing import side_by_side  # the benchmarks' one timer, beside this file


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
    return side_by_side({"work": work}, repeats, warm=True, sync=sync)["work"].best


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
    parser.add_argument("--primitives-only", action="store_true", help="leave out the science calls' table")
    parser.add_argument("--science-only", action="store_true", help="only the science calls' table")
    args = parser.parse_args()
    if args.science_only:
        return science_table(args.small, args.backends, args.force)

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
    if not args.primitives_only:
        print()
        failed |= science_table(args.small, args.backends, args.force) != 0
    return 1 if failed else 0




def measure_resident(name: str, operation: str, operands: tuple[Any, ...], end_to_end: float,
                     sync: Callable[[], None], repeats: int) -> tuple[float, str]:
    """The device-resident time of one operation on one backend, and the target for it."""
    if name == "torch":
        import torch

        from spacr_accel_torch import _filters_kernels, _runtime

        device = _runtime.target().torch

        def to_device(array: np.ndarray) -> Any:
            return torch.from_numpy(array).to(device)

        def to_host(value: Any) -> Any:
            return value.cpu()

        def copy(value: Any) -> Any:
            return value.clone()

        def pool(field: Any, size: int) -> Any:
            return _filters_kernels._pool(field, size), bool(torch.isnan(field).any())

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


# ---- the science calls ---------------------------------------------------------------------------------


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
    try:  # one untimed call first: kernels compiled, caches filled
        timing = side_by_side({"run": lambda: case.run(**options)}, 1, warm=True,
                              sync=functools.partial(synchronise, name))["run"]
    except RuntimeError as exc:
        return "-", "-", f"declined: {str(exc).splitlines()[0][:60]}", name, not force
    got, took = timing.answer, timing.best
    dispatch = last_dispatch()
    served = dispatch.backend if dispatch is not None else "?"
    declined = bool(dispatch is not None and dispatch.declined)
    sampled_floor = side_by_side({"floor": lambda: case.sample(got)}, 1)["floor"]
    expected, sampled = sampled_floor.answer
    floor = sampled_floor.best / case.sampled_fraction
    agrees = same(expected, sampled)
    estimate = " est." if case.sampled_fraction < 1.0 else ""
    verdict = "exact" if agrees else "NO"
    return f"{took * 1e3:.1f}", f"{floor * 1e3:.0f}{estimate}", verdict, served, (not agrees) or declined


def science_table(small: bool, backends: str, force: bool) -> int:
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
