"""One field's decode chain against spaCR's and a user's alternatives: the whole chain, its two steps,
its filters, each part a set of ratios measured side by side in one run.

THE WHOLE CHAIN (``--only chain``): spaCR's chain as it is written, against the same chain
through ``ops``. The benchmark makes its own field: 11 cycles x 4 channels of 1480 x 1480 float32
(``--quick``: 4 cycles of 512 x 512), a shared texture of cells under noise, a few thousand spots
whose base (the bright channel) changes from cycle to cycle, and each cycle moved by a known integer
shift. Then:

1. **register** every cycle and channel to the reference cycle by phase correlation, and move it
   back by the integer shift, zero filled;
2. **score** each plane by ``clip(-gaussian_laplace(plane, 1.0), 0)``, the spot score the standard
   deviation over cycles averaged over channels;
3. **find the reads**: the score's local maxima (window 5) above 0 whose local contrast
   ``score - minimum_filter(score, 5)`` exceeds a threshold;
4. **read the bases**: the 3 x 3 maximum of every plane at each read.

spaCR's chain is written as it is in spaCR: its NumPy phase correlation per pair, SciPy's filters
per plane in a Python loop, a Python loop over reads for the intensities. The ``ops`` chain makes
the same steps as calls: ``ops.phase_correlate`` on the whole stack of pairs, ``ops.gaussian_laplace``
on the whole stack, ``ops.local_maxima``, ``ops.minimum_filter(mode="reflect")`` and
``ops.window_maxima``. The two must find the same shifts, reads and intensities (asserted); then
the time of each (the best of ``--repeat`` interleaved runs, default 1), their ratio and each
step's share are printed. Target: the ``ops`` chain at most 0.3x spaCR's.

ITS TWO STEPS (``--only steps``), against what spaCR and a user would write instead:

- ``window_maxima``: 10,000 reads in an (11 cycles, 4 channels, 1480, 1480) stack, size 3, against
  spaCR's per-read loop (the 3 x 3 maximum of every plane at each read) and against our own
  ``maximum_filter`` of the whole stack followed by indexing.
- ``phase_correlate``: one 1480 x 1480 pair against spaCR's NumPy path (the float64 ``rfft2``
  surface as spaCR defines it, :func:`spacr_phase_correlate`) and OpenCV's ``cv2.phaseCorrelate``
  (float32); 44 pairs in one call against 44 single calls, twice: 44 distinct reference fields
  (every pair transformed whole, the worst case for a batch), and spaCR's decode layout, 11 cycles
  x 4 channels each registered against its channel in one reference cycle (``np.broadcast_to``: 4
  distinct reference fields, which one call transforms once each and 44 single calls transform 44
  times).

Each row is a ratio "ours / theirs" of the best of ``--repeat`` (default 3) interleaved repeats,
then the CPU seconds each spent (all threads together, least of the repeats); every answer is
checked equal to the other side's before it is timed. "Ours" is ``spacr_accel_core.ops`` with
automatic dispatch (the example plugins blocked), and each shipped CPU backend forced
(``--backends``). Targets: window maxima at most 0.05x spaCR's loop and 0.2x the filter-and-index;
one pair at most 0.5x spaCR's NumPy path and 1.0x OpenCV; 44 pairs in one call at most 0.8x 44
single calls.

ITS FILTERS ON NUMBA (``--only filters``), against SciPy (whose bits they give) and OpenCV. Ours is
``spacr_accel_core.ops`` forced to ``backend="numba"`` after its kernels are compiled, writing into
``out=``; its answer is checked bit-identical to SciPy's on the same run. OpenCV works in float32
(not SciPy's float64 passes), so its answer is close but not equal: the largest absolute
difference is printed. Best of ``--repeat`` (default 5, ``--quick`` 3) interleaved repeats.
Targets: ``gaussian_laplace`` of a (44, 1480, 1480) stack (``--quick``: 8 fields) at sigma 1 at
most 0.2x a loop of ``scipy.ndimage.gaussian_laplace`` over the fields and at most 1.0x OpenCV's
``sepFilter2D`` pair; ``gaussian_filter`` of a 2960^2 field at sigma 3 at most 0.2x SciPy and 1.0x
``cv2.GaussianBlur``; ``minimum_filter`` of a 1480^2 field, size 5, ``mode="reflect"``, at most
1.0x ``cv2.erode`` with ``BORDER_REFLECT``.

    python benchmarks/bench_decode.py                       # every part: several minutes on 2 cores
    python benchmarks/bench_decode.py --quick               # smaller fields and stacks: seconds
    python benchmarks/bench_decode.py --only chain --repeat 3   # one part, steadier
    python benchmarks/bench_decode.py --only steps --backends numpy

Every target is printed, not asserted.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from _timing import Steps, ratio_row, rounds, side_by_side  # the benchmarks' one timer, beside this file

THRESHOLD = 30.0
"""The reads' local contrast threshold, for the synthetic field's spot and noise levels."""


@dataclass(frozen=True)
class Field:
    """A synthetic acquisition and what is known about it."""

    stack: np.ndarray  # (cycles, channels, H, W) float32, each cycle moved by its shift
    shifts: np.ndarray  # (cycles, 2): the shift that lands each cycle back on the reference


def synthesise(cycles: int, side: int, spots: int, seed: int = 0) -> Field:
    """Cells, noise and spots whose base changes every cycle; each cycle rolled by a known shift."""
    from scipy import ndimage

    rng = np.random.default_rng(seed)
    channels = 4
    texture = ndimage.gaussian_filter(rng.random((side, side)).astype(np.float32), 6.0)
    texture = 400.0 * (texture - texture.min()) / (texture.max() - texture.min())
    where = rng.integers(12, side - 12, size=(spots, 2))
    bases = rng.integers(0, channels, size=(spots, cycles))
    shifts = np.vstack([[0, 0], rng.integers(-12, 13, size=(cycles - 1, 2))])
    stack = np.empty((cycles, channels, side, side), dtype=np.float32)
    for cycle in range(cycles):
        for channel in range(channels):
            dots = np.zeros((side, side), np.float32)
            np.add.at(dots, (where[:, 0], where[:, 1]), np.where(bases[:, cycle] == channel, 6000.0, 900.0))
            plane = 100.0 + texture + ndimage.gaussian_filter(dots, 1.2)
            plane += rng.normal(0.0, 10.0, size=(side, side)).astype(np.float32)
            stack[cycle, channel] = np.roll(plane, tuple(shifts[cycle]), axis=(0, 1))
    return Field(stack, -shifts)


def moved(plane: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """``plane`` moved by ``(dy, dx)`` whole pixels, what comes in from outside zero."""
    height, width = plane.shape
    out = np.zeros_like(plane)
    out[max(dy, 0):height + min(dy, 0), max(dx, 0):width + min(dx, 0)] = \
        plane[max(-dy, 0):height + min(-dy, 0), max(-dx, 0):width + min(-dx, 0)]
    return out


# ---- spaCR's chain, as it is written ---------------------------------------------------------------


def spacr_phase_correlate(first: np.ndarray, second: np.ndarray) -> tuple[int, int, float]:
    """spaCR's NumPy path: the float64 surface, its first maximum unwrapped about 0, the peak ratio."""
    a = np.fft.rfft2(np.asarray(first, dtype=np.float64))
    b = np.fft.rfft2(np.asarray(second, dtype=np.float64))
    product = a * np.conj(b)
    magnitude = np.abs(product)
    with np.errstate(invalid="ignore", divide="ignore"):
        product = np.where(magnitude > 0, product / magnitude, 0)
    product[0, 0] = 0
    surface = np.fft.irfft2(product, s=first.shape)
    flat = int(np.argmax(surface))
    y, x = (int(v) for v in np.unravel_index(flat, surface.shape))
    mean = float(np.abs(surface).mean())
    height, width = first.shape
    dy = y + height * round((0 - y) / height)
    dx = x + width * round((0 - x) / width)
    return dy, dx, float(surface.flat[flat]) / mean if mean > 0 else 0.0


