"""spaCR's integer translation and spot score against the patched seams, and ``ops.translate`` and
``ops.spot_score`` on each installed backend against the NumPy code they replace, side by side in
one run.

WHAT IS TIMED. A field's decode calls ``spacr.ops_cycles._translate`` 43 times (each 1480 x 1480
float32 base channel but the reference moved by its registered shift) and
``spacr.ops_sbs.estimate_read_locations`` once (the standard deviation over 11 cycles, then the mean
over 4 channels, of the whole 11 x 4 x 1480 x 1480 stack), and both run inside
``spacr.ops_cycles.align_field``, which the patch serves whole (its registrations through their own
seams, the pixels copied twice instead of spaCR's four times). Each is run as
spaCR's own function and as
the patch serves it (``patch.install()``; the registry's best backend, numba warmed first),
interleaved, the best of ``--repeat`` runs each. Then each backend's ``ops.translate`` of the 43
planes in one call (one shift per plane) against spaCR's 43 calls, and each backend's
``ops.spot_score`` against NumPy's ``stack.std(axis=0).mean(axis=0)``, and the stack merely read once
on every core (the memory floor: how far any one-pass score can get ahead of NumPy's).

WHY THE TRANSLATION PASSES THROUGH ON A CPU. A translation is one copy of each plane, and NumPy's
slice assignment already copies at memory speed (a plain ``np.copy`` of one plane is most of
``_translate``'s time): no CPU backend can be much faster, so the seam is served only by a backend
above the NumPy floor (a card) and the report says so.

IDENTICAL OR NOT COUNTED. Every answer is compared bit for bit with spaCR's (NumPy's); a difference
is an error, not a row.

Needs spaCR (``pip install -r benchmarks/requirements-peers.txt``).
Run: ``python benchmarks/bench_planes.py [--repeat 3] [--quick] [--keep-memory]``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from _answers import first_difference  # the benchmarks' bit-for-bit check, beside this file
from _timing import side_by_side  # the benchmarks' one timer, beside this file

from spacr_accel_core import ops, patch, plugins, warm_up
from spacr_accel_core.testing import sbs_field


def _side_by_side(theirs: Callable[[], Any], mine: Callable[[], Any], repeat: int) -> tuple[float, Any, float, Any]:
    """The best of ``repeat`` interleaved runs of each, and each side's last answer: a fresh output's
    page faults and a shared machine's noise fall on both sides alike, never on whichever ran first."""
    timed = side_by_side({"theirs": theirs, "mine": mine}, repeat)
    return timed["theirs"].best, timed["theirs"].answer, timed["mine"].best, timed["mine"].answer


def _serving(operation: str) -> list[str]:
    """The backends that can run ``operation`` here, best first (the floor last)."""
    serves = {plugin.name for plugin in plugins() if operation in plugin.operations}
    return [name for name in ops.accelerated_backends() if name in serves]


def _same(got: Any, expected: Any, what: str) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    bits = np.dtype(f"u{expected.dtype.itemsize}")
    if got.dtype != expected.dtype or got.shape != expected.shape or not (
            (got.view(bits) == expected.view(bits)) | (np.isnan(got) & np.isnan(expected))).all():
        raise SystemExit(f"{what}: the answer differs from spaCR's (NumPy's)")


def _read_once(stack: np.ndarray) -> list[float]:
    """Every element of ``stack`` read once, a share per core, in parallel."""
    from concurrent.futures import ThreadPoolExecutor

    shares = np.array_split(stack.reshape(-1, stack.shape[-1]), os.cpu_count() or 1)
    with ThreadPoolExecutor(len(shares)) as pool:
        return list(pool.map(lambda share: float(share.max()), shares))


