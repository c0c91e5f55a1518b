"""``spacr-accel warm``: build every installed backend's lazily built pieces now (numba's kernels),
with a progress bar, and the doctor's section on how far each has got.

WHY A COMMAND. A backend that compiles in the background (numba: ~45 s of one core the first time
on a machine) declines every call until it is ready, and the NumPy floor answers meanwhile: a fresh
install's first process is as slow as the floor. Run once after installing (``scripts/install-from-
clone`` does), the command fills the cache, and every later process loads the compiled kernels in
about a second. It is idempotent: run again it finds everything cached, says so, and only loads.

VENDOR-FREE. The core knows no backend here: it calls every plugin's ``spacr_accel_warm_up`` (the
hook :func:`spacr_accel_core.warm_up` calls) and draws each plugin's ``spacr_accel_warm_state``
(pieces done of total, and whether a build is running anywhere on the machine) while it waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from ..contract._errors import describe
from ..contract._records import WarmState

Report = dict[str, Any]

_DRAW = 0.25
"""Seconds between two looks at the backends' states while they build."""

INTERRUPTED = ("spacr-accel warm: interrupted; a compiler in the background goes on filling the cache "
               "(`spacr-accel warm` again waits for it)")
"""The one line Ctrl-C prints (a detached build outlives the command: it is in a session of its own)."""


def states() -> dict[str, WarmState]:
    """Each plugin's ``spacr_accel_warm_state`` answer, best first; a plugin whose hook raises or
    answers something else is left out (the doctor must not fail on it)."""
    from ..dispatch._registry import REGISTRY

    found: dict[str, WarmState] = {}
    for name, call in REGISTRY.hookimpls("spacr_accel_warm_state"):
        try:
            answer = call()
        except Exception:  # a broken plugin's state is simply not shown
            continue
        if isinstance(answer, WarmState):
            found[name] = answer
    return found


def _row(name: str, state: WarmState) -> Report:
    return {"name": name, "state": state.words, "done": state.done, "total": state.total,
            "building": state.building, "note": state.note}


def doctor_section() -> Report:
    """The doctor's ``warm`` section: per backend that builds lazily, its state in words
    (``ready``, ``compiling (k of n)``, ``not compiled yet (`spacr-accel warm`)``)."""
    return {"rows": [_row(name, state) for name, state in states().items()]}


def render_doctor(report: Report) -> list[str]:
    """The doctor's text lines for its ``warm`` section."""
    section = report.get("warm") or {"rows": [], "error": None}
    out = ["", "Compiled kernels"]
    if section.get("error"):
        out.append(f"  (could not be read: {section['error']})")
    for row in section["rows"]:
        out.append(f"  {row['name']}: {row['state']}" + (f"; {row['note']}" if row["note"] else ""))
    if not section["rows"] and not section.get("error"):
        out.append("  (no installed backend builds anything lazily)")
    return out


class Bar:
    """Kernels done of total and the seconds elapsed, on stderr: rewritten in place on a terminal,
    one line per change otherwise (a log keeps the progress).

    :param stream: where to draw; ``None`` draws nothing.
    :param tty: whether ``stream`` is a terminal.
    """

    WIDTH = 24

    def __init__(self, stream: TextIO | None, tty: bool) -> None:
        self._stream, self._tty = stream, tty
        self._last = ""
        self._width = 0

    def draw(self, name: str, state: WarmState, elapsed: float) -> None:
        """Show one backend's progress (only a change is written off a terminal)."""
        if self._stream is None:
            return
        filled = self.WIDTH * state.done // state.total if state.total else self.WIDTH
        counted = f"{name} [{'#' * filled}{'.' * (self.WIDTH - filled)}] {state.done} of {state.total} kernels"
        if self._tty:
            line = f"{counted}, {elapsed:.1f} s"
            self._stream.write("\r" + line.ljust(self._width))
            self._width = len(line)
        elif counted != self._last:
            self._stream.write(f"{counted}, {elapsed:.1f} s\n")
        self._last = counted
        self._stream.flush()

    def close(self) -> None:
        """End the line in place, so what follows starts on a clean one."""
        if self._stream is not None and self._tty and self._width:
            self._stream.write("\n")
            self._stream.flush()


def run(timeout: float = 1800.0, stream: TextIO | None = None, tty: bool = False,
        warm: Callable[..., dict[str, bool]] | None = None) -> Report:
    """Build every installed backend's lazy pieces and wait for them.

    :param timeout: seconds each backend may take (numba's first compile on a busy machine can
        take minutes: its compiler runs at the lowest priority).
    :param stream: where the progress bar goes (stderr), or ``None``.
    :param tty: whether ``stream`` is a terminal (a bar in place) or a log (a line per change).
    :param warm: the call that builds (default :func:`spacr_accel_core.warm_up`); for tests.
    :returns: ``{"ok", "seconds", "rows": [{name, ready, done, total, cached_before, built_now,
        seconds, state, note}]}``; ``ok`` when every backend is ready.
    """
    if warm is None:
        from .. import warm_up
        warm = warm_up
    build_all: Callable[..., dict[str, bool]] = warm
    before = states()
    began = time.monotonic()
    outcome: dict[str, Any] = {}

    def build() -> None:
        try:
            outcome["ready"] = build_all(timeout=timeout)
        except Exception as exc:  # reported per backend below, never a traceback
            outcome["error"] = describe(exc)

    worker = threading.Thread(target=build, name="spacr-accel-warm", daemon=True)
    worker.start()
    bar = Bar(stream, tty)
    try:
        while True:
            worker.join(_DRAW)
            now = states()
            for name, state in now.items():
                bar.draw(name, state, time.monotonic() - began)
            if not worker.is_alive():
                break
    finally:  # Ctrl-C included: the bar's line ended, so the caller's one line starts clean
        bar.close()
    seconds = time.monotonic() - began
    ready: dict[str, bool] = outcome.get("ready", {})
    rows = []
    for name in dict.fromkeys([*ready, *now]):
        state = now.get(name, WarmState(0, 0))
        first = before.get(name, WarmState(0, state.total))
        rows.append({"name": name, "ready": bool(ready.get(name, False)), "done": state.done, "total": state.total,
                     "cached_before": first.done, "built_now": max(0, state.done - first.done),
                     "seconds": round(seconds, 3), "state": state.words, "note": state.note})
    return {"ok": all(row["ready"] for row in rows) and "error" not in outcome,
            "seconds": round(seconds, 3), "error": outcome.get("error"), "rows": rows}


def render(result: Report) -> str:
    """The text ``spacr-accel warm`` prints on stdout: one line per backend."""
    lines = []
    for row in result["rows"]:
        total = row["total"]
        if row["ready"] and total and row["cached_before"] >= total:
            what = f"all {total} kernels already cached; loaded in {row['seconds']:.1f} s"
        elif row["ready"]:
            what = (f"{total} of {total} kernels ready in {row['seconds']:.1f} s "
                    f"({row['built_now']} newly cached, {row['cached_before']} already cached)")
        else:
            what = (f"NOT ready after {row['seconds']:.1f} s: {row['state']} "
                    f"({row['done']} of {total} kernels)")
        lines.append(f"{row['name']}: {what}" + (f"; {row['note']}" if row["note"] else ""))
    if result.get("error"):
        lines.append(f"the warm-up failed: {result['error']}")
    if not result["rows"]:
        lines.append("no installed backend builds anything lazily: nothing to do")
    return "\n".join(lines) + "\n"
