"""How the patch serves spaCR's two point steps: ``ops_sbs.attribute_reads`` (one read at a time in
Python, in spaCR) and ``ops_phenotype.seed_by_scaled_pairs`` (one KD-tree query per candidate
transform, in spaCR): the same answers, bit for bit, or the call left to spaCR.

THE PAIR SEARCH IS SPACR'S OWN SEARCH, BATCHED (:mod:`spacr_accel_core.kit._pair_scoring`): its
trials replayed, its candidates in its order, each scored a batch at a time by the registry's
:func:`spacr_accel_core.ops.count_within`, and the first best one's transform by spaCR's own
expressions. This module decides whether a call may be searched that way, and hands it over.

Any argument whose arithmetic is not plain float64 (a ``float32`` radius, an array) goes to spaCR,
and so does any magnitude spaCR's arithmetic could overflow with (:data:`LARGEST`): there its NumPy
warns, and its tree refuses the moved points that overflowed (``ValueError``).

A GENERATOR PASSED IN IS SHARED: ``default_rng`` hands spaCR the caller's own. The seam draws
from a copy of it, and only once the answer is made does it set the caller's generator to the copy's
state, which is where spaCR's own draws leave it; a call that goes to spaCR after all (no backend
could score) leaves the caller's generator as it was given.
"""

from __future__ import annotations

import copy
import inspect
import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import ops
from ..kit._pair_scoring import search
from ._errstate import underflow_ignored
from ._outcome import PassThrough, finite_extent, served_by

__all__ = ["attribute_reads", "seed_by_scaled_pairs"]

LARGEST = 1e60
"""The largest coordinate, scale or radius the pair search serves (a tolerance up to its square root):
every product and square on the way (a moved point's squared distance, a ball's squared reach) stays
below 1e300, so neither spaCR's NumPy nor the registry meets an overflow."""


def _plain(value: Any, name: str, largest: float = math.inf) -> Any:
    """A Python number or a float64 scalar (not a bool): what spaCR's arithmetic rounds as float64;
    finite, and at most ``largest`` in size."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.float64)) or not math.isfinite(value):
        raise PassThrough(f"{name}={value!r} (the patch serves one finite Python or float64 number)")
    if abs(value) > largest:
        raise PassThrough(f"{name}={value!r} (beyond {largest:g}: spaCR's arithmetic may overflow)")
    return value


def _float64(value: Any, name: str) -> np.ndarray:
    """``value`` as spaCR reads it, ``np.asarray(value, float)``; a cast that NumPy warns about (a
    signalling NaN, an overflow) is left to spaCR's own, so that its warning is given once."""
    try:
        with np.errstate(invalid="raise", over="raise"):
            return np.asarray(value, float)
    except FloatingPointError:
        raise PassThrough(f"{name} whose float64 cast NumPy warns about") from None
    except (TypeError, ValueError):
        raise PassThrough(f"{name} NumPy cannot read as float64") from None


def _rows(value: Any, name: str, largest: float = math.inf) -> np.ndarray:
    array = _float64(value, name)
    if array.ndim != 2 or array.shape[1] != 2:
        raise PassThrough(f"{name} that is not (N, 2) rows")
    finite_extent(array, name, largest)
    return array


def _own_generator(seed: Any) -> Any:
    """What the seam draws from: a copy of a generator or bit generator the caller shares with
    spaCR (the caller's is set to the copy's state once the answer is made), else what was given."""
    if isinstance(seed, (np.random.Generator, np.random.BitGenerator)):
        return copy.deepcopy(seed)
    return seed


def _advance(seed: Any, drawn: Any) -> None:
    """The caller's generator (or bit generator) ``seed`` set to the state of ``drawn``, its copy
    that the seam drew from; nothing for anything else (nothing was shared)."""
    if drawn is seed:
        return
    if isinstance(seed, np.random.Generator):
        seed.bit_generator.state = drawn.bit_generator.state
    elif isinstance(seed, np.random.BitGenerator):
        seed.state = drawn.state


def attribute_reads(peaks: Any, centroids: Any, areas: Any, *, footprint: Any = 10.0, tie: Any = 1.0,
                    original: Callable[..., Any]) -> tuple[Any, str]:
    """``spacr.ops_sbs.attribute_reads``: the registry's ``attribute_reads``, which is spaCR's
    definition (its tree's ball query, its ``np.hypot`` gaps, its stable order) without the loop."""
    points, centres = _rows(peaks, "peaks"), _rows(centroids, "centroids")
    area = _float64(areas, "areas").reshape(-1)
    if area.shape[0] != centres.shape[0]:
        raise PassThrough("not one area per centroid")
    for value, name in ((footprint, "footprint"), (tie, "tie")):
        if _plain(value, name) < 0:
            raise PassThrough(f"a negative {name}")
    answer = ops.attribute_reads(points, centres, area, footprint=float(footprint), tie=float(tie))
    return answer, served_by()


def seed_by_scaled_pairs(source: Any, target: Any, scale: Any, *args: Any, original: Callable[..., Any],
                         **options: Any) -> tuple[Any, str]:
    """``spacr.ops_phenotype.seed_by_scaled_pairs``: spaCR's search, its candidates scored in
    batches by the registry (see the module). Its defaults and constants are read from spaCR's
    own function at the call, so an edited constant is honoured. Everything that could leave the
    call to spaCR is decided before the first draw, or on a copy of a generator passed in."""
    try:
        bound = inspect.signature(original).bind(source, target, scale, *args, **options)
    except TypeError:
        raise PassThrough("arguments spaCR's signature does not take") from None
    bound.apply_defaults()
    given = bound.arguments
    underflow_ignored()
    src, dst = _rows(given["source"], "source", LARGEST), _rows(given["target"], "target", LARGEST)
    if src.shape[0] < 2 or dst.shape[0] < 2:
        raise PassThrough("fewer than two points (spaCR answers None)")
    scale = _plain(given["scale"], "scale", LARGEST)
    radius = _plain(given["radius"], "radius", LARGEST)
    tolerance = _plain(given["tolerance"], "tolerance", math.sqrt(LARGEST))
    max_rotation = _plain(given["max_rotation"], "max_rotation")
    trials = given["trials"]
    if trials is None:
        constants = original.__globals__
        trials = max(constants["PAIR_TRIALS"], int(constants["TRIALS_PER_TARGET_POINT"] * dst.shape[0]))
    if isinstance(trials, bool) or not isinstance(trials, numbers.Integral):
        raise PassThrough(f"trials={trials!r} (the patch serves an integer)")
    if radius < 0 or scale <= 0 or tolerance < 0:
        raise PassThrough("a negative radius or tolerance, or a scale that is not positive")
    drawing = _own_generator(given["seed"])
    answer = search(src, dst, scale, radius * 4.0, int(trials), tolerance, max_rotation, drawing, ops.count_within,
                    served_by)
    _advance(given["seed"], drawing)
    return answer