def spacr_chain(stack: np.ndarray, clock: Callable[[str], None]) -> dict[str, np.ndarray]:
    from scipy import ndimage

    cycles, channels = stack.shape[:2]
    shifts = np.zeros((cycles, channels, 2), dtype=np.int64)
    for cycle in range(cycles):
        for channel in range(channels):
            dy, dx, _ = spacr_phase_correlate(stack[0, channel], stack[cycle, channel])
            shifts[cycle, channel] = dy, dx
    clock("register")
    aligned = np.empty_like(stack)
    for cycle in range(cycles):
        for channel in range(channels):
            aligned[cycle, channel] = moved(stack[cycle, channel], *shifts[cycle, channel])
    clock("shift")
    scored = np.empty_like(aligned)
    for cycle in range(cycles):
        for channel in range(channels):
            scored[cycle, channel] = np.clip(-ndimage.gaussian_laplace(aligned[cycle, channel], 1.0), 0, None)
    clock("score (LoG)")
    score = scored.std(axis=0).mean(axis=0).astype(np.float32, copy=False)
    clock("score (std, mean)")
    peak = (score == ndimage.maximum_filter(score, 5, mode="nearest")) & (score > 0)
    background = score - ndimage.minimum_filter(score, size=5)
    reads = np.argwhere(peak & (background > THRESHOLD))
    clock("reads")
    bases = np.zeros((reads.shape[0], cycles, channels), np.float32)
    height, width = score.shape
    for i, (y, x) in enumerate(reads):
        bases[i] = aligned[:, :, max(0, y - 1):min(height, y + 2), max(0, x - 1):min(width, x + 2)].max(axis=(2, 3))
    clock("bases")
    return {"shifts": shifts, "reads": reads, "bases": bases}


