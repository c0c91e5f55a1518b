"""spaCR's pair-search trials without its per-trial calls: the generator's draws replayed from its
raw stream, and each trial's ball query answered as the KD-tree answers it.

THE DRAWS. ``seed_by_scaled_pairs`` draws, per trial, ``rng.choice(n, size=2, replace=False)``
and, when the pair's span is long enough, ``rng.integers(m)``: 5,356 trials of Python calls for an
anchor field (56 ms of loop). NumPy's :class:`~numpy.random.Generator` computes both from one
stream of 32-bit words (each 64-bit output of PCG64 split low word first): ``choice`` of two is
Floyd's algorithm (a draw in ``[0, n - 2]``, one in ``[0, n - 1]`` that is replaced by ``n - 1``
when it repeats the first) and a one-step shuffle (a draw in ``[0, 1]``: 0 swaps the two), and
every bounded draw is Lemire's multiply-and-reject on one word (rarely more: a word is rejected
when the low half of its product falls below ``2**32 mod (range + 1)``). :func:`replay_draws`
computes, for every position of the stream at once, where a trial starting there would end and
what it would draw, then follows the chain of trial starts: the same pairs and targets as spaCR's
loop, in 9 ms. It is used only where its answer was checked against the generator's own calls in
this process (:func:`replay_is_numpys`, once), so a NumPy that draws otherwise gets spaCR's loop.

THE BALL QUERY. spaCR keeps, of each trial's ``tree.query_ball_point(dst[k], reach)``, the points
whose separation from ``dst[k]`` is within the tolerance of the wanted one: a thin annulus of a
ball that holds hundreds of points (22 ms a thousand trials in lists of Python ints). The tree
lists a ball's points in the order of its own index array (its depth-first walk visits the leaves
in that order), so the ball's points in that annulus are the tree-ordered points whose squared
separation lies in the annulus and inside ``reach``: computed for all points at once, band by band
of trials. A point within a relative ``1e-9`` of the ball's edge (where the tree's own rounding of
its squared distances decides) is settled by asking the tree for that trial's ball.
"""

from __future__ import annotations

import itertools
import logging
import numbers
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ._tiling import cpu_threads, run_parts

__all__ = ["annulus_members", "generator_draws", "replay_draws", "replay_is_numpys", "replayable"]

_log = logging.getLogger(__name__)

_WORD = np.uint64(0xFFFFFFFF)

SpanTest = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""spaCR's span test, elementwise: True where the drawn pair ``(i, j)`` goes on to draw its target."""

Draws = tuple[np.ndarray, np.ndarray, np.ndarray]
"""int64 ``first``, ``second``, ``anchor`` of the trials that drew a target, in spaCR's order."""

EDGE = 1e-9
"""Relative band around a ball's squared radius where the tree's own comparison is asked."""

_ROWS = 128
"""Trials whose separations from every target point are computed at once (2.7 MB a pass for the
2,678 points of an anchor field: each pass stays in cache)."""


