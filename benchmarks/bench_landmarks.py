"""The landmarks operations against spaCR's own code, and spaCR's two landmark seams patched against
unpatched, side by side in one run.

spaCR aligns a phenotype field to the sequencing nuclei around it from landmarks: the field's
nuclear centres (``ops_phenotype.nuclear_points``: a Gaussian, a percentile and scikit-image's
``peak_local_max``) and the similarity their triangles agree on (``ops_merge.align_by_triangles``:
Python loops over Delaunay triangles and one fit per descriptor match). The registry's
``landmarks`` family answers both to the bit (``spaced_peaks``, ``match_triangles``), and the patch
serves the two seams with it. This benchmark times both levels, because either can hide the other:
an operation can be fast while the seam around it spends its time elsewhere (the smoothing, the
percentile, spaCR's own ``min_votes`` and ``None``), and a seam's ratio says nothing about which
part of it was won.

THE OPERATIONS (``--only operations``), on the inputs spaCR gives them:

- ``ops.local_maxima`` (window ``2 * 8 + 1``, above the 99th percentile) then ``ops.spaced_peaks``
  (spacing 8) against scikit-image's ``peak_local_max(min_distance=8, threshold_abs=...)``, as
  ``nuclear_points`` calls it, on the smoothed stain (``scipy.ndimage.gaussian_filter``, sigma 3:
  spaCR's own smoothing); and ``ops.spaced_peaks`` alone, the maxima given, against the same.
- ``ops.match_triangles`` against spaCR's ``align_by_triangles`` on one anchor pair
  (``spacr_accel_core.testing.anchor_field``: ``--sources`` phenotype nuclei against ``--targets``
  sequencing nuclei, whole-pixel centres, the scale 0.19 and 3 degrees of the synthetic plate).

THE SEAMS (``--only seams``): ``nuclear_points`` on the stain and ``align_by_triangles`` on the
anchor pair, each spaCR's own (``patch.uninstall()``) against the patched one (``patch.install()``),
the patch taken out and put back, untimed, before each call. Then the patch's report: which backend
served each seam and what it left to spaCR.

THE STAIN. One ``--side`` x ``--side`` float32 nuclear channel (spaCR's 20X field: 2960): camera
noise and ``--nuclei`` Gaussian nuclei of drawn brightness and size, whole counts, from ``--seed``
(the anchor pair's seed is one more).

IDENTICAL OR NOT COUNTED. Every answer is compared with spaCR's (scikit-image's for the peaks) bit
for bit: the peaks' order and dtype, the triangle match's scale, rotation and translation; a
difference exits non-zero. The compiled backends are made ready first (``warm_up``), one untimed
call of each contender loads what it loads, and the contenders run in interleaved rounds
(``benchmarks/_timing.py``); each row prints the best of ``--repeat`` runs on each side, their
ratio (ours over theirs) and the speed-up.

Needs spaCR, SciPy and scikit-image (``pip install -r benchmarks/requirements-peers.txt``).
Run::

    python benchmarks/bench_landmarks.py                    # a 2960^2 stain, 100 to 2,000 nuclei
    python benchmarks/bench_landmarks.py --quick            # a 1024^2 stain, 50 to 600 nuclei: seconds
    python benchmarks/bench_landmarks.py --only seams --side 2960 --nuclei 2500 --repeat 5
    python benchmarks/bench_landmarks.py --sources 100 --targets 2000 --seed 0
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from _answers import first_difference  # the benchmarks' bit-for-bit check, beside this file
from _timing import side_by_side  # the benchmarks' one timer, beside this file

import spacr_accel_core
from spacr_accel_core import ops, patch
from spacr_accel_core.testing import anchor_field

PARTS = ("operations", "seams")
"""The parts, in the order they run; ``--only`` picks one."""

SIGMA, MIN_DISTANCE, PERCENTILE = 3.0, 8, 99.0
"""``nuclear_points``' defaults: the smoothing, the peaks' spacing, the intensity floor's percentile."""

FULL = {"side": 2960, "nuclei": 2500, "sources": 100, "targets": 2000, "repeat": 5}
QUICK = {"side": 1024, "nuclei": 300, "sources": 50, "targets": 600, "repeat": 2}
"""The sizes when no flag names them: spaCR's field and the plate's anchor pair, or a smoke run's."""

Row = tuple[str, str, float, float]
"""A printed row: what was timed, its peer, the peer's best seconds, ours."""