# ---- the same chain through ops --------------------------------------------------------------------


def ops_chain(stack: np.ndarray, clock: Callable[[str], None]) -> dict[str, np.ndarray]:
    from spacr_accel_core import ops
    from spacr_accel_core.toolkit import cpu_threads

    cycles, channels = stack.shape[:2]
    found = ops.phase_correlate(np.broadcast_to(stack[:1], stack.shape), stack)
    shifts = np.stack([found.dy, found.dx], axis=-1)
    clock("register")
    aligned = np.empty_like(stack)
    for cycle in range(cycles):
        for channel in range(channels):
            move_into(aligned[cycle, channel], stack[cycle, channel], *shifts[cycle, channel])
    clock("shift")
    scored = ops.gaussian_laplace(aligned, 1.0)
    np.negative(scored, out=scored)
    np.maximum(scored, 0, out=scored)
    clock("score (LoG)")
    score = spot_score(scored, cpu_threads())
    clock("score (std, mean)")
    peaks = ops.local_maxima(score, 5, threshold=0)
    floor = ops.minimum_filter(score, 5, mode="reflect")
    contrast = score[peaks[:, 0], peaks[:, 1]] - floor[peaks[:, 0], peaks[:, 1]]
    reads = peaks[contrast > THRESHOLD]
    clock("reads")
    bases = ops.window_maxima(aligned, reads, 3)
    clock("bases")
    return {"shifts": shifts, "reads": reads, "bases": bases}


def move_into(out: np.ndarray, plane: np.ndarray, dy: int, dx: int) -> None:
    """:func:`moved` written straight into ``out``: the overlap copied once, only the strips zeroed."""
    height, width = plane.shape
    out[max(dy, 0):height + min(dy, 0), max(dx, 0):width + min(dx, 0)] = \
        plane[max(-dy, 0):height + min(-dy, 0), max(-dx, 0):width + min(-dx, 0)]
    out[:max(dy, 0)] = out[height + min(dy, 0):] = 0
    out[:, :max(dx, 0)] = out[:, width + min(dx, 0):] = 0


