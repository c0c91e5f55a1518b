"""The decode chain's filters on the numba backend against SciPy (whose bits they give) and OpenCV.

Each row is a ratio measured side by side in one process (best of several interleaved repeats of
each contender: the machine may be shared and noisy). Ours is ``spacr_accel_core.ops`` forced to
``backend="numba"`` after its kernels are compiled, writing into ``out=``; its answer is checked
bit-identical to SciPy's on the same run. OpenCV works in float32 (not SciPy's float64 passes), so
its answer is close but not equal: the largest absolute difference is printed.

    python benchmarks/bench_decode_filters.py            # the full sizes (44 fields of 1480^2)
    python benchmarks/bench_decode_filters.py --quick    # 8 fields instead of 44, fewer repeats

Targets (printed, not asserted): ``gaussian_laplace`` of a (44, 1480, 1480) stack at sigma 1 at
most 0.2x a loop of ``scipy.ndimage.gaussian_laplace`` over the fields and at most 1.0x OpenCV's
``sepFilter2D`` pair; ``gaussian_filter`` of a 2960^2 field at sigma 3 at most 0.2x SciPy and 1.0x
``cv2.GaussianBlur``; ``minimum_filter`` of a 1480^2 field, size 5, ``mode="reflect"``, at most
1.0x ``cv2.erode`` with ``BORDER_REFLECT``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np


def _best(fn: Callable[[], object], repeat: int, other: Callable[[], object]) -> tuple[float, float]:
    """Best wall times of ``fn`` and ``other``, run alternately so both see the same machine load.

    The CPU seconds each spent (all threads together) are kept in :data:`_CPU` for the row: on a
    machine other jobs share, they say how much work each did when the wall times are noisy.
    """
    ours, theirs, ours_cpu, theirs_cpu = [], [], [], []
    for _ in range(repeat):
        for call, wall, cpu in ((fn, ours, ours_cpu), (other, theirs, theirs_cpu)):
            start, start_cpu = time.perf_counter(), time.process_time()
            call()
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    _CPU[:] = [min(ours_cpu), min(theirs_cpu)]
    return min(ours), min(theirs)


_CPU: list[float] = [0.0, 0.0]
"""The CPU seconds (all threads) of the last :func:`_best`'s two contenders, best of the repeats."""


def _same_bits(got: np.ndarray, expected: np.ndarray) -> bool:
    nan = np.isnan(expected)
    return bool(np.array_equal(np.isnan(got), nan)) and bool(
        (got.view(np.uint32)[~nan] == expected.view(np.uint32)[~nan]).all())


def _row(label: str, ours: float, peer: str, theirs: float, target: float, note: str = "") -> None:
    ratio = ours / theirs
    verdict = "meets" if ratio <= target else "MISSES"
    print(f"{label:<44} ours {ours * 1e3:9.1f} ms  {peer:<22} {theirs * 1e3:9.1f} ms  "
          f"ratio {ratio:5.2f}  (target <= {target:g}: {verdict}); CPU seconds "
          f"{_CPU[0]:.3f} vs {_CPU[1]:.3f}{note}")


def laplace_rows(planes: int, repeat: int) -> None:
    """gaussian_laplace of a cycle's stack, sigma 1, against SciPy's loop and OpenCV's filter pair."""
    import cv2
    from scipy import ndimage

    from spacr_accel_core import last_dispatch, ops
    from spacr_accel_core.separable import gaussian_weights

    rng = np.random.default_rng(0)
    stack = (100.0 + 10.0 * rng.standard_normal((planes, 1480, 1480), dtype=np.float32)).astype(np.float32)
    ours_out, scipy_out, cv_out = np.empty_like(stack), np.empty_like(stack), np.empty_like(stack)
    smooth = gaussian_weights(1.0, 0, 4).astype(np.float32)  # symmetric: correlation = convolution
    second = gaussian_weights(1.0, 2, 4).astype(np.float32)

    def ours_laplace() -> None:
        ops.gaussian_laplace(stack, 1.0, backend="numba", out=ours_out)

    def scipy_laplace() -> None:
        for number, plane in enumerate(stack):
            ndimage.gaussian_laplace(plane, 1.0, output=scipy_out[number])

    def cv_laplace() -> None:
        for number, plane in enumerate(stack):
            rows = cv2.sepFilter2D(plane, cv2.CV_32F, smooth, second, borderType=cv2.BORDER_REFLECT)
            np.add(rows, cv2.sepFilter2D(plane, cv2.CV_32F, second, smooth, borderType=cv2.BORDER_REFLECT),
                   out=cv_out[number])

    ours_laplace()
    served = last_dispatch()
    label = f"gaussian_laplace ({planes}, 1480, 1480), sigma 1"
    ours, theirs = _best(ours_laplace, repeat, scipy_laplace)
    _row(label, ours, "scipy (loop of fields)", theirs, 0.2,
         f"  [{served.backend if served else '?'}; bit-identical: {_same_bits(ours_out, scipy_out)}]")
    ours, theirs = _best(ours_laplace, repeat, cv_laplace)
    _row(label, ours, "cv2.sepFilter2D x 2", theirs, 1.0,
         f"  [OpenCV's max |difference| {float(np.max(np.abs(cv_out - ours_out))):.2e}]")


