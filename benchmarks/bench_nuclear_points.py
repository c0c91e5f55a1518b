"""spaCR's ``ops_phenotype.nuclear_points`` on a phenotype field of the real size, its own and patched,
side by side in one process.

WHAT IS TIMED. One 2960 x 2960 float32 nuclear stain (Gaussian nuclei of drawn brightness and size
on camera noise, whole counts, from a seed), given to spaCR's own function (the patch uninstalled)
and to the patched one (the seam: the registry's Gaussian, percentile and local maxima, the spacing
walked only where peaks crowd), alternating call by call so that both meet the same machine. The
compiled backends are made ready first (``warm_up``), and one untimed call on each side loads what
they load. The patched answer is compared with spaCR's bit for bit; a difference exits non-zero.

Prints each side's median and the ratio, and the patch's report (which backend served).

Needs spaCR and scikit-image (``pip install -r benchmarks/requirements-peers.txt``).
Run: ``python benchmarks/bench_nuclear_points.py [--side 2960] [--nuclei 2500] [--repeat 5] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from _timing import side_by_side  # the benchmarks' one timer, beside this file

import spacr_accel_core
from spacr_accel_core import patch


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=2960, help="the field's side in px (spaCR's 20X: 2960)")
    parser.add_argument("--nuclei", type=int, default=2500, help="nuclei in the field")
    parser.add_argument("--repeat", type=int, default=5, help="timed calls on each side")
    parser.add_argument("--seed", type=int, default=0, help="the field's seed")
    args = parser.parse_args()
    for name in ("side", "nuclei", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")

    import spacr.ops_phenotype as phenotype

    spacr_accel_core.warm_up(timeout=900)
    plane = nuclear_stain(args.side, args.nuclei, args.seed)
    # the patch taken out and put back between the calls (untimed), the first call of each side
    # untimed: it loads what each side loads
    timed = side_by_side({"own": lambda: phenotype.nuclear_points(plane),
                          "patched": lambda: phenotype.nuclear_points(plane)}, args.repeat, warm=True,
                         before={"own": patch.uninstall, "patched": patch.install})
    own, served = timed["own"].answer, timed["patched"].answer
    if served.dtype != own.dtype or served.shape != own.shape or served.tobytes() != own.tobytes():
        print(f"the patched answer differs from spaCR's: {served.shape} against {own.shape}", file=sys.stderr)
        return 1
    own_median, patched_median = timed["own"].median, timed["patched"].median
    print(f"nuclear_points on {args.side}^2 float32 ({args.nuclei} nuclei, {own.shape[0]} centres), "
          f"median of {args.repeat}")
    print(f"    spaCR's own {own_median * 1e3:8.1f} ms   patched {patched_median * 1e3:8.1f} ms   "
          f"ratio {own_median / patched_median:5.2f}x")
    print(patch.report())
    patch.uninstall()
    return 0


if __name__ == "__main__":
    sys.exit(main())