def spot_score(scored: np.ndarray, threads: int) -> np.ndarray:
    """``scored.std(axis=0).mean(axis=0)`` a band of rows at a time, the bands shared by ``threads``.

    The same NumPy reductions, element for element in the same order (bit-identical), but each
    band's temporaries (the deviations, their squares) stay in cache instead of being whole-stack
    arrays written to memory and read back.
    """
    from concurrent.futures import ThreadPoolExecutor

    rows = 16
    score = np.empty(scored.shape[2:], dtype=scored.dtype)

    def band(start: int) -> None:
        score[start:start + rows] = scored[:, :, start:start + rows].std(axis=0).mean(axis=0)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(band, range(0, score.shape[0], rows)))
    return score


# ---- the whole chain -------------------------------------------------------------------------------


def _run_chain(chain: Callable[[np.ndarray, Steps], dict[str, np.ndarray]],
               stack: np.ndarray) -> tuple[dict[str, np.ndarray], Steps, float]:
    """One run of ``chain``: its answer, its steps' times, and the CPU seconds (all threads) it took."""
    steps = Steps()
    start_cpu = time.process_time()
    answer = chain(stack, steps)
    return answer, steps, time.process_time() - start_cpu


def check(spacr: dict[str, Any], ours: dict[str, Any], field: Field) -> None:
    cycles, channels = field.stack.shape[:2]
    want = np.broadcast_to(field.shifts[:, None, :], (cycles, channels, 2))
    assert np.array_equal(spacr["shifts"], want), "spaCR's registration missed a known shift"
    assert np.array_equal(ours["shifts"], spacr["shifts"]), "the shifts differ"
    assert np.array_equal(ours["reads"], spacr["reads"]), "the reads differ"
    assert ours["bases"].shape == spacr["bases"].shape and np.array_equal(ours["bases"], spacr["bases"]), \
        "the intensities differ"


def chain_part(quick: bool, repeat: int) -> None:
    """The whole decode, spaCR's chain and the ``ops`` chain in interleaved runs, the best of each."""
    from spacr_accel_core import last_dispatch

    cycles, side, spots = (4, 512, 600) if quick else (11, 1480, 6000)
    field = synthesise(cycles, side, spots)
    print(f"the whole chain: one field of {cycles} cycles x 4 channels x {side}^2 float32, {spots} spots; "
          f"best of {repeat}")
    runs = rounds({"spacr": lambda: _run_chain(spacr_chain, field.stack),
                   "ops": lambda: _run_chain(ops_chain, field.stack)}, repeat)
    spacr, spacr_steps, _ = min(runs["spacr"], key=lambda run: run[1].total)
    ours, ours_steps, _ = min(runs["ops"], key=lambda run: run[1].total)
    spacr_cpu, ours_cpu = (min(run[2] for run in runs[side]) for side in ("spacr", "ops"))
    check(spacr, ours, field)
    print(f"same shifts, {len(ours['reads'])} reads and their {ours['bases'].size} intensities in both chains "
          f"(the last op served by {last_dispatch().backend})")
    print(f"{'step':<20}{'spaCR s':>10}{'share':>8}{'ops s':>10}{'share':>8}{'ratio':>9}")
    spacr_time, ours_time = spacr_steps.total, ours_steps.total
    for step, theirs in spacr_steps.seconds.items():
        mine = ours_steps.seconds[step]
        print(f"{step:<20}{theirs:>10.3f}{theirs / spacr_time:>8.1%}{mine:>10.3f}{mine / ours_time:>8.1%}"
              f"{mine / theirs:>8.3f}x")
    ratio = ours_time / spacr_time
    print(f"{'whole chain':<20}{spacr_time:>10.3f}{'':>8}{ours_time:>10.3f}{'':>8}{ratio:>8.3f}x  "
          f"(target <= 0.3x: {'meets' if ratio <= 0.3 else 'MISSES'})")
    print(f"CPU seconds (all threads): spaCR's chain {spacr_cpu:.3f}, the ops chain {ours_cpu:.3f} "
          "(on a shared machine, the work itself; wall time depends on what else runs)")


