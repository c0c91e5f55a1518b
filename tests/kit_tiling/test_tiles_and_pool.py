"""The loops a backend drives itself: ``tiles`` (a ``Tile`` per pass, one that ran out of memory
given again at half its size from where it stopped), the CPU pool it maps its own function over
(``cpu_pool``, ``None`` inside the pool's own threads) and ``settled``, which waits for every part
whatever happened and raises the first failure."""

from __future__ import annotations

import threading
import time
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor

import pytest

from spacr_accel_core import BackendOutOfMemory
from spacr_accel_core.tiling import Tile, cpu_pool, settled, tiles


class FakeOutOfMemory(Exception):
    """What a library raises when the device is full (CuPy: a MemoryError; torch: a RuntimeError)."""


def _is_full(exc: BaseException) -> bool:
    return isinstance(exc, FakeOutOfMemory)


# ---- tiles ---------------------------------------------------------------------------------------


def _drive(total: int, tile: int, floor: int, capacity: int) -> tuple[list[str], BaseException | None]:
    """Drive ``tiles`` as a backend does (``with tile: step``), on a device that fits ``capacity``
    items; the log of passes and releases."""
    log: list[str] = []
    try:
        for part in tiles(total, tile, floor, is_out_of_memory=_is_full, release=lambda: log.append("release"),
                          label="fake maximum_filter"):
            assert isinstance(part, Tile)
            with part:
                if part.stop - part.start > capacity:
                    log.append(f"full {part.start}:{part.stop}")
                    raise FakeOutOfMemory(f"out of memory for {part.stop - part.start} items\nsecond line")
                log.append(f"done {part.start}:{part.stop}")
            if part.failed is not None:
                assert part.failed == f"FakeOutOfMemory: out of memory for {part.stop - part.start} items"
    except BackendOutOfMemory as exc:
        return log, exc
    return log, None


def test_a_tile_that_runs_out_of_memory_is_halved_and_resumed_where_it_stopped() -> None:
    log, error = _drive(total=10, tile=8, floor=1, capacity=3)
    assert error is None
    assert log == ["full 0:8", "release", "full 0:4", "release", "done 0:2", "done 2:4", "done 4:6",
                   "done 6:8", "done 8:10"]


def test_tiles_give_up_only_at_the_floor_naming_the_reason() -> None:
    log, error = _drive(total=10, tile=8, floor=4, capacity=3)
    assert log == ["full 0:8", "release", "full 0:4", "release"]
    assert isinstance(error, BackendOutOfMemory)
    assert "fake maximum_filter" in str(error) and "4 item(s)" in str(error) and "out of memory for 4" in str(error)


def test_a_tile_lets_any_other_error_through_untouched() -> None:
    released: list[int] = []
    bug = KeyError("a bug, not a full card")
    with pytest.raises(KeyError) as info:
        for part in tiles(5, 5, 1, is_out_of_memory=_is_full, release=lambda: released.append(1), label="x"):
            with part:
                raise bug
    assert info.value is bug and not released


def test_tiles_are_a_plain_loop_when_everything_fits() -> None:
    log, error = _drive(total=7, tile=3, floor=1, capacity=3)
    assert error is None and log == ["done 0:3", "done 3:6", "done 6:7"]
    assert list(tiles(0, 3, 1, is_out_of_memory=_is_full, release=lambda: None, label="x")) == []


# ---- cpu_pool ------------------------------------------------------------------------------------


def test_cpu_pool_is_one_executor_and_none_inside_its_own_threads() -> None:
    pool = cpu_pool()
    assert pool is not None and cpu_pool() is pool
    inside = pool.submit(lambda: (cpu_pool(), threading.current_thread().name)).result(timeout=60)
    assert inside[0] is None and inside[1].startswith("spacr-accel-cpu")
    seen: list[object] = []
    worker = threading.Thread(target=lambda: seen.append(cpu_pool()))  # another thread of the caller's
    worker.start()
    worker.join(timeout=60)
    assert seen == [pool]


# ---- settled -------------------------------------------------------------------------------------


def _slow(seconds: float, value: int, fail: bool = False) -> int:
    time.sleep(seconds)
    if fail:
        raise ValueError(f"part {value} failed")
    return value


def test_settled_waits_for_every_part_and_raises_the_first_failure_in_order() -> None:
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(_slow, 0.3, 1, True), pool.submit(_slow, 0.05, 2, True), pool.submit(_slow, 0.4, 3)]
        with pytest.raises(ValueError, match="part 1 failed"), settled(futures):
            pass
        assert all(future.done() for future in futures)


def test_settled_raises_the_bodys_error_after_every_part_has_finished() -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(_slow, 0.3, 1, True), pool.submit(_slow, 0.3, 2)]
        with pytest.raises(KeyError), settled(futures):
            raise KeyError("the caller's own part")
        assert all(future.done() for future in futures)


def test_settled_with_every_part_done_returns_quietly() -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(_slow, 0.01, value) for value in range(4)]
        with settled(futures):
            pass
        assert [future.result() for future in futures] == [0, 1, 2, 3]
    with settled([]):
        pass


def test_a_cancelled_part_is_raised_after_the_others_have_finished() -> None:
    """A part cancelled before it ran left its share of the output unwritten: that is raised, but
    only once every other part has finished (they write into what the caller then frees)."""
    gate = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as pool:
        blocker = pool.submit(gate.wait, 60)
        cancelled: Future[int] = pool.submit(_slow, 0.0, 1)
        later = pool.submit(_slow, 0.4, 2)
        assert cancelled.cancel()
        with pytest.raises(CancelledError), settled([blocker, cancelled, later]):
            gate.set()
        assert later.done() and later.result() == 2