def _stack(quick: bool) -> np.ndarray:
    """A decode's ``(cycles, channels, Y, X)`` float32 intensities: a camera's background and
    bright spots that change base from cycle to cycle."""
    rng = np.random.default_rng(0)
    cycles, channels, side = (3, 4, 512) if quick else (11, 4, 1480)
    stack = (100.0 + 10.0 * rng.standard_normal((cycles, channels, side, side), dtype=np.float32)).astype(np.float32)
    for cycle in range(cycles):
        rows, columns = rng.integers(0, side, 3000), rng.integers(0, side, 3000)
        stack[cycle, rng.integers(0, channels, 3000), rows, columns] += np.float32(1500.0)
    return stack


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a 3 x 4 x 512^2 stack")
    parser.add_argument("--keep-memory", action="store_true",
                        help="keep freed memory in this process (patch.keep_freed_memory), for both sides alike")
    options = parser.parse_args(argv)
    if options.keep_memory:
        print(patch.keep_freed_memory().reason)
    try:
        import spacr.ops_cycles as spacr_cycles
        import spacr.ops_sbs as spacr_sbs
    except ImportError:
        print("spaCR is not installed: pip install -r benchmarks/requirements-peers.txt", file=sys.stderr)
        return 2
    warm_up("numba")
    stack = _stack(options.quick)
    planes = stack.reshape(-1, *stack.shape[-2:])[1:]  # every base channel but the reference
    rng = np.random.default_rng(1)
    shifts = rng.integers(-12, 13, size=(len(planes), 2))
    rows: list[tuple[str, float, float]] = []

    own_translate, own_score = spacr_cycles._translate, spacr_sbs.estimate_read_locations  # before the patch
    own_align = spacr_cycles.align_field
    assert patch.install()
    try:
        translate, score = spacr_cycles._translate, spacr_sbs.estimate_read_locations
        spent_own, expected_moved, spent, got = _side_by_side(
            lambda: [own_translate(p, dy, dx) for p, (dy, dx) in zip(planes, shifts, strict=True)],
            lambda: [translate(p, dy, dx) for p, (dy, dx) in zip(planes, shifts, strict=True)], options.repeat)
        for mine, theirs in zip(got, expected_moved, strict=True):
            _same(mine, theirs, "_translate")
        rows.append((f"_translate x {len(planes)} (patched)", spent_own, spent))
        spent_own, expected_score, spent, got = _side_by_side(lambda: own_score(stack), lambda: score(stack),
                                                              options.repeat)
        _same(got, expected_score, "estimate_read_locations")
        rows.append(("estimate_read_locations (patched)", spent_own, spent))
        # the alignment seam against spaCR's own align_field on a synthetic field whose channels and
        # cycles really move, both registering through the same served seams: the difference is
        # spaCR's copies of the pixels
        synthetic = sbs_field(size=stack.shape[-1], spots=2 * stack.shape[-1], cycles=stack.shape[0])
        field = {cycle: [synthetic.read_plane(source) for source in sources]
                 for cycle, sources in synthetic.task["planes"].items()}
        align = spacr_cycles.align_field
        spent_own, expected_field, spent, got_field = _side_by_side(
            lambda: own_align(field), lambda: align(field), options.repeat)
        difference = first_difference(got_field, expected_field)
        if difference is not None:
            raise SystemExit(f"align_field: the answer differs from spaCR's: {difference}")
        rows.append(("align_field (registrations alike)", spent_own, spent))
        report = patch.report()
    finally:
        patch.uninstall()

    moved_stack = np.stack(expected_moved)

    def spacr_loop() -> list[np.ndarray]:
        return [own_translate(p, dy, dx) for p, (dy, dx) in zip(planes, shifts, strict=True)]

    for name in _serving("translate"):
        def moved(name: str = name) -> np.ndarray:
            return ops.translate(planes, shifts, backend=name)
        spent_own, _, spent, got = _side_by_side(spacr_loop, moved, options.repeat)
        _same(got, moved_stack, f"translate on {name}")
        rows.append((f"ops.translate, {name}", spent_own, spent))

    def numpy_score() -> np.ndarray:
        return np.asarray(stack.std(axis=0).mean(axis=0))

    _same(numpy_score(), expected_score, "NumPy's own score")
    for name in _serving("spot_score"):
        def scored(name: str = name) -> np.ndarray:
            return ops.spot_score(stack, backend=name)
        spent_numpy, expected, spent, got = _side_by_side(numpy_score, scored, options.repeat)
        _same(got, expected, f"spot_score on {name}")
        rows.append((f"ops.spot_score, {name}", spent_numpy, spent))

    # The floor of any one-pass score: the stack read once on every core (NumPy's maximum of each
    # core's share, which releases the GIL), nothing written. A score cannot beat NumPy's by more
    # than NumPy's time over this one.
    spent_numpy, _, spent, _ = _side_by_side(numpy_score, lambda: _read_once(stack), options.repeat)
    rows.append(("the stack read once (the memory floor)", spent_numpy, spent))

    print(f"stack {stack.shape}, float32; the best of {options.repeat} each")
    print(f"{'step':<40} {'spaCR/NumPy':>12} {'registry':>10} {'speed-up':>9}")
    for label, own, mine in rows:
        print(f"{label:<40} {own * 1e3:>10.1f}ms {mine * 1e3:>8.1f}ms {own / mine:>8.2f}x")
    for seam in report.seams:
        if seam.seam.endswith(("_translate", "estimate_read_locations", "align_field")):
            served = ", ".join(f"{name} ({calls})" for name, calls, _ in seam.served)
            passed = ", ".join(f"{why} ({calls})" for why, calls, _ in seam.passed)
            print(f"{seam.seam}: " + "; ".join(filter(None, [served and f"served by {served}",
                                                            passed and f"left to spaCR: {passed}"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