# ---- its two steps: window maxima and registration ---------------------------------------------------


def spacr_loop(stack: np.ndarray, peaks: np.ndarray, window: int = 1) -> np.ndarray:
    """spaCR's extraction, as it is written: a loop over reads, the window's maximum of every plane."""
    cycles, channels, height, width = stack.shape
    out = np.zeros((peaks.shape[0], cycles, channels), np.float32)
    for i, (y, x) in enumerate(peaks):
        top, bottom = max(0, y - window), min(height, y + window + 1)
        left, right = max(0, x - window), min(width, x + window + 1)
        out[i] = stack[:, :, top:bottom, left:right].max(axis=(2, 3))
    return out


def _step_row(label: str, times: dict[str, Any], ours: str, theirs: str, target: float) -> None:
    print("  " + ratio_row(label, times[ours].best, times[theirs].best, target=target, width=58,
                           note=f"; CPU s {times[ours].least_cpu:.3f} / {times[theirs].least_cpu:.3f}"))


def window_rows(backends: list[str | None], quick: bool, repeat: int) -> None:
    from spacr_accel_core import last_dispatch, ops

    cycles, side, reads = (3, 512, 2_000) if quick else (11, 1480, 10_000)
    rng = np.random.default_rng(0)
    stack = rng.normal(100.0, 10.0, size=(cycles, 4, side, side)).astype(np.float32)
    peaks = rng.integers(0, side, size=(reads, 2))
    spacr = spacr_loop(stack, peaks)
    filtered = np.moveaxis(ops.maximum_filter(stack, 3)[..., peaks[:, 0], peaks[:, 1]], -1, 0)
    print(f"window_maxima: {reads:,} reads in ({cycles}, 4, {side}, {side}) float32, size 3")
    for backend in backends:
        got = ops.window_maxima(stack, peaks, 3, backend=backend)
        assert np.array_equal(got, spacr) and np.array_equal(got, filtered), "window maxima differ"
        served = last_dispatch()
        times = side_by_side({
            "ours": lambda backend=backend: ops.window_maxima(stack, peaks, 3, backend=backend),
            "loop": lambda: spacr_loop(stack, peaks),
            "filter": lambda: ops.maximum_filter(stack, 3)[..., peaks[:, 0], peaks[:, 1]],
        }, repeat)
        name = backend or f"dispatch ({served.backend if served else '?'})"
        _step_row(f"[{name}] window_maxima / spaCR's loop", times, "ours", "loop", 0.05)
        _step_row(f"[{name}] window_maxima / maximum_filter + indexing", times, "ours", "filter", 0.2)


def registration_rows(backends: list[str | None], quick: bool, repeat: int) -> None:
    import cv2

    from spacr_accel_core import ops

    side, pairs = (512, 8) if quick else (1480, 44)
    rng = np.random.default_rng(1)
    first = rng.normal(100.0, 10.0, size=(pairs, side, side)).astype(np.float32)
    shifts = rng.integers(-60, 60, size=(pairs, 2))
    second = np.stack([np.roll(f, tuple(-s), axis=(0, 1)) for f, s in zip(first, shifts, strict=True)])
    second += rng.normal(0.0, 1.0, size=second.shape).astype(np.float32)
    dy, dx, ratio = spacr_phase_correlate(first[0], second[0])
    print(f"phase_correlate: one {side}x{side} float32 pair; {pairs} pairs in one call")
    for backend in backends:
        one = ops.phase_correlate(first[0], second[0], backend=backend)
        assert (one.dy, one.dx) == (dy, dx) and abs(one.peak_ratio - ratio) <= 1e-9 * ratio
        stacked = ops.phase_correlate(first, second, backend=backend)
        assert np.array_equal(np.stack([stacked.dy, stacked.dx], axis=1), shifts), "stack shifts differ"
        times = side_by_side({
            "ours": lambda backend=backend: ops.phase_correlate(first[0], second[0], backend=backend),
            "spacr": lambda: spacr_phase_correlate(first[0], second[0]),
            "cv2": lambda: cv2.phaseCorrelate(first[0], second[0]),
            "stack": lambda backend=backend: ops.phase_correlate(first, second, backend=backend),
            "singles": lambda backend=backend: [ops.phase_correlate(a, b, backend=backend)
                                                for a, b in zip(first, second, strict=True)],
        }, repeat)
        name = backend or f"dispatch ({stacked.backend})"
        _step_row(f"[{name}] phase_correlate / spaCR's NumPy path", times, "ours", "spacr", 0.5)
        _step_row(f"[{name}] phase_correlate / cv2.phaseCorrelate", times, "ours", "cv2", 1.0)
        _step_row(f"[{name}] {pairs} pairs in one call / {pairs} single calls", times, "stack", "singles", 0.8)