def _words(seed: Any, count: int) -> np.ndarray:
    """The first ``count`` (rounded up to even) 32-bit words ``np.random.default_rng(seed)`` draws from."""
    raw = np.random.default_rng(seed).bit_generator.random_raw(-(-count // 2))
    return np.stack([raw & _WORD, raw >> np.uint64(32)], axis=1).reshape(-1)


def _bounded(words: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """For a bounded draw in ``[0, top]`` starting at each position (and one past the end): its value
    and the position after it, Lemire's rejection included (positions past the end read as the end)."""
    count = words.shape[0]
    if top == 0:  # NumPy draws nothing for a range of one value
        return np.zeros(count + 1, np.int64), np.arange(count + 1, dtype=np.int64)
    span = np.uint64(top + 1)
    product = words * span
    accepted = (product & _WORD) >= np.uint64((0xFFFFFFFF - top) % (top + 1))
    at = np.where(accepted, np.arange(count), count)
    first = np.append(np.minimum.accumulate(at[::-1])[::-1], count)
    value = np.append((product >> np.uint64(32)).astype(np.int64), 0)
    return value[first], first + 1


def _chain(words: np.ndarray, sources: int, targets: int, reaches: SpanTest) -> tuple[np.ndarray, ...]:
    """Per stream position: the pair a trial starting there draws, whether it reaches the target draw,
    that draw, and where the next trial starts (``len(words) + 1`` where the stream ran out)."""
    end = words.shape[0]
    low, after_low = _bounded(words, sources - 2)
    high, after_high = _bounded(words, sources - 1)
    coin, after_coin = _bounded(words, 1)
    target, after_target = _bounded(words, targets - 1)
    first_value, second_at = low, after_low
    second_in = np.minimum(second_at, end)
    drawn_second, coin_from = high[second_in], after_high[second_in]
    coin_at = np.minimum(coin_from, end)
    second_value = np.where(drawn_second == first_value, sources - 1, drawn_second)
    swap = coin[coin_at] == 0
    i, j = np.where(swap, second_value, first_value), np.where(swap, first_value, second_value)
    shuffled_to = after_coin[coin_at]
    inside = (second_at <= end) & (coin_from <= end) & (shuffled_to <= end)
    reached = np.zeros(end + 1, bool)
    reached[inside] = reaches(i[inside], j[inside])
    k = target[np.minimum(shuffled_to, end)]
    after_k = after_target[np.minimum(shuffled_to, end)]
    following = np.where(reached, after_k, shuffled_to)
    following = np.where(inside & (~reached | (after_k <= end)), following, end + 1)
    return i, j, k, reached, following


def replay_draws(seed: Any, sources: int, targets: int, trials: int, reaches: SpanTest) -> Draws:
    """spaCR's loop's draws: for each trial that passed the span test, its ``(i, j)`` and ``k``.

    :param seed: what spaCR passes to ``np.random.default_rng``: ``None`` or an integer.
    :param sources: ``n`` of ``rng.choice(n, 2, replace=False)`` (at least 2).
    :param targets: ``m`` of ``rng.integers(m)`` (at least 1).
    :param trials: the loop's count.
    :param reaches: the span test, elementwise: True where the pair ``(i, j)`` goes on to draw ``k``.
    :returns: :data:`Draws`.
    """
    length = 4 * trials + 64  # three words a trial, four with its target; rejections are rare
    while True:
        words = _words(seed, length)
        i, j, k, reached, following = _chain(words, sources, targets, reaches)
        steps, end = following.tolist(), words.shape[0]
        starts, at = [], 0
        for _ in range(trials):
            if at > end:
                break
            starts.append(at)
            at = steps[at]
        if len(starts) == trials and at <= end:
            chosen = np.asarray(starts, np.int64)
            chosen = chosen[reached[chosen]]
            return i[chosen], j[chosen], k[chosen]
        length *= 2


def generator_draws(seed: Any, sources: int, targets: int, trials: int, reaches: SpanTest) -> Draws:
    """The generator's own calls in spaCR's loop (what :func:`replay_draws` is checked against, and
    what draws where it cannot replay): the same arguments and answer."""
    rng = np.random.default_rng(seed)
    first: list[int] = []
    second: list[int] = []
    anchor: list[int] = []
    for _ in range(trials):
        i, j = rng.choice(sources, size=2, replace=False)
        if bool(reaches(np.asarray([i]), np.asarray([j]))[0]):
            first.append(int(i))
            second.append(int(j))
            anchor.append(int(rng.integers(targets)))
    return np.asarray(first, np.int64), np.asarray(second, np.int64), np.asarray(anchor, np.int64)


def _probe_reaches(i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """A span test for the check: about a third of the pairs stop before their target draw."""
    return np.asarray((i * 7 + j) % 3 != 0, dtype=bool)


_checked: list[bool] = []
_checked_lock = threading.Lock()


def replay_is_numpys() -> bool:
    """Whether this NumPy's generator draws what :func:`replay_draws` replays (checked once a process,
    on 120 trials of three sizes, one of them so large that a quarter to a half of its words are rejected)."""
    if not _checked:
        with _checked_lock:
            if not _checked:
                same = True
                for seed, sources, targets in ((0, 600, 2678), (7, 2, 1), (11, 3 * 2**30, 2**31 + 1)):
                    got = replay_draws(seed, sources, targets, 120, _probe_reaches)
                    want = generator_draws(seed, sources, targets, 120, _probe_reaches)
                    same = same and all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
                if not same:
                    _log.debug("NumPy's generator draws otherwise than the replay; seed_by_scaled_pairs "
                               "draws with spaCR's own loop")
                _checked.append(same)
    return _checked[0]


def replayable(seed: Any) -> bool:
    """A seed ``default_rng`` makes a fresh generator of: ``None`` or an integer (a generator or a
    bit generator passed in is shared, and its own calls must advance it as spaCR's do)."""
    return seed is None or (isinstance(seed, numbers.Integral) and not isinstance(seed, bool))


def _band(ordered: np.ndarray, centres: np.ndarray, low: np.ndarray, reach: np.ndarray,
          tree: Any) -> tuple[np.ndarray, np.ndarray]:
    """One band of trials: each member's row in the band and its place in the tree's order."""
    down = ordered[None, :, 0] - centres[:, None, 0]
    across = ordered[None, :, 1] - centres[:, None, 1]
    squared = down * down + across * across
    # the annulus's inner edge exactly as the candidates' own test reads it; the outer is the ball's
    inner = squared >= (low * low * (1.0 - 1e-6))[:, None]
    edge = (reach * reach)[:, None]
    member = inner & (squared <= edge * (1.0 + EDGE))
    unsure = member & (squared >= edge * (1.0 - EDGE))
    for row in np.flatnonzero(unsure.any(axis=1)):
        inside = np.zeros(ordered.shape[0], bool)
        inside[np.asarray(tree.query_ball_point(centres[row], reach[row]), np.int64)] = True
        places = np.flatnonzero(unsure[row])
        member[row, places] = inside[tree.indices[places]]
    rows, places = np.nonzero(member)
    return rows, places


def annulus_members(dst: np.ndarray, tree: Any, anchor: np.ndarray, low: np.ndarray,
                    reach: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of each trial's ball ``tree.query_ball_point(dst[anchor], reach)``, in the tree's order, every
    point whose squared separation from ``dst[anchor]`` is at least ``low**2 * (1 - 1e-6)``.

    :returns: ``(lengths, partner)``: int64 points per trial, and the points, trial after trial.
    """
    if anchor.shape[0] == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ordered = dst[tree.indices]
    centres = dst[anchor]
    edges = [*range(0, anchor.shape[0], _ROWS), anchor.shape[0]]
    bands = list(itertools.pairwise(edges))
    threads = max(1, min(cpu_threads(), len(bands)))

    def work(indices: list[int]) -> list[tuple[int, tuple[np.ndarray, np.ndarray]]]:
        return [(index, _band(ordered, centres[bands[index][0]:bands[index][1]], low[bands[index][0]:bands[index][1]],
                              reach[bands[index][0]:bands[index][1]], tree)) for index in indices]

    lengths = np.zeros(anchor.shape[0], np.int64)
    pieces: list[np.ndarray] = [np.zeros(0, np.int64)] * len(bands)
    for results in run_parts(work, [(list(range(part, len(bands), threads)),) for part in range(threads)]):
        for index, (rows, places) in results:
            start, stop = bands[index]
            lengths[start:stop] = np.bincount(rows, minlength=stop - start)
            pieces[index] = tree.indices[places]
    return lengths, np.concatenate(pieces)
