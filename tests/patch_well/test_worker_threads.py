"""A decode worker shares the CPUs with its pool's other workers: spaCR's decode spawns ``n_workers``
processes, and a worker that split every transform over every core ran two threads per core."""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from spacr_accel_core.kit import _tiling as tiling  # its private state, which the test sets
from spacr_accel_core.tiling import cpu_threads, pool_width

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads the pool from /proc (Linux)")


def _cores() -> int:
    return len(os.sched_getaffinity(0))


def _threads_in_pool(width: int) -> set[int]:
    """What ``cpu_threads()`` answers in the spawned workers of a pool of ``width``, once all are up."""
    with ProcessPoolExecutor(width, mp_context=multiprocessing.get_context("spawn")) as pool:
        for _ in range(width):  # each submission to a pool without an idle worker starts one
            pool.submit(time.sleep, 0.0)
        return set(pool.map(cpu_threads, [8] * (3 * width)))


def test_a_spawned_worker_of_a_width_two_pool_splits_into_half_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert _threads_in_pool(2) == {max(1, min(8, _cores() // 2))}


def test_the_only_worker_of_a_pool_has_every_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert _threads_in_pool(1) == {min(8, _cores())}


def test_omp_num_threads_still_caps_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert _threads_in_pool(1) == {1}


def test_a_process_that_is_no_pools_worker_is_a_pool_of_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(tiling, "_width", [float("-inf"), 1])
    assert pool_width() == 1
    assert cpu_threads() == min(8, _cores())


def test_the_width_is_read_again_after_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool that starts its workers one by one (spaCR's, ten seconds apart) is seen growing."""
    seen = [3]
    monkeypatch.setattr(tiling, "_width", [float("-inf"), 1])
    monkeypatch.setattr(multiprocessing, "parent_process", multiprocessing.current_process)
    monkeypatch.setattr(tiling, "_siblings", lambda parent: seen[0])
    assert pool_width() == 3
    seen[0] = 1
    assert pool_width() == 3  # within the second: as read
    tiling._width[0] -= tiling._WIDTH_SECONDS
    assert pool_width() == 1