def reference_cycle_rows(backends: list[str | None], quick: bool, repeat: int) -> None:
    """44 pairs in spaCR's decode layout: every cycle's channel registered to that channel of one
    reference cycle, the reference passed as a broadcast view (how spaCR's chain calls it)."""
    from spacr_accel_core import ops

    side, cycles = (512, 2) if quick else (1480, 11)
    rng = np.random.default_rng(2)
    reference = rng.normal(100.0, 10.0, size=(4, side, side)).astype(np.float32)
    shifts = rng.integers(-60, 60, size=(cycles, 4, 2))
    moving = np.stack([[np.roll(reference[c], tuple(-shifts[k, c]), axis=(0, 1)) for c in range(4)]
                       for k in range(cycles)])
    moving += rng.normal(0.0, 1.0, size=moving.shape).astype(np.float32)
    fixed = np.broadcast_to(reference, moving.shape)
    print(f"phase_correlate: {cycles} cycles x 4 channels against one reference cycle (4 distinct reference fields)")
    for backend in backends:
        stacked = ops.phase_correlate(fixed, moving, backend=backend)
        assert np.array_equal(np.stack([stacked.dy, stacked.dx], axis=-1), shifts), "stack shifts differ"
        times = side_by_side({
            "stack": lambda backend=backend: ops.phase_correlate(fixed, moving, backend=backend),
            "singles": lambda backend=backend: [ops.phase_correlate(reference[c], moving[k, c], backend=backend)
                                                for k in range(cycles) for c in range(4)],
        }, repeat)
        name = backend or f"dispatch ({stacked.backend})"
        _step_row(f"[{name}] {cycles * 4} pairs on a reference cycle / single calls", times, "stack", "singles", 0.8)


def steps_part(quick: bool, repeat: int, backends: list[str | None]) -> None:
    print(f"the chain's two steps: best of {repeat} interleaved repeats")
    window_rows(backends, quick, repeat)
    registration_rows(backends, quick, repeat)
    reference_cycle_rows(backends, quick, repeat)


# ---- its filters on numba, against SciPy and OpenCV ---------------------------------------------------


def _same_bits(got: np.ndarray, expected: np.ndarray) -> bool:
    nan = np.isnan(expected)
    return bool(np.array_equal(np.isnan(got), nan)) and bool(
        (got.view(np.uint32)[~nan] == expected.view(np.uint32)[~nan]).all())