def gaussian_rows(repeat: int) -> None:
    """gaussian_filter of a large field, sigma 3, against SciPy and cv2.GaussianBlur."""
    import cv2
    from scipy import ndimage

    from spacr_accel_core import ops

    rng = np.random.default_rng(1)
    field = (100.0 + 10.0 * rng.standard_normal((2960, 2960), dtype=np.float32)).astype(np.float32)
    out, reference, blurred = np.empty_like(field), np.empty_like(field), np.empty_like(field)
    edge = 2 * int(4.0 * 3.0 + 0.5) + 1

    def ours_gaussian() -> None:
        ops.gaussian_filter(field, 3.0, backend="numba", out=out)

    def scipy_gaussian() -> None:
        ndimage.gaussian_filter(field, 3.0, output=reference)

    def cv_gaussian() -> None:
        cv2.GaussianBlur(field, (edge, edge), 3.0, dst=blurred, borderType=cv2.BORDER_REFLECT)

    ours, theirs = _best(ours_gaussian, repeat, scipy_gaussian)
    _row("gaussian_filter 2960^2, sigma 3", ours, "scipy", theirs, 0.2,
         f"  [bit-identical: {_same_bits(out, reference)}]")
    ours, theirs = _best(ours_gaussian, repeat, cv_gaussian)
    _row("gaussian_filter 2960^2, sigma 3", ours, "cv2.GaussianBlur", theirs, 1.0,
         f"  [OpenCV's max |difference| {float(np.max(np.abs(blurred - out))):.2e}]")


def minimum_rows(repeat: int) -> None:
    """minimum_filter of a field, size 5, reflect, against cv2.erode."""
    import cv2
    from scipy import ndimage

    from spacr_accel_core import ops

    rng = np.random.default_rng(2)
    plane = (100.0 + 10.0 * rng.standard_normal((1480, 1480), dtype=np.float32)).astype(np.float32)
    low = np.empty_like(plane)
    footprint = np.ones((5, 5), np.uint8)

    def ours_minimum() -> None:
        ops.minimum_filter(plane, 5, mode="reflect", backend="numba", out=low)

    def cv_minimum() -> None:
        cv2.erode(plane, footprint, borderType=cv2.BORDER_REFLECT)

    ours, theirs = _best(ours_minimum, repeat * 20, cv_minimum)  # a millisecond each: many samples
    same = _same_bits(low, ndimage.minimum_filter(plane, 5, mode="reflect"))
    _row("minimum_filter 1480^2, size 5, reflect", ours, "cv2.erode", theirs, 1.0,
         f"  [bit-identical to scipy: {same}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 fields instead of 44, fewer repeats")
    parser.add_argument("--repeat", type=int, default=None, help="interleaved repeats per contender")
    args = parser.parse_args()
    repeat = args.repeat or (3 if args.quick else 5)

    import cv2

    import spacr_accel_numba
    from spacr_accel_core.tiling import cpu_threads

    assert spacr_accel_numba.warm(timeout=600), spacr_accel_numba.failure()
    print(f"threads: ours {cpu_threads()}, OpenCV {cv2.getNumThreads()}; repeats {repeat}")
    laplace_rows(8 if args.quick else 44, repeat)
    gaussian_rows(repeat)
    minimum_rows(repeat)


if __name__ == "__main__":
    main()
