"""spaCR's ``seed_by_scaled_pairs`` search, batched: its trials, its candidates in its order, each
candidate's inliers counted a batch at a time, and the first best candidate's transform, bit for bit.

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
- the candidates are scored a batch at a time by the count the search is given (:data:`Count`:
  spaCR's patch gives the registry's :func:`spacr_accel_core.ops.count_within`, whose count is
  SciPy's ``np.sum(tree.query(moved)[0] <= radius)``), the batches shared between the CPU's
  threads while the next chunk of trials is drawn;
- the best is the first of the highest score above 1, spaCR's ``score > best_score`` from 1, and
  its rotation and translation are recomputed by spaCR's own expressions from its angle.

WHY IN THE KIT. This is arithmetic, not policy: what spaCR's search computes, laid out so that the
candidates are counted in batches. Whether a call may be served this way (its arguments plain
float64, its magnitudes within what spaCR's arithmetic holds, a generator passed in drawn from a
copy) is decided by spaCR's patch (``patch/_served_points.py``) before :func:`search` is called.
"""

from __future__ import annotations

import contextvars
import functools
import itertools
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._pair_trials import annulus_members, generator_draws, replay_draws, replay_is_numpys, replayable
from ._tiling import cpu_threads, run_parts

__all__ = ["BATCH", "CHUNK", "Count", "search"]

CHUNK = 1024
"""Trials drawn (that reached the ball query) before their candidates are handed to be scored."""

BATCH = 256
"""Candidate transforms moved and scored at once: ``BATCH x N x 2`` float64 (2.5 MB for 600 nuclei,
kept in cache between the product, the scaling, the translation and the count)."""


Count = Callable[[np.ndarray, np.ndarray, float], np.ndarray]
"""``count(moved, target, radius)``: for each of a stack of moved point sets ``(B, N, 2)`` float64,
how many of its points have a point of ``target`` ``(M, 2)`` within ``radius`` (int64 ``(B,)``):
SciPy's ``np.sum(tree.query(moved)[0] <= radius)`` for each set."""


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
            firsts: np.ndarray, seed_radius: float, count: Count,
            served_by: Callable[[], str]) -> tuple[np.ndarray, str]:
    """Each candidate's inliers, a batch at a time: spaCR's ``translation`` and ``moved`` by its
    own expressions over a stack of rotations, counted by ``count``. The candidates are shared
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
            scores[begin:end] = count(out, dst, seed_radius)

    shares = max(1, min(cpu_threads(), rotation.shape[0] // BATCH))
    edges = np.linspace(0, rotation.shape[0], shares + 1).astype(np.int64)
    run_parts(score, [(int(a), int(b)) for a, b in itertools.pairwise(edges)])
    return scores, served_by()


def search(src: np.ndarray, dst: np.ndarray, scale: Any, seed_radius: Any, trials: int, tolerance: Any,
           max_rotation: Any, seed: Any, count: Count, served_by: Callable[[], str]) -> tuple[Any, str]:
    """spaCR's search on checked arguments: its trials drawn from ``seed``, its candidates scored, the
    first best one's transform by spaCR's own expressions (or None where none scores above 1).

    :param src: the source points, float64 ``(N, 2)``, at least two.
    :param dst: the target points, float64 ``(M, 2)``, at least two.
    :param scale: spaCR's ``scale``, a float64 number.
    :param seed_radius: the inlier radius (spaCR's ``radius * 4.0``).
    :param trials: the loop's count.
    :param tolerance: spaCR's ``tolerance``.
    :param max_rotation: spaCR's ``max_rotation``, in degrees.
    :param seed: what spaCR passes to ``np.random.default_rng``: ``None``, an integer (replayed from
        the stream), or a generator or bit generator (drawn from by its own calls, and advanced).
    :param count: the inlier count (:data:`Count`).
    :param served_by: called after each scored share of the candidates, in the thread that counted
        them: the name the answer is counted under (the first that is not ``"core"`` is returned).
    :returns: ``(answer, backend)``: spaCR's ``(scale, rotation, translation)`` or None, and who
        counted (``"core"`` where nothing was counted).
    """
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
                _scores, src, dst, scale, _rotations(angle), *trials_of[-1], float(seed_radius), count, served_by))
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
