"""How a backend sizes its passes, on its own: ``tiled``'s out-of-memory retries (a tile halved,
resumed, given up only at the floor; any other error let through untouched; a plain loop when
everything fits) and ``pass_budget`` (the free memory, the override and the cap)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacr_accel_core import BackendOutOfMemory
from spacr_accel_core.tiling import tiled

# ---- tiled ---------------------------------------------------------------------------------------


class FakeOutOfMemory(Exception):
    """What a library raises when the device is full (CuPy: a MemoryError; torch: a RuntimeError)."""


def run(total: int, tile: int, floor: int, capacity: int) -> tuple[list[tuple[str, int, int]], BaseException | None]:
    """Drive ``tiled`` with a device that fits at most ``capacity`` items; the log of events."""
    events: list[tuple[str, int, int]] = []

    def step(start: int, stop: int) -> None:
        if stop - start > capacity:
            events.append(("full", start, stop))
            raise FakeOutOfMemory(f"out of memory allocating {stop - start} items\nsecond line")
        events.append(("done", start, stop))

    try:
        tiled(total, tile, floor, step, is_out_of_memory=lambda exc: isinstance(exc, FakeOutOfMemory),
              release=lambda: events.append(("release", -1, -1)), label="fake op")
    except BackendOutOfMemory as exc:
        return events, exc
    return events, None


@settings(max_examples=300, deadline=None)
@given(total=st.integers(0, 500), tile=st.integers(-2, 600), floor=st.integers(-2, 40),
       capacity=st.integers(0, 200))
def test_tiled_halves_resumes_and_gives_up_only_at_the_floor(total: int, tile: int, floor: int,
                                                             capacity: int) -> None:
    events, error = run(total, tile, floor, capacity)
    effective_floor = max(1, min(floor, max(1, tile)))
    done = [(start, stop) for kind, start, stop in events if kind == "done"]
    # Finished work is never redone: the finished tiles are consecutive, in order, from 0.
    assert [start for start, _ in done] == [0, *(stop for _, stop in done[:-1])][:len(done)]
    assert all(stop - start <= capacity for start, stop in done)
    for position, (kind, start, stop) in enumerate(events):
        if kind != "full":
            continue
        # A release follows every failure; the retry resumes at the same start with half the tile.
        assert events[position + 1][0] == "release"
        if position + 2 < len(events):
            _, again, again_stop = events[position + 2]
            assert again == start
            assert again_stop - again == min(total - start, max(effective_floor, (stop - start) // 2))
    if capacity >= effective_floor or total <= capacity:
        assert error is None
        assert (done[-1][1] if done else 0) == total
    else:
        assert error is not None
        assert events[-1][0] == "release"
        message = str(error)
        assert message.startswith("fake op: out of memory even for")
        assert "(the floor)" in message and "FakeOutOfMemory: out of memory allocating" in message
        assert "second line" not in message


def test_tiled_lets_any_other_error_through_untouched() -> None:
    released: list[int] = []
    bug = ValueError("a shape bug, not a busy card")
    seen: list[tuple[int, int]] = []

    def step(start: int, stop: int) -> None:
        seen.append((start, stop))
        if start >= 10:
            raise bug

    with pytest.raises(ValueError) as caught:
        tiled(100, 10, 1, step, is_out_of_memory=lambda exc: isinstance(exc, MemoryError),
              release=lambda: released.append(1), label="x")
    assert caught.value is bug and not released and seen == [(0, 10), (10, 20)]


def test_tiled_is_a_plain_loop_when_everything_fits() -> None:
    seen: list[tuple[int, int]] = []
    tiled(10, 4, 1, lambda start, stop: seen.append((start, stop)), is_out_of_memory=lambda exc: True,
          release=lambda: pytest.fail("nothing to release"), label="x")
    assert seen == [(0, 4), (4, 8), (8, 10)]


def test_pass_budget_follows_the_free_memory_the_override_and_the_cap():
    from spacr_accel_core.tiling import pass_budget

    assert pass_budget(None, override=None, host=64 << 20) == 64 << 20
    assert pass_budget(10 << 30, override=None, host=1, fraction=0.4, cap=16 << 30) == int(0.4 * (10 << 30))
    assert pass_budget(100 << 30, override=None, host=1, fraction=0.4, cap=16 << 30) == 16 << 30
    assert pass_budget(1000, override=None, host=1) == 1 << 20  # a nearly full card still gets a floor
    assert pass_budget(10 << 30, override="123456789", host=1) == 123456789
    assert pass_budget(10 << 30, override="12", host=1) == 1 << 16
    assert pass_budget(None, override="lots", host=5) == 5  # unreadable: ignored
