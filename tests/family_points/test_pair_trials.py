"""The pair search's trials without spaCR's per-trial calls (``kit._pair_trials``): the draws
replayed from the generator's stream against the generator's own calls, and each trial's annulus
against the KD-tree's own ball query, in the tree's order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial import cKDTree

from spacr_accel_core.kit import _pair_trials

SIZES = st.one_of(st.integers(2, 9), st.integers(10, 3000), st.sampled_from([2**31 + 3, 3 * 2**30, 2**32 - 1]))
"""Sizes of the draws' ranges: tiny ones (a range of one value draws nothing), a field's, and ranges
whose words NumPy rejects about half the time (Lemire's threshold near 2**31)."""


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**63), sources=SIZES, targets=st.one_of(st.just(1), SIZES),
       trials=st.integers(1, 2500), modulus=st.integers(1, 5))
def test_the_replayed_draws_are_the_generators_own(seed: int, sources: int, targets: int, trials: int,
                                                   modulus: int) -> None:
    def reaches(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return np.asarray((i * 7 + j) % modulus != 0, dtype=bool) if modulus > 1 else np.ones(i.shape, bool)

    got = _pair_trials.replay_draws(seed, sources, targets, trials, reaches)
    want = _pair_trials.generator_draws(seed, sources, targets, trials, reaches)
    assert [part.tolist() for part in got] == [part.tolist() for part in want]
    assert all(part.dtype == np.int64 for part in got)


def test_no_trial_passing_the_span_test_draws_no_target() -> None:
    def never(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return np.zeros(i.shape, bool)

    assert [part.size for part in _pair_trials.replay_draws(3, 600, 2678, 500, never)] == [0, 0, 0]


def test_this_numpy_draws_what_the_replay_replays() -> None:
    assert _pair_trials.replay_is_numpys()


@pytest.mark.parametrize(("seed", "fresh"), [(0, True), (None, True), (np.int64(4), True), (True, False),
                                             (np.random.default_rng(1), False), (np.random.PCG64(2), False)])
def test_only_a_seed_of_a_fresh_generator_is_replayed(seed: object, fresh: bool) -> None:
    assert _pair_trials.replayable(seed) is fresh


def _ball_annulus(dst: np.ndarray, tree: cKDTree, anchor: np.ndarray, low: np.ndarray,
                  reach: np.ndarray) -> tuple[list[int], list[int]]:
    """The tree's own ball of each trial (unsorted: its order), filtered to the annulus as the
    candidates' own test reads it."""
    lengths, partner = [], []
    for k, lo, r in zip(anchor, low, reach, strict=True):
        ball = tree.query_ball_point(dst[k], r, return_sorted=False)
        down, across = dst[ball, 0] - dst[k, 0], dst[ball, 1] - dst[k, 1]
        keep = [point for point, squared in zip(ball, down * down + across * across, strict=True)
                if squared >= lo * lo * (1.0 - 1e-6)]
        lengths.append(len(keep))
        partner.extend(keep)
    return lengths, partner


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), points=st.integers(1, 3000), trials=st.integers(0, 400),
       grid=st.booleans())
def test_the_annulus_is_the_trees_ball_in_the_trees_order(seed: int, points: int, trials: int, grid: bool) -> None:
    rng = np.random.default_rng(seed)
    # a grid puts many points at exactly the ball's edge (3-4-5 separations), where the tree decides
    dst = (rng.integers(0, 60, size=(points, 2)).astype(np.float64) if grid
           else rng.random((points, 2)) * 2000.0)
    tree = cKDTree(dst)
    anchor = rng.integers(0, points, size=trials)
    want = rng.choice([5.0, np.nextafter(5.0, 0.0), 12.5], size=trials) if grid else rng.random(trials) * 900.0
    tolerance = 0.04
    reach = want * (1.0 + tolerance)
    if grid:
        reach = np.where(rng.random(trials) < 0.5, want, reach)  # an edge exactly on grid separations
    low = np.maximum(want - want * tolerance, 0.0)
    lengths, partner = _pair_trials.annulus_members(dst, tree, anchor, low, reach)
    want_lengths, want_partner = _ball_annulus(dst, tree, anchor, low, reach)
    assert lengths.tolist() == want_lengths
    assert partner.tolist() == want_partner


def test_the_replay_with_spacrs_span_test_on_a_large_field_is_the_generators() -> None:
    """spaCR's own span test (``np.hypot`` of the pair against a fifth of the extent) on a field of
    2,053 points: the replay asks it of every stream position at once, the generator's loop of each
    pair it draws."""
    rng = np.random.default_rng(6)
    src = rng.random((2053, 2)) * 3000.0
    min_span = 0.2 * float(max(np.ptp(src[:, 0]), np.ptp(src[:, 1])))

    def reaches(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        step = src[j] - src[i]
        return np.asarray(~(np.hypot(step[:, 0], step[:, 1]) < min_span), dtype=bool)

    replayed = _pair_trials.replay_draws(17, src.shape[0], 900, 700, reaches)
    looped = _pair_trials.generator_draws(17, src.shape[0], 900, 700, reaches)
    assert [part.tolist() for part in replayed] == [part.tolist() for part in looped]
    assert 0 < replayed[0].size < 700  # some pairs were too short: the target draw was skipped
