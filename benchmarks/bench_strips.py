"""spaCR's stitching registration against the patched seam, per call, on the strips a well's tiles give.

WHAT IS TIMED. ``spacr.ops_register.register_edge`` on pairs of neighbouring uint16 tiles, both
axes, for each tile side asked (spaCR cuts a 30 % strip from each tile's touching edge and phase
correlates the two strips: 115 x 384 for a 384 px tile, 444 x 1480 for the plate's 1480 px), as
spaCR's own function and as the patch serves it (``patch.install()``), interleaved, the best of
``--repeat`` rounds each. Every strip pair is new, as in a stitch (no reference
repeats). The patched side's first call in the process is timed apart: spaCR's own first call
imports its card probes (torch), which both sides pay once.

IDENTICAL OR NOT COUNTED. Each patched registration is compared field by field with spaCR's; a
difference is an error, not a row.

Needs spaCR (``pip install -r benchmarks/requirements-peers.txt``).
Run: ``python benchmarks/bench_strips.py [--sizes 384 512 1480] [--repeat 7]``.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
from _timing import side_by_side  # the benchmarks' one timer, beside this file

from spacr_accel_core import patch


def _tiles(size: int, count: int, seed: int) -> list[np.ndarray]:
    """Tiles of blurred blobs over noise, each the next one's neighbour by a known overlap."""
    rng = np.random.default_rng(seed)
    overlap = round(size * 0.14)
    canvas = rng.normal(300.0, 20.0, (size, count * (size - overlap) + overlap))
    for _ in range(canvas.size // 900):
        y, x = int(rng.integers(4, size - 4)), int(rng.integers(4, canvas.shape[1] - 4))
        canvas[y - 3:y + 4, x - 3:x + 4] += rng.uniform(500.0, 3000.0)
    step = size - overlap
    return [np.clip(canvas[:, k * step:k * step + size], 0, 65535).astype(np.uint16) for k in range(count)]


def _registered(register: Callable[..., Any], pairs: list[tuple[np.ndarray, np.ndarray, str]],
                overlap: int) -> list[Any]:
    """``register``'s answers over ``pairs``."""
    return [register(first, second, axis, expected_overlap=overlap, tolerance=3, gpu=False)
            for first, second, axis in pairs]


def main() -> None:
    """Print each tile side's per-call times and the patched/spaCR ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[384, 512, 1480], help="tile sides in px")
    parser.add_argument("--repeat", type=int, default=7, help="rounds (the best is kept)")
    options = parser.parse_args()

    from spacr import ops_register

    own = ops_register.phase_correlate  # spaCR's own, before the patch
    if not patch.install():
        raise SystemExit("the patch found no spaCR it knows; nothing to compare")
    register = ops_register.register_edge  # spaCR's own, calling whatever phase_correlate its module holds
    seam = ops_register.phase_correlate

    def spacrs(*args: Any, **kwargs: Any) -> Any:
        ops_register.phase_correlate = own
        try:
            return register(*args, **kwargs)
        finally:
            ops_register.phase_correlate = seam

    print(f"spacr.ops_register.register_edge per call, best of {options.repeat}; ratio = patched / spaCR")
    print(f"    {'tile':>5}  {'axis':<10} {'strip':>11}  {'spaCR ms':>9}  {'patched ms':>10}  {'ratio':>5}")
    for size in options.sizes:
        tiles = _tiles(size, 5, size)
        overlap = round(size * 0.14)
        for axis in ("horizontal", "vertical"):
            shown = tiles if axis == "horizontal" else [tile.T.copy() for tile in tiles]
            pairs = [(a, b, axis) for a, b in itertools.pairwise(shown)]
            band = max(8, min(size, round(size * ops_register.STRIP_FRACTION)))
            strip = f"{band}x{size}" if axis == "vertical" else f"{size}x{band}"
            first = side_by_side({"first": lambda p=pairs[0], o=overlap: register(
                *p, expected_overlap=o, tolerance=3, gpu=False)}, 1)["first"].best
            timed = side_by_side({"spaCR": lambda p=pairs, o=overlap: _registered(spacrs, p, o),
                                  "patched": lambda p=pairs, o=overlap: _registered(register, p, o)}, options.repeat)
            if timed["patched"].answer != timed["spaCR"].answer:
                raise SystemExit(f"{size} px {axis}: the patched registrations differ from spaCR's")
            best = {name: timing.best / len(pairs) for name, timing in timed.items()}
            print(f"    {size:>5}  {axis:<10} {strip:>11}  {best['spaCR'] * 1e3:9.2f}  {best['patched'] * 1e3:10.2f}"
                  f"  {best['patched'] / best['spaCR']:5.2f}   (patched first call {first * 1e3:.1f} ms)")
    print(patch.report().format())


if __name__ == "__main__":
    main()
