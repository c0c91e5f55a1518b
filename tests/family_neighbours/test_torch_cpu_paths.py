"""The torch backend's CPU-only paths, each against the PLAIN references of
``spacr_accel_core.reference``: Hamming ranked by column groups (wide enough target sets that the
groups are used, ties hidden in unchosen groups, columns beyond the last whole group), on the CPU
and on the CPU posing as a card (the card's whole-row ``topk``); the ``k`` nearest by the grid, every
row it settles (from its own block of cells or a wider one) equal to the reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import reference
from spacr_accel_core.testing import packed_descriptors
from spacr_accel_torch import _neighbours_kernels, _runtime

CPU = _runtime.Device(torch.device("cpu"), True)


@dataclass(frozen=True)
class _Card(_runtime.Device):
    @property
    def is_cpu(self) -> bool:
        return False


CARD = _Card(torch.device("cpu"), True)


WIDE_DESCRIPTORS = packed_descriptors(widths=(32, 33), sources=(1, 30), targets=(16 * 18, 16 * 45 + 15),
                                      distinct=(2, 8))
"""Target sets of 16 groups of 18 to 45 columns plus up to 15 more; few distinct rows (ties
everywhere) or random ones, 32 or 33 bytes (one or two pieces)."""


@settings(max_examples=25, deadline=None)
@given(bits=WIDE_DESCRIPTORS, k=st.integers(1, 9), bound=st.sampled_from([None, 0, 100.5]),
       card=st.booleans())
def test_hamming_by_column_groups_equals_the_reference(bits: tuple[np.ndarray, np.ndarray], k: int,
                                                       bound: float | None, card: bool) -> None:
    source, target = bits
    index, found = _neighbours_kernels.hamming(source, target, 7, k, bound, CARD if card else CPU)
    expected_index, expected_found = reference.hamming_nearest(source, target, k, bound)
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(found, expected_found)


@pytest.mark.parametrize("low, high", [(-3, 3), (-60, 61), (-256, 257)])
def test_column_groups_rank_ties_in_unchosen_groups_by_index(low: int, high: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Scores with a handful of values (the ``have``-th best ties with the last chosen group's
    maximum: ranked over every column) or many, negative ones included (most rows settled by their
    groups): equal to the whole-row ranking and to a plain sort by (score descending, index)."""
    rng = np.random.default_rng(3)
    m = 16 * 40 + 7
    scores = torch.from_numpy(rng.integers(low, high, (50, m)).astype(np.float32)).to(torch.bfloat16)
    scores[:5] = -scores[:5].abs() - 1  # rows with every score negative
    whole_rows = []
    settle = _neighbours_kernels._settle_crowded
    monkeypatch.setattr(_neighbours_kernels, "_settle_crowded",
                        lambda s, key, crowded, have: whole_rows.append(int(crowded.sum())) or settle(
                            s, key, crowded, have))
    for have in (1, 4, 9):
        columns, values = _neighbours_kernels._ranked_by_groups(scores, have)
        whole_columns, whole_values = _neighbours_kernels._ranked(scores, have)
        plain = np.lexsort((np.tile(np.arange(m), (50, 1)), -scores.float().numpy()), axis=1)[:, :have]
        np.testing.assert_array_equal(columns.numpy(), plain)
        np.testing.assert_array_equal(columns.numpy(), whole_columns.numpy())
        np.testing.assert_array_equal(values.numpy(), whole_values.numpy())
    if high > 100:
        assert 5 <= whole_rows[0] < 50  # the negative rows at least, not every row


def _settled_rows_agree(source: np.ndarray, target: np.ndarray, k: int, bound: float | None) -> np.ndarray:
    """The grid's answer for each row it settles, checked against the reference; its settled mask."""
    from spacr_accel_torch._neighbours_kernels import search_bound

    gridded = _neighbours_kernels.grid_search(source, target, 64, k, search_bound(bound))
    assert gridded is not None
    found, squared, settled = gridded
    expected_index, expected_found = reference.k_nearest(source, target, k, bound)
    near = np.sqrt(squared).astype(np.float32)
    if bound is not None:
        far = near.astype(np.float64) > bound
        found, near = np.where(far, -1, found), np.where(far, np.inf, near).astype(np.float32)
    np.testing.assert_array_equal(found[settled], expected_index[settled])
    np.testing.assert_array_equal(near[settled], expected_found[settled])
    return settled


@settings(max_examples=30, deadline=None)
@given(width=st.integers(1, 3), k=st.integers(1, 9), kind=st.sampled_from(["uniform", "lattice", "holes"]),
       bound=st.sampled_from([None, 0.5, 3.0]), seed=st.integers(0, 2**32 - 1))
def test_every_row_the_grid_settles_equals_the_reference(width: int, k: int, kind: str, bound: float | None,
                                                         seed: int) -> None:
    """Uniform points, lattices full of equal distances (ties at the ``k``-th place), and targets
    with holes (sources whose own block is empty), in 1 to 3 coordinates."""
    rng = np.random.default_rng(seed)
    source, target = rng.uniform(-10, 10, (400, width)), rng.uniform(-10, 10, (1200, width))
    if kind == "lattice":
        source, target = np.round(source), np.round(target * 20) / 20
    if kind == "holes":
        target = target[np.abs(target[:, 0]) > 2.5]
    target = np.unique(target.astype(np.float32), axis=0)  # the grid is given distinct targets
    _settled_rows_agree(source.astype(np.float32), target, k, bound)


def test_wider_blocks_settle_the_rows_beside_a_hole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sources in a hole among the targets are not settled by their own block of cells; the wider
    blocks settle them, exactly."""
    rng = np.random.default_rng(5)
    target = rng.uniform(0, 100, (6000, 2))
    target = target[np.hypot(target[:, 0] - 50, target[:, 1] - 50) > 6].astype(np.float32)
    source = rng.uniform(44, 56, (300, 2)).astype(np.float32)
    monkeypatch.setattr(_neighbours_kernels, "RADII", (1,))
    narrow = _settled_rows_agree(source, target, 4, None)
    monkeypatch.undo()
    wide = _settled_rows_agree(source, target, 4, None)
    assert narrow.sum() < 250 and wide.sum() > narrow.sum() + 50
