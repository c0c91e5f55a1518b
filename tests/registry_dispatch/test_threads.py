"""32 threads on a cold registry: every answer right, discovery once, last_dispatch per thread."""

from __future__ import annotations

import threading

import numpy as np
from scipy.ndimage import maximum_filter as scipy_maximum_filter

import spacr_accel_core
from spacr_accel_core import ops

THREADS = 32


def nearest_reference(source: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    squared = ((source[:, None, :].astype(np.float64) - target[None, :, :].astype(np.float64)) ** 2).sum(-1)
    index = squared.argmin(axis=1)
    return index, np.sqrt(squared[np.arange(len(source)), index]).astype(np.float32)


def test_cold_registry_under_32_threads(kit, plug):
    counter = plug(kit.make_plugin("counter", priority=1000.0, matmul=kit.reference_matmul), "counter")
    spacr_accel_core.refresh()
    assert counter.calls["backend_info"] == 0  # cold: nothing discovered yet
    barrier = threading.Barrier(THREADS)
    errors: list[tuple[int, BaseException]] = []
    served: dict[int, tuple[str | None, ...]] = {}

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        field = rng.integers(0, 50, size=(20 + seed, 17)).astype(np.float32)
        first = rng.integers(-8, 8, size=(seed + 1, 5)).astype(np.float32)
        second = rng.integers(-8, 8, size=(5, 3)).astype(np.float32)
        source = rng.integers(0, 6, size=(30, 2)).astype(np.float32)
        target = rng.integers(0, 6, size=(25, 2)).astype(np.float32)
        try:
            barrier.wait(timeout=60)  # all 32 hit the cold registry together
            seen: list[str | None] = []
            for _ in range(3):
                product = ops.matmul(first, second)
                seen.append(spacr_accel_core.last_dispatch().backend)
                np.testing.assert_array_equal(product, first.astype(np.float64) @ second.astype(np.float64))
                filtered = ops.maximum_filter(field, 5)
                np.testing.assert_array_equal(filtered, scipy_maximum_filter(field, 5, mode="nearest"))
                index, distance = ops.nearest_neighbours(source, target, chunk=seed + 1)
                want_index, want_distance = nearest_reference(source, target)
                np.testing.assert_array_equal(index, want_index)
                np.testing.assert_array_equal(distance, want_distance)
                last = spacr_accel_core.last_dispatch()
                assert last.operation == "nearest_neighbours", last
                seen.append(last.operation)
            served[seed] = tuple(seen)
        except BaseException as exc:
            errors.append((seed, exc))
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert not errors, errors[:3]
    assert len(served) == THREADS
    assert all(seen == ("counter", "nearest_neighbours") * 3 for seen in served.values())
    assert counter.calls["backend_info"] == 1  # discovery ran once for all 32 threads
    assert counter.calls["matmul"] == 3 * THREADS


def test_last_dispatch_is_per_thread(kit, plug):
    plug(kit.make_plugin("counter", priority=1000.0, matmul=kit.reference_matmul), "counter")
    ops.matmul(np.ones((2, 2)), np.ones((2, 2)))
    seen: list[object] = []

    def other() -> None:
        seen.append(spacr_accel_core.last_dispatch())
        ops.maximum_filter(np.ones((3, 3)), 3)
        seen.append(spacr_accel_core.last_dispatch())

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen[0] is None  # a fresh thread has served nothing yet
    assert seen[1].operation == "maximum_filter"
    mine = spacr_accel_core.last_dispatch()
    assert (mine.operation, mine.backend) == ("matmul", "counter")


def test_core_answers_are_recorded(plug):
    ops.nearest_neighbours(np.zeros((3, 2)), np.zeros((0, 2)))
    last = spacr_accel_core.last_dispatch()
    assert (last.operation, last.backend, last.declined) == ("nearest_neighbours", "core", ())
    ops.maximum_filter(np.ones((3, 3)), 1)
    assert spacr_accel_core.last_dispatch().operation == "maximum_filter"
    assert spacr_accel_core.last_dispatch().backend == "core"
