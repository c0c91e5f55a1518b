"""``tiling.run_parts``' parts run in the caller's context: a part that dispatches an operation
sees the ``config.override`` its caller is under, in the pool's threads as in the caller's."""

from __future__ import annotations

import contextvars
import threading

from spacr_accel_core import config
from spacr_accel_core.tiling import cpu_threads, run_parts

_MARK: contextvars.ContextVar[str] = contextvars.ContextVar("test_run_parts_mark", default="unset")


def test_every_part_sees_the_callers_context_variables_and_override() -> None:
    seen: list[tuple[str, tuple[str, ...] | None, bool, bool]] = []
    lock = threading.Lock()
    caller = threading.get_ident()
    parts = max(4, cpu_threads() + 2)

    def part(_index: int) -> None:
        settings = config.current()
        with lock:
            seen.append((_MARK.get(), settings.backends, settings.only, threading.get_ident() != caller))

    token = _MARK.set("the caller's")
    try:
        with config.override(backends=["numpy"], only=True):
            run_parts(part, [(index,) for index in range(parts)])
    finally:
        _MARK.reset(token)
    assert len(seen) == parts
    assert {entry[:3] for entry in seen} == {("the caller's", ("numpy",), True)}
    if cpu_threads() > 1:
        assert any(entry[3] for entry in seen)  # some parts really ran on the pool's threads


def test_a_part_changing_a_variable_leaves_the_caller_and_other_parts_alone() -> None:
    parts = max(4, cpu_threads() + 2)

    def part(index: int) -> str:
        before = _MARK.get()
        _MARK.set(f"part {index}")
        return before

    def call() -> tuple[list[str], str]:
        return run_parts(part, [(index,) for index in range(parts)]), _MARK.get()

    seen, after = contextvars.copy_context().run(call)  # a context of its own: nothing leaks to other tests
    assert seen == ["unset"] * parts
    assert after == "part 0"  # the first part runs in the caller's own thread and context; the rest in copies