def _filter_row(label: str, ours: Callable[[], object], peer: str, theirs: Callable[[], object], repeat: int,
                target: float, note: str = "") -> None:
    """Ours against the peer, alternately so that both see the same machine load, and the CPU seconds
    each spent (all threads together): on a shared machine, how much work each did when the wall
    times are noisy."""
    times = side_by_side({"ours": ours, "theirs": theirs}, repeat)
    print(ratio_row(label, times["ours"].best, times["theirs"].best, peer=peer, target=target,
                    note=f"; CPU seconds {times['ours'].least_cpu:.3f} vs {times['theirs'].least_cpu:.3f}{note}"))


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
    times = side_by_side({"ours": ours_laplace, "scipy": scipy_laplace, "cv2": cv_laplace}, repeat)
    cpu = {name: timing.least_cpu for name, timing in times.items()}
    print(ratio_row(label, times["ours"].best, times["scipy"].best, peer="scipy (loop of fields)", target=0.2,
                    note=f"; CPU seconds {cpu['ours']:.3f} vs {cpu['scipy']:.3f}  "
                         f"[{served.backend if served else '?'}; bit-identical: {_same_bits(ours_out, scipy_out)}]"))
    print(ratio_row(label, times["ours"].best, times["cv2"].best, peer="cv2.sepFilter2D x 2", target=1.0,
                    note=f"; CPU seconds {cpu['ours']:.3f} vs {cpu['cv2']:.3f}  "
                         f"[OpenCV's max |difference| {float(np.max(np.abs(cv_out - ours_out))):.2e}]"))


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

    times = side_by_side({"ours": ours_gaussian, "scipy": scipy_gaussian, "cv2": cv_gaussian}, repeat)
    cpu = {name: timing.least_cpu for name, timing in times.items()}
    print(ratio_row("gaussian_filter 2960^2, sigma 3", times["ours"].best, times["scipy"].best, peer="scipy",
                    target=0.2, note=f"; CPU seconds {cpu['ours']:.3f} vs {cpu['scipy']:.3f}  "
                                     f"[bit-identical: {_same_bits(out, reference)}]"))
    print(ratio_row("gaussian_filter 2960^2, sigma 3", times["ours"].best, times["cv2"].best,
                    peer="cv2.GaussianBlur", target=1.0,
                    note=f"; CPU seconds {cpu['ours']:.3f} vs {cpu['cv2']:.3f}  "
                         f"[OpenCV's max |difference| {float(np.max(np.abs(blurred - out))):.2e}]"))


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

    ours_minimum()
    same = _same_bits(low, ndimage.minimum_filter(plane, 5, mode="reflect"))
    # a millisecond each: many samples
    _filter_row("minimum_filter 1480^2, size 5, reflect", ours_minimum, "cv2.erode", cv_minimum, repeat * 20, 1.0,
                f"  [bit-identical to scipy: {same}]")


def filters_part(quick: bool, repeat: int) -> None:
    import cv2

    import spacr_accel_numba
    from spacr_accel_core.toolkit import cpu_threads

    assert spacr_accel_numba.warm(timeout=600), spacr_accel_numba.failure()
    print(f"the chain's filters on numba: threads: ours {cpu_threads()}, OpenCV {cv2.getNumThreads()}; "
          f"best of {repeat} interleaved repeats")
    laplace_rows(8 if quick else 44, repeat)
    gaussian_rows(repeat)
    minimum_rows(repeat)


PARTS = ("chain", "steps", "filters")
"""The parts, in the order they run; ``--only`` picks some."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="4 cycles of 512 x 512 for the chain, a smaller stack and fewer pairs for the steps, "
                             "8 fields instead of 44 for the filters")
    parser.add_argument("--only", nargs="+", choices=PARTS, default=PARTS, help="the parts to run")
    parser.add_argument("--repeat", type=int, default=None,
                        help="interleaved runs of each contender; the best counts "
                             "(default: 1 for the chain, 3 for the steps, 5 for the filters, 3 with --quick)")
    parser.add_argument("--backends", default="numpy,numba",
                        help="the steps' backends to force besides automatic dispatch (comma-separated; '' for none)")
    arguments = parser.parse_args()
    os.environ.setdefault("SPACR_ACCEL_DISABLE", "opencv,openvino")
    from spacr_accel_core import warm_up

    warm_up()
    print(f"{os.cpu_count()} CPUs")
    if "chain" in arguments.only:
        chain_part(arguments.quick, arguments.repeat or 1)
    if "steps" in arguments.only:
        backends: list[str | None] = [None, *[name for name in arguments.backends.split(",") if name]]
        steps_part(arguments.quick, arguments.repeat or 3, backends)
    if "filters" in arguments.only:
        filters_part(arguments.quick, arguments.repeat or (3 if arguments.quick else 5))


if __name__ == "__main__":
    main()