def nuclear_stain(side: int, nuclei: int, seed: int) -> np.ndarray:
    """A nuclear channel: camera noise, nuclei as Gaussians of 6 to 12 px, rounded to whole counts.

    :param side: the field's side in pixels.
    :param nuclei: how many nuclei.
    :param seed: the generator's seed.
    """
    rng = np.random.default_rng(seed)
    plane = rng.normal(400.0, 30.0, (side, side)).astype(np.float32)
    for y, x, peak, radius in zip(rng.uniform(0, side, nuclei), rng.uniform(0, side, nuclei),
                                  rng.uniform(1500, 4000, nuclei), rng.uniform(6, 12, nuclei), strict=True):
        top, bottom = int(max(0, y - 3 * radius)), int(min(side, y + 3 * radius + 1))
        left, right = int(max(0, x - 3 * radius)), int(min(side, x + 3 * radius + 1))
        ys, xs = np.mgrid[top:bottom, left:right]
        plane[top:bottom, left:right] += (peak * np.exp(-((ys - y) ** 2 + (xs - x) ** 2)
                                                        / (2 * radius * radius))).astype(np.float32)
    return np.round(plane).astype(np.float32)


def anchor_pair(sources: int, targets: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One anchor pair as the plate gives it: phenotype and sequencing nuclei, whole-pixel centres.

    :param sources: phenotype nuclei.
    :param targets: sequencing nuclei.
    :param seed: the generator's seed.
    """
    pair = anchor_field(sources=sources, targets=targets, scale=0.19, degrees=3.0, seed=seed)
    return np.round(pair.source), np.round(pair.target)


def _same(got: Any, expected: Any, words: str) -> None:
    """Exit non-zero, naming the first difference, unless ``got`` is ``expected`` bit for bit."""
    found = first_difference(got, expected)
    if found:
        raise SystemExit(f"{words}: the answer differs from spaCR's: {found}")


def _timed(words: str, peer: str, theirs: Callable[[], Any], ours: Callable[[], Any], repeat: int,
           same: Callable[[Any, Any], None], **options: Any) -> Row:
    """Both calls side by side (one untimed call of each first), their answers checked; the row."""
    timed = side_by_side({"theirs": theirs, "ours": ours}, repeat, warm=True, alternate=True, **options)
    same(timed["ours"].answer, timed["theirs"].answer)
    return words, peer, timed["theirs"].best, timed["ours"].best


def operation_rows(plane: np.ndarray, source: np.ndarray, target: np.ndarray, repeat: int) -> list[Row]:
    """``local_maxima`` + ``spaced_peaks`` and ``spaced_peaks`` alone against ``peak_local_max`` on the
    smoothed stain; ``match_triangles`` against spaCR's ``align_by_triangles`` on the anchor pair."""
    from scipy import ndimage
    from skimage.feature import peak_local_max
    from spacr import ops_merge

    patch.uninstall()  # spaCR's own align_by_triangles
    smooth = ndimage.gaussian_filter(plane, SIGMA)
    threshold = float(np.percentile(smooth, PERCENTILE))
    window = 2 * MIN_DISTANCE + 1
    maxima = ops.local_maxima(smooth, window, threshold=threshold)

    def peaks() -> np.ndarray:
        return peak_local_max(smooth, min_distance=MIN_DISTANCE, threshold_abs=threshold)

    def check_peaks(got: np.ndarray, expected: np.ndarray) -> None:
        _same(got, expected, "peaks")
        if got.flags.c_contiguous != expected.flags.c_contiguous:
            raise SystemExit("peaks: the answer's memory layout differs from scikit-image's")

    side = plane.shape[0]
    rows = [_timed(f"local_maxima + spaced_peaks, {side}^2", "peak_local_max", peaks,
                   lambda: ops.spaced_peaks(smooth, ops.local_maxima(smooth, window, threshold=threshold),
                                            MIN_DISTANCE), repeat, check_peaks),
            _timed(f"spaced_peaks alone ({maxima.shape[0]:,} maxima given)", "peak_local_max", peaks,
                   lambda: ops.spaced_peaks(smooth, maxima, MIN_DISTANCE), repeat, check_peaks)]

    def check_match(got: Any, expected: Any) -> None:
        if expected is None:
            raise SystemExit("match_triangles: spaCR found too few votes on this pair (try other sizes)")
        _same((got.scale, got.rotation, got.translation), expected, "match_triangles")

    rows.append(_timed(f"match_triangles, {source.shape[0]:,} to {target.shape[0]:,} nuclei",
                       "spaCR align_by_triangles", lambda: ops_merge.align_by_triangles(source, target),
                       lambda: ops.match_triangles(source, target), repeat, check_match))
    return rows


def seam_rows(plane: np.ndarray, source: np.ndarray, target: np.ndarray, repeat: int) -> list[Row]:
    """``nuclear_points`` and ``align_by_triangles``, spaCR's own against patched, the patch taken out
    and put back (untimed) before each call; the seams looked up in spaCR's modules at each call."""
    from spacr import ops_merge, ops_phenotype

    switch = {"before": {"theirs": patch.uninstall, "ours": patch.install}}
    rows = [_timed(f"nuclear_points, {plane.shape[0]}^2", "spaCR's own",
                   lambda: ops_phenotype.nuclear_points(plane), lambda: ops_phenotype.nuclear_points(plane),
                   repeat, lambda got, expected: _same(got, expected, "nuclear_points"), **switch),
            _timed(f"align_by_triangles, {source.shape[0]:,} to {target.shape[0]:,} nuclei", "spaCR's own",
                   lambda: ops_merge.align_by_triangles(source, target),
                   lambda: ops_merge.align_by_triangles(source, target),
                   repeat, lambda got, expected: _same(got, expected, "align_by_triangles"), **switch)]
    patch.uninstall()
    return rows


def _print(title: str, rows: list[Row], repeat: int) -> None:
    print(f"\n{title} (best of {repeat}, interleaved; identical answers, bit for bit)")
    print(f"{'':<44} {'peer':<26} {'peer ms':>9} {'ours ms':>9} {'ratio':>8} {'speed-up':>9}")
    for words, peer, theirs, ours in rows:
        print(f"{words:<44} {peer:<26} {theirs * 1e3:>9.2f} {ours * 1e3:>9.2f} {ours / theirs:>7.3f}x "
              f"{theirs / ours:>8.1f}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=PARTS, help="one part: the operations, or the seams")
    parser.add_argument("--quick", action="store_true",
                        help="smaller sizes for a smoke run (a flag naming a size still wins)")
    parser.add_argument("--side", type=int, help="the stain's side in px (default 2960, spaCR's 20X; --quick 1024)")
    parser.add_argument("--nuclei", type=int, help="nuclei in the stain (default 2500; --quick 300)")
    parser.add_argument("--sources", type=int, help="the anchor pair's phenotype nuclei (default 100; --quick 50)")
    parser.add_argument("--targets", type=int,
                        help="the anchor pair's sequencing nuclei (default 2000; --quick 600)")
    parser.add_argument("--repeat", type=int, help="timed calls on each side (default 5; --quick 2)")
    parser.add_argument("--seed", type=int, default=0, help="the stain's seed; the pair's is one more (default 0)")
    args = parser.parse_args(argv)
    for name, default in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    for name in FULL:
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.side <= 2 * MIN_DISTANCE:
        parser.error(f"--side must be more than {2 * MIN_DISTANCE} (the peaks' border on both sides)")
    if args.sources < 3 or args.targets < 3:
        parser.error("--sources and --targets must be at least 3 (a triangle)")

    print("warm-up:", spacr_accel_core.warm_up(timeout=900))
    plane = nuclear_stain(args.side, args.nuclei, args.seed)
    source, target = anchor_pair(args.sources, args.targets, args.seed + 1)
    print(f"stain {args.side}^2 float32, {args.nuclei:,} nuclei; anchor pair {args.sources:,} to "
          f"{args.targets:,} whole-pixel nuclei")
    if args.only in (None, "operations"):
        _print("the operations against spaCR's own code", operation_rows(plane, source, target, args.repeat),
               args.repeat)
    if args.only in (None, "seams"):
        _print("the seams, patched against spaCR's own", seam_rows(plane, source, target, args.repeat), args.repeat)
        for seam in patch.report().seams:
            if seam.seam.endswith(("nuclear_points", "align_by_triangles")):
                served = ", ".join(f"{name} ({calls})" for name, calls, _ in seam.served)
                passed = ", ".join(f"{why} ({calls})" for why, calls, _ in seam.passed)
                print(f"{seam.seam}: " + "; ".join(filter(None, [served and f"served by {served}",
                                                                passed and f"left to spaCR: {passed}"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
