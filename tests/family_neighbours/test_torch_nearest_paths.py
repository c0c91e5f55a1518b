"""The torch backend's nearest-neighbour search on its own paths, each driven directly and compared
with the PLAIN references of ``spacr_accel_core.testing`` (never only with another backend).

The conformance suite only sees what a forced call reaches on this machine (small inputs). Here
the block search runs on sets large enough to prune, on the CPU and on a device without float64
whose verdict falls back to the host, and out-of-memory is injected to show a pass is retried
smaller and gives up only at the floor."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import BackendOutOfMemory, ops
from spacr_accel_core.testing import reference_nearest
from spacr_accel_torch import _neighbours_kernels, _runtime

CPU = _runtime.Device(torch.device("cpu"), True)
NO_DOUBLES = _runtime.Device(torch.device("cpu"), False)
"""The CPU posing as a device that refuses float64 (Metal): the verdict must run on the host."""


def oom(message: str = "CUDA out of memory. Tried to allocate 2.00 GiB") -> torch.OutOfMemoryError:
    return torch.OutOfMemoryError(message)


# ---- nearest_neighbours --------------------------------------------------------------------------


@st.composite
def point_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Sets large enough for several blocks: grids full of ties, clusters with outliers, extremes."""
    width = draw(st.integers(1, 10))
    n, m = draw(st.integers(1, 300)), draw(st.integers(1, 300))
    kind = draw(st.sampled_from(["grid", "uniform", "clusters", "huge", "tiny"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "grid":
        offset = draw(st.sampled_from([0.0, 1000.0, -3e5]))
        source = rng.integers(-3, 4, (n, width)) + offset
        target = rng.integers(-3, 4, (m, width)) + offset
    elif kind == "uniform":
        source = rng.uniform(-1e4, 1e4, (n, width))
        target = rng.uniform(-1e4, 1e4, (m, width))
    elif kind == "clusters":
        centres = rng.uniform(-100, 100, (3, width))
        source = centres[rng.integers(0, 3, n)] + rng.standard_normal((n, width))
        target = centres[rng.integers(0, 3, m)] + rng.standard_normal((m, width))
        target[: max(1, m // 20)] *= 50  # a few far outliers stretch some boxes
    elif kind == "huge":  # float32 squares would overflow: the float64 search
        source = rng.uniform(-3e37, 3e37, (n, width))
        target = rng.uniform(-3e37, 3e37, (m, width))
    else:  # squares underflow float32's normal range
        source = rng.uniform(-1e-20, 1e-20, (n, width))
        target = rng.uniform(-1e-20, 1e-20, (m, width))
    return source.astype(np.float32), target.astype(np.float32)


@settings(max_examples=40, deadline=None)
@given(points=point_sets(), chunk=st.sampled_from([1, 5, 64, 100, 4096]),
       device=st.sampled_from([CPU, NO_DOUBLES]))
def test_nearest_equals_the_reference(points: tuple[np.ndarray, np.ndarray], chunk: int,
                                          device: _runtime.Device) -> None:
    source, target = points
    index, distance = _neighbours_kernels.nearest(source, target, chunk, device)
    expected_index, expected_distance = reference_nearest(source, target)
    assert index.dtype == np.int64 and distance.dtype == np.float32
    assert np.array_equal(index, expected_index)
    assert np.array_equal(distance, expected_distance)


@pytest.mark.parametrize("width", [2, 3, 12])
def test_nearest_on_larger_sets_is_exact_and_chunk_independent(width: int) -> None:
    rng = np.random.default_rng(width)
    source = np.round(rng.uniform(0, 60, (3000, width))).astype(np.float32) + 1000
    target = np.round(rng.uniform(0, 60, (2500, width))).astype(np.float32) + 1000
    expected = reference_nearest(source, target)
    for chunk in (37, 4096):
        index, distance = ops.nearest_neighbours(source, target, backend="torch", chunk=chunk)
        assert np.array_equal(index, expected[0]) and np.array_equal(distance, expected[1])


@pytest.mark.parametrize("scale", [1e19, 3e37, 1e-22, 3e-23])
@pytest.mark.parametrize("device", [CPU, NO_DOUBLES], ids=["float64-device", "no-float64-device"])
def test_huge_and_tiny_wide_coordinates_are_exact(scale: float, device: _runtime.Device) -> None:
    """Coordinates whose float32 squares overflow (1e19 in 16-D, 3e37) or underflow (1e-22, 3e-23),
    16 wide, 300 x 250 pairs (more than 65,536), with duplicate targets: exact, chunk-independent."""
    rng = np.random.default_rng(int(np.log10(scale)) + 100)
    source = (rng.uniform(-1, 1, (300, 16)) * scale).astype(np.float32)
    target = (rng.uniform(-1, 1, (250, 16)) * scale).astype(np.float32)
    target[[40, 90, 200]] = source[5]  # ties: the lowest index must win
    expected = reference_nearest(source, target)
    assert expected[0][5] == 40
    for chunk in (7, 4096):
        index, distance = _neighbours_kernels.nearest(source, target, chunk, device)
        assert np.array_equal(index, expected[0]) and np.array_equal(distance, expected[1])
    index, distance = ops.nearest_neighbours(source, target, backend="torch")
    assert np.array_equal(index, expected[0]) and np.array_equal(distance, expected[1])


@pytest.mark.parametrize("seed", [46, 65, 132])
@pytest.mark.parametrize("device", [CPU, NO_DOUBLES], ids=["float64-device", "no-float64-device"])
def test_wide_points_whose_squares_are_subnormal_are_exact(seed: int, device: _runtime.Device) -> None:
    """A constant coordinate of 1 beside ones near 2**-70: the magnitude check passes, yet the
    centred squares are float32 subnormals. Before the matrix path shared the core's scaled plan
    (no scaling, no underflow term) these seeds each lost one true nearest."""
    rng = np.random.default_rng(seed)
    source = (rng.standard_normal((50, 8)) * 2.0 ** -70).astype(np.float32)
    target = (rng.standard_normal((60, 8)) * 2.0 ** -70).astype(np.float32)
    source[:, 0] = target[:, 0] = 1.0
    expected = reference_nearest(source, target)
    index, distance = _neighbours_kernels.nearest(source, target, 4096, device)
    assert np.array_equal(index, expected[0]) and np.array_equal(distance, expected[1])


def test_every_duplicate_target_goes_to_the_lowest_index() -> None:
    target = np.zeros((500, 2), np.float32)
    target[:7] = 5.0  # the lowest-indexed points are NOT the nearest
    source = np.zeros((200, 2), np.float32)
    index, distance = _neighbours_kernels.nearest(source, target, 64, CPU)
    assert index.tolist() == [7] * 200 and distance.tolist() == [0.0] * 200


def test_passes_never_exceed_the_callers_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    settle = _neighbours_kernels._Verdict.settle

    def spy(self: _neighbours_kernels._Verdict, row_ids: torch.Tensor, local: torch.Tensor, cols: torch.Tensor) -> None:
        seen.append(int(row_ids.shape[0]))
        settle(self, row_ids, local, cols)

    monkeypatch.setattr(_neighbours_kernels._Verdict, "settle", spy)
    rng = np.random.default_rng(1)
    for width in (2, 9):
        source = rng.standard_normal((700, width)).astype(np.float32)
        target = rng.standard_normal((600, width)).astype(np.float32)
        for chunk in (1, 13, 200):
            seen.clear()
            index, _ = _neighbours_kernels.nearest(source, target, chunk, CPU)
            assert seen and max(seen) <= chunk, (width, chunk, max(seen))
            assert np.array_equal(index, reference_nearest(source, target)[0])


def test_a_small_pass_budget_splits_the_work_and_stays_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACR_ACCEL_TORCH_PASS_BYTES", str(1 << 16))
    calls: list[int] = []
    block_pass = _neighbours_kernels._block_pass

    def spy(sources: torch.Tensor, *rest: object) -> None:
        calls.append(int(sources.shape[0]))
        block_pass(sources, *rest)  # type: ignore[arg-type]  # forwarded unchanged

    monkeypatch.setattr(_neighbours_kernels, "_block_pass", spy)
    rng = np.random.default_rng(4)
    source = rng.uniform(0, 100, (2000, 2)).astype(np.float32)
    target = rng.uniform(0, 100, (2000, 2)).astype(np.float32)
    index, distance = _neighbours_kernels.nearest(source, target, 4096, CPU)
    assert len(calls) > 4
    expected = reference_nearest(source, target)
    assert np.array_equal(index, expected[0]) and np.array_equal(distance, expected[1])


def test_pruning_leaves_few_blocks_on_uniform_points(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the blocks: on 20,000 uniform points each source block sees ~12 of 313."""
    widths: list[int] = []
    block_pass = _neighbours_kernels._block_pass

    def spy(sources: torch.Tensor, ids: torch.Tensor, blocks: torch.Tensor, t_ids: torch.Tensor,
            chosen: torch.Tensor, *rest: object) -> None:
        widths.append(int(chosen.shape[1]))
        block_pass(sources, ids, blocks, t_ids, chosen, *rest)  # type: ignore[arg-type]  # forwarded

    monkeypatch.setattr(_neighbours_kernels, "_block_pass", spy)
    rng = np.random.default_rng(0)
    points = rng.uniform(0, 1000, (40_000, 2)).astype(np.float32)
    _neighbours_kernels.nearest(points[:20_000], points[20_000:], 4096, CPU)
    assert widths and max(widths) < 40


def test_nearest_retries_smaller_passes_after_out_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    block_pass = _neighbours_kernels._block_pass

    def flaky(sources: torch.Tensor, *rest: object) -> None:
        sizes.append(int(sources.shape[0]))
        if sources.shape[0] > 3:
            raise oom()
        block_pass(sources, *rest)  # type: ignore[arg-type]  # forwarded unchanged

    monkeypatch.setattr(_neighbours_kernels, "_block_pass", flaky)
    rng = np.random.default_rng(2)
    source = rng.uniform(0, 100, (1500, 2)).astype(np.float32)
    target = rng.uniform(0, 100, (1500, 2)).astype(np.float32)
    index, distance = ops.nearest_neighbours(source, target, backend="torch")
    expected = reference_nearest(source, target)
    assert np.array_equal(index, expected[0]) and np.array_equal(distance, expected[1])
    assert sizes[0] > 3 and min(sizes) <= 3  # started big, halved until it fitted


def test_nearest_gives_up_with_backend_out_of_memory_at_the_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*_: object) -> None:
        raise oom()

    monkeypatch.setattr(_neighbours_kernels, "_block_pass", full)
    with pytest.raises(BackendOutOfMemory, match="out of memory"):
        ops.nearest_neighbours(np.zeros((300, 2)), np.ones((300, 2)), backend="torch")


def test_the_matrix_path_takes_wide_points_and_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    rows: list[int] = []
    settle = _neighbours_kernels._Verdict.settle

    def flaky(self: _neighbours_kernels._Verdict, row_ids: torch.Tensor, local: torch.Tensor,
              cols: torch.Tensor) -> None:
        rows.append(int(row_ids.shape[0]))
        if row_ids.shape[0] > 50:
            raise oom()
        settle(self, row_ids, local, cols)

    monkeypatch.setattr(_neighbours_kernels._Verdict, "settle", flaky)
    rng = np.random.default_rng(9)
    centre = rng.uniform(-1000, 1000, 32)
    source = (centre + rng.standard_normal((400, 32)) * 0.05).astype(np.float32)
    target = (centre + rng.standard_normal((900, 32)) * 0.05).astype(np.float32)
    index, distance = _neighbours_kernels.nearest(source, target, 4096, CPU)
    expected = reference_nearest(source, target)
    assert np.array_equal(index, expected[0]) and np.array_equal(distance, expected[1])
    assert rows[:4] == [400, 200, 100, 50]  # halved after each failure, resumed where it stopped
    assert sum(rows[3:]) == 400
