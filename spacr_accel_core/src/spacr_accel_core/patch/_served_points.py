"""How the patch serves spaCR's two point steps: ``ops_sbs.attribute_reads`` (one read at a time in
Python, in spaCR) and ``ops_phenotype.seed_by_scaled_pairs`` (one KD-tree query per candidate
transform, in spaCR): the same answers, bit for bit, or the call left to spaCR.

THE PAIR SEARCH IS SPACR'S OWN SEARCH, BATCHED. Its answer depends on every draw of its generator
and on every float64 bit of every candidate, so nothing is drawn, skipped or computed otherwise:

- the trials are spaCR's, in spaCR's order: its ``rng.choice(n, 2, replace=False)``, the span
  test and its ``continue`` before ``rng.integers(m)``, replayed from the generator's own stream
  where this NumPy was checked to draw that way (spaCR's calls themselves otherwise, and for a
  generator passed in as the seed), and the points of each trial's ball query that its annulus
  keeps, in the tree's order (:mod:`._pair_trials`);
- each candidate's tests (``l != k``, the separation's tolerance, the rotation bound) and its
  rotation and translation are spaCR's scalar NumPy expressions applied to arrays: the same
  ufuncs (``np.hypot``, ``np.arctan2``, ``%``, ``np.degrees``, ``np.cos``, ``np.sin``) give each
  element the bits they give a scalar, and a stack of ``(2, 2) @ (2, N)`` products is NumPy's loop
  of the same BLAS call per matrix (its result is ``fma``-rounded by OpenBLAS, not ``a*x + b*y``,
  which is why the products stay NumPy's own);
- the candidates are scored a batch at a time by :func:`spacr_accel_core.ops.count_within`, whose
  count is SciPy's ``np.sum(tree.query(moved)[0] <= radius)``;
- the best is the first of the highest score above 1, spaCR's ``score > best_score`` from 1, and
  its rotation and translation are recomputed by spaCR's own expressions from its angle.

Any argument whose arithmetic is not plain float64 (a ``float32`` radius, an array) goes to spaCR,
and so does any magnitude spaCR's arithmetic could overflow with (:data:`LARGEST`): there its NumPy
warns, and its tree refuses the moved points that overflowed (``ValueError``).

A GENERATOR PASSED IN IS SHARED: ``default_rng`` hands spaCR the caller's own. The seam draws
from a copy of it, and only once the answer is made does it set the caller's generator to the copy's
state, which is where spaCR's own draws leave it; a call that goes to spaCR after all (no backend
could score) leaves the caller's generator as it was given.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import inspect
import itertools
import math
import numbers
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import ops
from ..kit._tiling import cpu_threads, run_parts
from ._errstate import underflow_ignored
from ._outcome import PassThrough, finite_extent, served_by
from ._pair_trials import annulus_members, generator_draws, replay_draws, replay_is_numpys, replayable

__all__ = ["attribute_reads", "seed_by_scaled_pairs"]

CHUNK = 1024
"""Trials drawn (that reached the ball query) before their candidates are handed to be scored."""

BATCH = 256
"""Candidate transforms moved and scored at once: ``BATCH x N x 2`` float64 (2.5 MB for 600 nuclei,
kept in cache between the product, the scaling, the translation and the count)."""


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


@dataclass(frozen=True)
class _Trials:
    """The trials that reached a ball query, in spaCR's order: the source pair ``(i, j)``, the
    target point ``k``, the wanted separation, and the target points the query returned."""

    first: np.ndarray
    second: np.ndarray
    anchor: np.ndarray
    want: np.ndarray
    lengths: np.ndarray
    trial: np.ndarray
    partner: np.ndarray


def _drawn(src: np.ndarray, dst: np.ndarray, tree: Any, scale: Any, trials: int, tolerance: Any,
           seed: Any) -> Iterator[_Trials]:
    """spaCR's loop up to its ball query, trial for trial (the generator's stream is its own), in
    chunks of :data:`CHUNK` trials that reached the query, so that a chunk's candidates are scored
    while the next is drawn."""
    extent = float(max(np.ptp(src[:, 0]), np.ptp(src[:, 1])))
    min_span = 0.2 * extent

    def spans(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        # spaCR's ``np.hypot(*(src[j] - src[i]))`` pair by pair: the ufunc gives each element a
        # scalar call's bits
        step = src[j] - src[i]
        return np.asarray(np.hypot(step[:, 0], step[:, 1]))

    def reaches(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return np.asarray(~(spans(i, j) < min_span), dtype=bool)  # spaCR's ``if span < min_span: continue``

    count, sources, targets = max(1, int(trials)), src.shape[0], dst.shape[0]
    draw = replay_draws if replayable(seed) and replay_is_numpys() else generator_draws
    first, second, anchor = draw(seed, sources, targets, count, reaches)
    want = scale * spans(first, second)
    reach = want * (1.0 + tolerance)
    for start in range(0, anchor.shape[0], CHUNK):
        part = slice(start, start + CHUNK)
        yield _queried(dst, tree, first[part], second[part], anchor[part], want[part], reach[part], tolerance)


def _queried(dst: np.ndarray, tree: Any, first: np.ndarray, second: np.ndarray, anchor: np.ndarray,
             want: np.ndarray, reach: np.ndarray, tolerance: Any) -> _Trials:
    """A chunk of trials with the points of each one's ball query that its candidates can come from
    (the annulus of its separation, :func:`._pair_trials.annulus_members`), in the tree's order."""
    low = np.maximum(want - want * tolerance, 0.0)
    lengths, partner = annulus_members(dst, tree, anchor, low, reach)
    return _Trials(first, second, anchor, want, lengths, np.repeat(np.arange(anchor.shape[0]), lengths), partner)


