"""spaCR's level settings against the patched seams, and ops.percentiles against np.percentile,
side by side in one run.

WHAT IS TIMED. A field's decode calls ``spacr.ops_cycles._clipped`` 44 times (11 cycles x 4 base
channels of 1480 x 1480 float32) and ``sbs_mean_target`` 11 times (once per cycle, on its 4
channels). Each is run as spaCR's own function and as the patch serves it (``patch.install()``; the
registry's best backend, numba warmed first), interleaved, the best of ``--repeat`` runs each; then
``ops.percentiles`` of the 44-plane stack in one call against ``np.percentile`` plane by plane.
``_clipped`` is timed twice: with all 44 answers kept (each output fresh memory, taken page by page
from the operating system, which both sides pay alike) and with each answer dropped before the next
call, which is how spaCR's ``_align_channels`` uses it (a channel's clipped plane is registered and
let go), so each output reuses the memory of the one before.

IDENTICAL OR NOT COUNTED. Every patched answer is compared bit for bit with spaCR's; a difference
is an error, not a row.

Needs spaCR (``pip install -r benchmarks/requirements-peers.txt``).
Run: ``python benchmarks/bench_levels.py [--repeat 3] [--quick] [--keep-memory] [--backend numba|numpy]``.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np
from _timing import side_by_side  # the benchmarks' one timer, beside this file

from spacr_accel_core import config, ops, patch, warm_up


def _best(theirs: Callable[[], Any], mine: Callable[[], Any], repeat: int) -> tuple[float, Any, float, Any]:
    """The best of ``repeat`` interleaved runs of each side, and each side's last answer."""
    timed = side_by_side({"theirs": theirs, "mine": mine}, repeat)
    return timed["theirs"].best, timed["theirs"].answer, timed["mine"].best, timed["mine"].answer


def _same(got: Any, expected: Any) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    bits = np.dtype(f"u{got.dtype.itemsize}")
    if got.dtype != expected.dtype or got.shape != expected.shape or not (
            (got.view(bits) == expected.view(bits)) | (np.isnan(got) & np.isnan(expected))).all():
        raise SystemExit("the patched answer differs from spaCR's")


def _released(function: Callable[[np.ndarray], Any], planes: list[np.ndarray]) -> None:
    """Each plane's answer made and dropped before the next, as a caller that uses it once does."""
    for plane in planes:
        function(plane)


def _planes(quick: bool) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    count, side = (8, 512) if quick else (44, 1480)
    planes = []
    for _ in range(count):
        plane = (100.0 + 10.0 * rng.standard_normal((side, side), dtype=np.float32)).astype(np.float32)
        plane[rng.integers(0, side, 3000), rng.integers(0, side, 3000)] += np.float32(1500.0)
        planes.append(plane)
    return planes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--backend", default=None, help="force one backend for the registry's operations")
    parser.add_argument("--keep-memory", action="store_true",
                        help="keep freed memory in this process (patch.keep_freed_memory), for both sides alike")
    options = parser.parse_args()
    if options.keep_memory:
        print(patch.keep_freed_memory().reason)
    warm_up("numba")
    planes = _planes(options.quick)
    cycles = [planes[i:i + 4] for i in range(0, len(planes), 4)]
    forced = config.override(backends=[options.backend], only=True) if options.backend else contextlib.nullcontext()
    import spacr.ops_cycles as spacr_cycles

    own_clipped, own_target = spacr_cycles._clipped, spacr_cycles.sbs_mean_target  # spaCR's own, before the patch
    with forced:
        assert patch.install()
        try:
            clipped, target = spacr_cycles._clipped, spacr_cycles.sbs_mean_target
            rows = []
            for label, mine, theirs in (
                    (f"_clipped x {len(planes)}", lambda: [clipped(p) for p in planes],
                     lambda: [own_clipped(p) for p in planes]),
                    (f"sbs_mean_target x {len(cycles)}", lambda: [target(c) for c in cycles],
                     lambda: [own_target(c) for c in cycles])):
                spent_own, expected, spent, got = _best(theirs, mine, options.repeat)
                for a, b in zip(got, expected, strict=True):
                    _same(a, b)
                rows.append((label, spent_own, spent))
            # spaCR's own pattern: _align_channels registers each clipped channel and lets it go, so
            # the next call's output takes the same memory back instead of fresh pages (each output
            # above was compared; these are the same calls on the same planes)
            spent_own, _, spent, _ = _best(lambda: _released(own_clipped, planes), lambda: _released(clipped, planes),
                                           options.repeat)
            rows.append((f"_clipped x {len(planes)}, each released", spent_own, spent))
            stack = np.stack(planes)
            spent_own, expected, spent, got = _best(
                lambda: np.stack([np.percentile(p, [0.0, 90.0]) for p in planes]),
                lambda: ops.percentiles(stack, [0.0, 90.0]), options.repeat)
            _same(got, expected)
            rows.append((f"percentiles [0, 90] of {len(planes)} planes", spent_own, spent))
            report = patch.report()
        finally:
            patch.uninstall()
    print(f"{'step':<36} {'spaCR/NumPy':>12} {'registry':>10} {'ratio':>7}")
    for label, own, mine in rows:
        print(f"{label:<36} {own * 1e3:>10.1f}ms {mine * 1e3:>8.1f}ms {own / mine:>6.2f}x")
    for seam in report.seams:
        if seam.seam.endswith(("_clipped", "sbs_mean_target")):
            print(seam.seam, "served by", ", ".join(f"{name} ({calls})" for name, calls, _ in seam.served))


if __name__ == "__main__":
    main()
