"""How every benchmark here times and prints: contenders side by side, and their ratio.

These machines are shared and noisy, so no benchmark reports an absolute time as its finding: each
one times its contenders in one process (or in fresh processes, started in turn) and prints their
ratio. The timer is :func:`side_by_side`: every contender runs once a round, in turn, for
``repeat`` rounds, so that a noisy moment falls on all of them alike instead of on whichever ran
first; each contender's wall seconds and CPU seconds (every thread of this process) are kept, and
the fastest (noise only ever adds time) or the median is read off the :class:`Timing`. Where the
rounds are fresh processes that time themselves, :func:`rounds` runs them in the same order and
keeps what each reported.

:func:`ratio_row` prints a row "ours against theirs": both times, their ratio and, where there is
one, whether the ratio meets its target (benchmarks print their targets; they do not assert them).
:func:`clocked` and :class:`Steps` time the parts of one run: a function each time it is called, a
chain's steps one after another.

The benchmarks import this module by name: a script run as ``python benchmarks/bench_x.py`` has
its own folder first on ``sys.path``, and a child it starts runs the same way.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


@dataclass(frozen=True)
class Timing:
    """One contender's timed runs.

    :param wall: each run's wall seconds (per call, where a run made several).
    :param cpu: each run's CPU seconds, every thread of this process together (per call, likewise):
        on a machine other jobs share, how much work a contender did when wall times are noisy.
    :param answer: what the last run returned.
    """

    wall: tuple[float, ...]
    cpu: tuple[float, ...]
    answer: Any = field(default=None, compare=False)

    @property
    def best(self) -> float:
        """The fastest run: the one the machine's noise disturbed least."""
        return min(self.wall)

    @property
    def median(self) -> float:
        """The middle run: what a typical call costs, noise included."""
        return statistics.median(self.wall)

    @property
    def least_cpu(self) -> float:
        """The fewest CPU seconds a run took."""
        return min(self.cpu)


def rounds(calls: Mapping[K, Callable[[], T]], repeat: int, *, alternate: bool = False,
           after: Callable[[int, dict[K, T]], object] | None = None) -> dict[K, list[T]]:
    """Every call once a round, in turn, for ``repeat`` rounds; what each call returned, in order.

    For contenders that time themselves (a fresh process reporting its own figures), so that they
    still meet the machine in turn.

    :param calls: name -> the call.
    :param repeat: rounds.
    :param alternate: every other round runs the calls in reverse order, so that none is always the
        first after a pause (a machine warming up or slowing down then favours none).
    :param after: called with each round's number and answers once the round is done: a check
        that stops a long run at the first round whose answers differ.
    """
    order = list(calls)
    answers: dict[K, list[T]] = {name: [] for name in order}
    for number in range(repeat):
        for name in reversed(order) if alternate and number % 2 else order:
            answers[name].append(calls[name]())
        if after is not None:
            after(number, {name: answers[name][-1] for name in order})
    return answers


def side_by_side(calls: Mapping[K, Callable[[], object]], repeat: int, *, warm: bool = False, each: int = 1,
                 before: Mapping[K, Callable[[], object]] | None = None, sync: Callable[[], None] | None = None,
                 alternate: bool = False) -> dict[K, Timing]:
    """Time ``calls`` in interleaved rounds: each once a round, in turn, for ``repeat`` rounds.

    :param calls: name -> the call to time.
    :param repeat: rounds.
    :param warm: one untimed call of each first (what a first call loads is not timed).
    :param each: calls of each contender per timed run, its times divided by it: for a call of a
        few microseconds, whose single time the clock cannot resolve.
    :param before: name -> an untimed step run before each of that contender's calls, the untimed
        first one included (a patch installed or taken out, a process paused).
    :param sync: called before and after each timed run (a device's queue waited for, so that a
        time covers the work and not only its launch).
    :param alternate: every other round runs the contenders in reverse order.
    :returns: name -> its :class:`Timing`.
    """
    wait = sync or _nothing
    prepare = before or {}
    if warm:
        for name, call in calls.items():
            prepare.get(name, _nothing)()
            call()
        wait()
    wall: dict[K, list[float]] = {name: [] for name in calls}
    cpu: dict[K, list[float]] = {name: [] for name in calls}
    answers: dict[K, object] = {}
    order = list(calls)
    for number in range(repeat):
        for name in reversed(order) if alternate and number % 2 else order:
            prepare.get(name, _nothing)()
            call = calls[name]
            wait()
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(each):
                answers[name] = call()
            wait()
            wall[name].append((time.perf_counter() - start) / each)
            cpu[name].append((time.process_time() - start_cpu) / each)
    return {name: Timing(tuple(wall[name]), tuple(cpu[name]), answers.get(name)) for name in order}


def fastest(*calls: Callable[[], object], repeat: int, warm: bool = False) -> tuple[float, ...]:
    """The fastest wall seconds of each call, timed by :func:`side_by_side`, in the order given."""
    timed = side_by_side(dict(enumerate(calls)), repeat, warm=warm)
    return tuple(timed[number].best for number in range(len(calls)))


def _nothing() -> None:
    """No step: the default of :func:`side_by_side`'s ``before`` and ``sync``."""


def verdict(ratio: float, target: float) -> str:
    """``meets`` when ``ratio`` is within ``target`` (at most it), ``MISSES`` otherwise."""
    return "meets" if ratio <= target else "MISSES"


def ratio_row(label: str, ours: float, theirs: float, *, peer: str = "", target: float | None = None,
              note: str = "", width: int = 44) -> str:
    """One row: ``label``, our seconds against theirs (printed in ms), the ratio, the target's verdict.

    :param label: what was timed.
    :param ours: our seconds.
    :param theirs: the other side's seconds.
    :param peer: what the other side is, printed before its time.
    :param target: the most ``ours / theirs`` may be, printed with whether it is met.
    :param note: appended as it is (agreement, CPU seconds, who served).
    :param width: the label's column.
    """
    ratio = ours / theirs if theirs else float("nan")
    peer_words = f"{peer:<30} " if peer else ""
    judged = f"  (target <= {target:g}x: {verdict(ratio, target)})" if target is not None else ""
    return (f"{label:<{width}} {ours * 1e3:10.2f} ms  {peer_words}{theirs * 1e3:10.2f} ms  {ratio:7.3f}x"
            f"{judged}{note}")


def clocked(function: Callable[..., T], spent: Callable[[float], object]) -> Callable[..., T]:
    """``function``, its every call's wall seconds handed to ``spent`` (raised or returned alike).

    For timing a step of someone else's code in place: the wrapper is set where the step's callers
    look it up, and calls whatever was there.
    """

    def timed(*args: Any, **kwargs: Any) -> T:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent(time.perf_counter() - start)

    return timed


class Steps:
    """A chain's steps, each timed from the end of the one before: call it with a step's name when
    the step is done; a step named twice adds up."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.started = self.last = time.perf_counter()

    def __call__(self, step: str) -> None:
        now = time.perf_counter()
        self.seconds[step] = self.seconds.get(step, 0.0) + now - self.last
        self.last = now

    @property
    def total(self) -> float:
        """Seconds from the start to the last step's end."""
        return self.last - self.started