def _candidates(src: np.ndarray, dst: np.ndarray, drawn: _Trials, tolerance: Any,
                max_rotation: Any) -> tuple[np.ndarray, np.ndarray]:
    """The candidates spaCR scores, in its order: each one's trial and angle (spaCR's per-candidate
    tests, elementwise).

    ``drawn`` holds only the ball's points in a superset of the annulus (:func:`_queried`: by the
    squared separation, ``np.hypot`` lying within an ulp of its square root, far inside the
    ``1e-6`` margin), so spaCR's own tests (``l != k``, ``abs(got - want) > want * tolerance`` on
    ``np.hypot``'s bits) run on the annulus alone."""
    lengths = drawn.lengths
    step_y = dst[drawn.partner, 0] - np.repeat(dst[drawn.anchor, 0], lengths)
    step_x = dst[drawn.partner, 1] - np.repeat(dst[drawn.anchor, 1], lengths)
    trial = drawn.trial
    keep = drawn.partner != drawn.anchor[trial]
    trial, step_y, step_x = trial[keep], step_y[keep], step_x[keep]
    got = np.hypot(step_y, step_x)
    want = drawn.want[trial]
    keep = ~(np.abs(got - want) > want * tolerance)
    trial, step_y, step_x = trial[keep], step_y[keep], step_x[keep]
    pair = src[drawn.second[trial]] - src[drawn.first[trial]]
    angle = np.arctan2(step_y, step_x) - np.arctan2(pair[:, 0], pair[:, 1])
    angle = (angle + np.pi) % (2.0 * np.pi) - np.pi
    keep = ~(np.abs(np.degrees(angle)) > max_rotation)
    return trial[keep], angle[keep]


def _rotations(angle: np.ndarray) -> np.ndarray:
    cos, sin = np.cos(angle), np.sin(angle)
    return np.stack([np.stack([cos, -sin], axis=-1), np.stack([sin, cos], axis=-1)], axis=-2)


def _scores(src: np.ndarray, dst: np.ndarray, scale: Any, rotation: np.ndarray, anchors: np.ndarray,
            firsts: np.ndarray, seed_radius: float) -> tuple[np.ndarray, str]:
    """Each candidate's inliers, a batch at a time: spaCR's ``translation`` and ``moved`` by its
    own expressions over a stack of rotations, counted by the registry. The candidates are shared
    between the CPU's threads (NumPy's loops and the count release the GIL); each score lands in
    its candidate's place, so the order is spaCR's whatever finishes first."""
    scores = np.empty(rotation.shape[0], dtype=np.int64)

    def score(start: int, stop: int) -> None:
        moved = np.empty((min(BATCH, stop - start), src.shape[0], 2))
        for begin in range(start, stop, BATCH):
            end = min(begin + BATCH, stop)
            turn = rotation[begin:end]
            translation = dst[anchors[begin:end]] - scale * np.matmul(turn, src[firsts[begin:end]][:, :, None])[:, :, 0]
            out = moved[:end - begin]
            np.multiply(scale, np.matmul(turn, src.T).transpose(0, 2, 1), out=out)
            np.add(out, translation[:, None, :], out=out)
            scores[begin:end] = ops.count_within(out, dst, seed_radius)

    shares = max(1, min(cpu_threads(), rotation.shape[0] // BATCH))
    edges = np.linspace(0, rotation.shape[0], shares + 1).astype(np.int64)
    run_parts(score, [(int(a), int(b)) for a, b in itertools.pairwise(edges)])
    return scores, served_by()


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
    answer = _search(src, dst, scale, radius * 4.0, int(trials), tolerance, max_rotation, drawing)
    _advance(given["seed"], drawing)
    return answer


def _search(src: np.ndarray, dst: np.ndarray, scale: Any, seed_radius: Any, trials: int, tolerance: Any,
            max_rotation: Any, seed: Any) -> tuple[Any, str]:
    """spaCR's search on checked arguments: its trials drawn from ``seed``, its candidates scored, the
    first best one's transform by spaCR's own expressions (or None where none scores above 1)."""
    from scipy.spatial import cKDTree

    tree = cKDTree(dst)
    angles, trials_of, scored = [], [], []
    with ThreadPoolExecutor(max_workers=1) as scorer:  # a chunk is scored while the next is drawn
        for drawn in _drawn(src, dst, tree, scale, trials, tolerance, seed):
            trial, angle = _candidates(src, dst, drawn, tolerance, max_rotation)
            angles.append(angle)
            trials_of.append((drawn.anchor[trial], drawn.first[trial]))
            # in the caller's context: its config.override chooses the backend that scores
            scored.append(scorer.submit(contextvars.copy_context().run, functools.partial(
                _scores, src, dst, scale, _rotations(angle), *trials_of[-1], float(seed_radius)))
                          if trial.size else None)
        answers = [(np.zeros(0, np.int64), "core") if part is None else part.result() for part in scored]
    scores = np.concatenate([part[0] for part in answers]) if answers else np.zeros(0, np.int64)
    if scores.size == 0:
        return None, "core"
    backend = next((served for _, served in answers if served != "core"), "core")
    best = int(np.argmax(scores))
    if scores[best] <= 1:
        return None, backend
    anchors, firsts = (np.concatenate([part[index] for part in trials_of]) for index in (0, 1))
    chosen = np.concatenate(angles)[best]  # a float64 scalar: spaCR's own angle, bit for bit
    rotation = np.array([[np.cos(chosen), -np.sin(chosen)], [np.sin(chosen), np.cos(chosen)]])
    translation = dst[anchors[best]] - scale * (rotation @ src[firsts[best]])
    return (float(scale), rotation, translation), backend
