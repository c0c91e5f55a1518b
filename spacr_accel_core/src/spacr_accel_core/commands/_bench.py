"""``spacr-accel bench``: each operation on each backend, checked against NumPy, side by side.

WHY FORCED, NOT DISPATCHED. Automatic dispatch would answer "what runs here" once per operation;
the bench wants every backend that CAN run, so it calls each with ``backend=name``. A backend that
says "not me, not now" (a :class:`RuntimeError`, e.g. CuPy with no card) is shown as skipped
with its reason, so the table also explains why a backend a user installed is not in use.

WHY SIDE BY SIDE. The repeats are interleaved (numpy, torch, ..., numpy, torch, ...) and the best
of each backend is kept, so a background job on a shared machine slows every backend alike
instead of whichever happened to run while it was busy; the speed-ups are ratios from one run.

WHY AGREEMENT FIRST. A fast wrong answer is worth nothing: every backend's first (warm-up) result
is compared with the NumPy backend's, with the contract's own exactness rules, before its time is
reported. A disagreement makes the command exit 1 so a CI job can run it as a check.

WHY THE WARM-UP IS NEVER A TIME. The first call pays one-off costs (``import torch``: seconds;
compiling a kernel), so it is checked but not timed: every backend that answers gets at least one
timed call after it, and the budget only cuts the later ones. Timing the warm-up once reported
torch's import as its best filter time (2.7 s against 12 ms warm).

WHY THE TIMED FIELD HOLDS NO NaN. A backend may decline a field holding a NaN (the contract lets it;
dispatch then passes the field on), and a NaN in the timed field would leave such a backend (the
OpenCV example) untimed on every field it does serve. The NaN rule is checked on a separate small
field with dead pixels, untimed (:attr:`Case.checks`); declining it is reported, not counted as a
problem.
"""

from __future__ import annotations

import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TextIO

import numpy as np

from ..contract._errors import describe as _describe
from ..contract._records import PluginStatus
from ..operations._operations import OPERATIONS

SCHEMA_VERSION = 1
"""Bumped when a key of the ``--json`` report is renamed or removed (adding one does not)."""

def reference() -> str | None:
    """The backend every other one is checked against, always benchmarked first: the floor (the
    loaded backend declaring ``try_last``, the NumPy one this project ships); ``None`` without one."""
    from ..dispatch._registry import REGISTRY

    return REGISTRY.floor()


SLOW_BUDGET_S = 5.0
"""Timed seconds per backend and operation after which the repeats stop early, so a backend
that is many times slower (a GPU backend forced onto a CPU) does not hold the bench for minutes."""

QUICK_BUDGET_S = 1.0
"""The same bound under ``--quick``, which promises seconds."""

Report = dict[str, Any]


@dataclass(frozen=True)
class Case:
    """One operation on one realistic input.

    :param operation: the ``spacr_accel_core.ops`` function name.
    :param label: the input in words, for the table.
    :param args: positional arguments of the op.
    :param compare: ``(reference, result) -> (agrees, detail)`` (the operation's ``agree``).
    :param checks: ``(label, args)`` of further inputs that are only checked against NumPy, never
        timed: rules (the NaN rule) that a backend may answer by declining, so they must not
        decide whether it is timed at all.
    :param keywords: keyword arguments of the op (``threshold=`` for the peaks).
    :param unavailable: why the input could not be built here (a library it needs is missing:
        SciPy, for the landmarks family's); every backend is then reported skipped with it.
    """

    operation: str
    label: str
    args: tuple[Any, ...]
    compare: Callable[[Any, Any], tuple[bool, str]]
    checks: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    keywords: tuple[tuple[str, Any], ...] = ()
    unavailable: str = ""


def cases(quick: bool, seed: int = 0) -> list[Case]:
    """Every operation of the table on its realistic input (its entry's ``bench``): a camera tile, a
    well's spots and cells.

    :param quick: smaller inputs, for a check that finishes in seconds.
    :param seed: the random seed, so two runs time the same data (each operation's input drawn from
        its own stream of it).
    :returns: one case per operation, in the table's order; an operation whose input needs what is
        not installed here (its ``bench`` raised a ``RuntimeError`` or an ``ImportError``) is a case
        with :attr:`Case.unavailable` set, so one missing library never stops the bench.
    """
    made = []
    for operation in tuple(OPERATIONS.values()):
        # Each operation draws from its own stream (``seed`` and its name), so its input for a seed
        # is the same whatever else the table holds and in whatever order.
        rng = np.random.default_rng([seed, zlib.crc32(operation.name.encode())])
        try:
            example = operation.bench(quick, rng)
        except (RuntimeError, ImportError) as exc:
            # Its input needs what this copy lacks (SciPy is not the core's dependency): the
            # operation is a row of skipped backends with the reason, and the others still run.
            made.append(Case(operation.name, "its input could not be built here", (), operation.agree,
                             unavailable=_describe(exc)))
            continue
        made.append(Case(operation.name, example.label, example.args, operation.agree, checks=example.checks,
                         keywords=example.keywords))
    return made


def candidates(requested: Sequence[str] | None) -> list[str]:
    """The backends to try: NumPy first, then what dispatch would use, then every other plugin.

    A plugin that is not usable for automatic dispatch may still run when forced (torch on a
    CPU-only machine), which is worth knowing, so it is tried rather than left out. A plugin that
    loaded and implements no operation (a device prober) is no backend, and is left out.

    :param requested: names from ``--backend``, or ``None`` for every installed plugin.
    :returns: distinct names, the :func:`reference` first.
    """
    first = [name for name in [reference()] if name is not None]
    if requested:
        return list(dict.fromkeys([*first, *requested]))
    from .. import plugins
    from ..ops import accelerated_backends

    names = [*first, *accelerated_backends(gpu=True)]
    names += [row.name for row in plugins() if row.status != "duplicate" and not _prober_only(row)]
    return list(dict.fromkeys(names))


_LOADED = ("ok", "unusable")
"""Statuses of a plugin that loaded, so its ``operations`` are what it implements (a plugin that
failed to load lists none, which says nothing about what it would implement)."""


def _prober_only(row: PluginStatus) -> bool:
    """A plugin that loaded and implements no operation: a device prober, not a backend.

    :param row: the plugin's row from :func:`spacr_accel_core.plugins`.
    """
    return row.status in _LOADED and not row.operations


def _implemented(names: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """``name -> operations`` for each loaded plugin among ``names``, so an operation a backend does
    not implement is reported as such rather than forced into the registry's refusal.

    :param names: the backends the bench runs.
    """
    from .. import plugins

    return {row.name: row.operations for row in plugins() if row.name in names and row.status in _LOADED}


class _Devices:
    """Where each backend that answered ran: ``cpu`` for a backend that needs no device, else the
    device the accelerator resolved (what torch runs on; ``cpu`` when it is forced onto the CPU).

    An accelerated backend that is usable here (it reached a device of its own) while the
    accelerator resolved only the CPU (no prober names that device: CuPy without torch) ran on
    ``gpu``: its card, not the CPU.

    :param accelerated: ``name -> whether the plugin needs a device``, from its row.
    :param usable: ``name -> whether its row's status is ok`` (it has a device here).
    """

    def __init__(self, accelerated: dict[str, bool], usable: dict[str, bool] | None = None) -> None:
        self._accelerated = accelerated
        self._usable = usable or {}
        self._device: str | None = None

    def of(self, name: str) -> str:
        """The device ``name`` ran on.

        :param name: a backend that answered a forced call.
        """
        if not self._accelerated.get(name, False):
            return "cpu"
        if self._device is None:
            from ..accelerator import device_string

            try:
                self._device = device_string()
            except Exception as exc:  # never let the label cost the table
                self._device = f"unknown ({_describe(exc)})"
        if self._device == "cpu" and self._usable.get(name, False):
            return "gpu"
        return self._device


class Progress:
    """One line on stderr, rewritten in place with ``\\r``; silent when not a terminal.

    :param stream: where to write; ``None`` writes nothing.
    :param total: the number of steps, for the ``[k/n]`` counter.
    """

    def __init__(self, stream: TextIO | None, total: int) -> None:
        self._stream = stream
        self._total = total
        self._done = 0
        self._width = 0

    def drop(self, steps: int) -> None:
        """Take steps that will not run out of the count (a skipped backend's repeats).

        :param steps: how many planned steps were cancelled.
        """
        self._total = max(self._done, self._total - steps)

    def step(self, text: str) -> None:
        """Count one step and show what runs now.

        :param text: the step, e.g. ``"matmul on torch, repeat 2/5"``.
        """
        self._done += 1
        if self._stream is None:
            return
        line = f"bench [{self._done}/{self._total}] {text}"
        self._stream.write("\r" + line.ljust(self._width))
        self._stream.flush()
        self._width = len(line)

    def close(self) -> None:
        """Erase the line so the table starts on a clean one."""
        if self._stream is not None and self._width:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()


def _attempt(call: Callable[[], Any]) -> tuple[str, str, Any, float]:
    """Run one forced call and classify how it went.

    :param call: the op with ``backend=`` bound.
    :returns: ``(status, reason, result, seconds)``; status is ``ok``, ``skipped`` (the backend
        declined with a RuntimeError or ran out of memory), ``faulty`` (it broke the contract: a
        wrong shape or dtype, or an exception a plugin must not raise) or ``error`` (anything
        else escaped, e.g. from a core older than the bench).
    """
    from ..contract._errors import PluginFault

    start = time.perf_counter()
    try:
        result = call()
    except PluginFault as exc:
        return "faulty", _describe(exc), None, 0.0
    except (RuntimeError, MemoryError) as exc:  # "not me, not now", or out of memory: not a bug
        return "skipped", _describe(exc), None, 0.0
    except Exception as exc:  # a broken plugin is a row in the table, never a crashed bench
        return "error", _describe(exc), None, 0.0
    return "ok", "", result, time.perf_counter() - start


def _one_case(case: Case, names: Sequence[str], repeats: int, budget: float, bar: Progress,
              implemented: dict[str, tuple[str, ...]] | None = None, devices: _Devices | None = None) -> Report:
    """Warm up and check every backend on one case, then time them side by side.

    :param case: the operation and its input.
    :param names: backends to try, the :func:`reference` first.
    :param repeats: timed rounds after the warm-up.
    :param budget: timed seconds after which a backend stops repeating (its best so far stands).
    :param bar: the progress line.
    :param implemented: ``name -> operations`` of the loaded plugins (:func:`_implemented`); a
        backend listed without this operation is reported as not implementing it, not called.
    :param devices: where each backend ran, for the ``device`` column.
    :returns: the case's entry of the report's ``operations``.
    """
    function = OPERATIONS[case.operation].function
    implemented = implemented or {}
    devices = devices or _Devices({})
    rows: dict[str, Report] = {}
    answers: dict[str, Any] = {}
    for name in names:
        rows[name] = {"backend": name, "status": "skipped", "device": None, "reason": "", "agrees": None,
                      "detail": "", "warmup_s": None, "best_s": None, "times_s": [], "speedup": None}
        if case.unavailable:  # no input to call it on: nothing to check or time
            bar.step(f"{case.operation} on {name}: no input")
            rows[name]["reason"] = f"no input: {case.unavailable}"
            bar.drop(repeats)
            continue
        if name in implemented and case.operation not in implemented[name]:
            bar.step(f"{case.operation} on {name}: not implemented")
            rows[name]["reason"] = f"does not implement {case.operation}"
            bar.drop(repeats)
            continue
        bar.step(f"{case.operation} on {name}, warm-up")
        status, reason, answer, seconds = _attempt(partial(function, *case.args, backend=name, **dict(case.keywords)))
        rows[name].update(status=status, reason=reason)
        if status == "ok":
            answers[name] = answer
            rows[name].update(warmup_s=seconds, device=devices.of(name))
        else:  # skipped, faulty or broken: it has no repeats to count
            bar.drop(repeats)
    if case.unavailable:
        return {"operation": case.operation, "input": case.label, "results": list(rows.values())}
    floor = reference()
    expected = None if floor is None else answers.get(floor)
    against = ""
    if expected is None and floor is not None and case.operation not in implemented.get(floor, (case.operation,)):
        # An operation the floor does not serve (a third party's) is checked against its row's plain
        # reference instead: slower, but every backend that serves it is still judged.
        status, _, expected, _ = _attempt(partial(OPERATIONS[case.operation].reference, *case.args,
                                                  **dict(case.keywords)))
        against = "; against the operation's reference (the floor does not implement it)"
        expected = expected if status == "ok" else None
    for name, answer in answers.items():
        if expected is None:
            rows[name]["detail"] = "no reference (the floor's answer) to check against"
        else:
            rows[name]["agrees"], rows[name]["detail"] = case.compare(expected, answer)
            rows[name]["detail"] += against
    if floor is not None and expected is not None:
        for label, args in case.checks:
            _check(case, function, label, args, rows, floor, [name for name in answers if name != floor])
    _repeat(case, function, rows, repeats, budget, bar)
    _speedups(rows, floor)
    return {"operation": case.operation, "input": case.label, "results": list(rows.values())}


def _check(case: Case, function: Callable[..., Any], label: str, args: tuple[Any, ...], rows: dict[str, Report],
           floor: str, names: Sequence[str]) -> None:
    """One untimed input of :attr:`Case.checks`, each backend against NumPy; the outcome joins its
    ``detail``. Declining it is the contract's right (dispatch passes it on), so it is reported but
    is no problem; a different answer or a broken contract is.

    :param case: the operation, for its comparison.
    :param function: the ``ops`` function.
    :param label: the input in words.
    :param args: its positional arguments.
    :param rows: backend name -> result row, updated in place.
    :param floor: the :func:`reference` backend.
    :param names: the backends that answered the timed input (the floor excluded).
    """
    status, reason, expected, _ = _attempt(partial(function, *args, backend=floor))
    if status != "ok":
        rows[floor]["detail"] += f"; {label}: not checked, {floor}: {reason}"
        return
    for name in names:
        row = rows[name]
        status, reason, answer, _ = _attempt(partial(function, *args, backend=name))
        if status == "ok":
            agrees, how = case.compare(expected, answer)
            row["agrees"] = bool(row["agrees"]) and agrees
            row["detail"] += f"; {label}: {how}"
        elif status == "skipped":
            row["detail"] += f"; declines {label} ({reason})"
        else:
            row["agrees"] = False
            row["detail"] += f"; {label}: {status}: {reason}"


def _repeat(case: Case, function: Callable[..., Any], rows: dict[str, Report], repeats: int, budget: float,
            bar: Progress) -> None:
    """The timed rounds, interleaved across the backends that ran, each kept to its budget.

    Every backend that answered its warm-up is timed at least once (the warm-up pays one-off costs
    and is never a time); the budget stops its later rounds. A backend that was skipped has no
    rounds, and its rounds are taken out of the progress count as soon as that is known.

    :param case: the operation and its input.
    :param function: the ``ops`` function.
    :param rows: backend name -> result row, updated in place.
    :param repeats: timed rounds after the warm-up.
    :param budget: timed seconds after which a backend stops repeating.
    :param bar: the progress line.
    """
    done = {name for name, row in rows.items() if row["status"] != "ok"}
    for round_ in range(repeats):
        for name, row in rows.items():  # in the order the backends were warmed up
            if name in done:
                continue
            if row["times_s"] and sum(row["times_s"]) > budget:  # its best so far stands
                done.add(name)
                bar.drop(repeats - round_)
                continue
            bar.step(f"{case.operation} on {name}, repeat {round_ + 1}/{repeats}")
            status, reason, _, seconds = _attempt(partial(function, *case.args, backend=name, **dict(case.keywords)))
            if status == "ok":
                row["times_s"].append(seconds)
            else:  # it ran once and then declined: report that, and drop its times
                row.update(status=status, reason=f"on a repeat: {reason}", times_s=[])
                done.add(name)
                bar.drop(repeats - round_ - 1)


def _speedups(rows: dict[str, Report], floor: str | None) -> None:
    """Fill in each row's best time and its speed-up over the reference, where both exist.

    :param rows: backend name -> result row, updated in place.
    :param floor: the :func:`reference` backend, or ``None``.
    """
    for row in rows.values():
        row["best_s"] = min(row["times_s"], default=None)
    base = rows[floor]["best_s"] if floor in rows else None
    for row in rows.values():
        if base and row["best_s"]:
            row["speedup"] = base / row["best_s"]


def run(
    *,
    quick: bool = False,
    repeat: int | None = None,
    backends: Sequence[str] | None = None,
    progress: TextIO | None = None,
) -> Report:
    """Benchmark every operation on every backend that runs here.

    :param quick: small inputs (seconds, not a minute).
    :param repeat: timed runs per backend after the warm-up; the best is reported. Defaults to
        3 with ``quick`` and 5 without.
    :param backends: only these (plus the floor, the reference); ``None`` for all.
    :param progress: a stream for the ``\\r`` progress line, or ``None`` for none.
    :returns: the JSON-able report documented in ``docs/cli.md``.
    """
    from .. import plugins, warm_up
    from ..ops import accelerated_backends

    repeats = repeat if repeat is not None else (3 if quick else 5)
    names = candidates(backends)
    # A backend that compiles in the background would decline the warm-up call below and be
    # reported as skipped; it is asked to get ready first (numba: ~1 s from its cache).
    warm_up(*names)
    work = cases(quick)
    implemented = _implemented(names)
    rows = [row for row in plugins() if row.name in names]
    devices = _Devices({row.name: row.accelerated for row in rows}, {row.name: row.status == "ok" for row in rows})
    bar = Progress(progress, total=len(work) * len(names) * (1 + repeats))
    report: Report = {
        "schema_version": SCHEMA_VERSION,
        "quick": quick,
        "repeat": repeats,
        "order": list(accelerated_backends(gpu=True)),
        "operations": [],
    }
    try:
        for case in work:
            report["operations"].append(
                _one_case(case, names, repeats, QUICK_BUDGET_S if quick else SLOW_BUDGET_S, bar,
                          implemented, devices))
    finally:
        bar.close()
    broken = [f"{row['backend']} in {op['operation']}" for op in report["operations"]
              for row in op["results"] if row["agrees"] is False or row["status"] in ("faulty", "error")]
    report["ok"] = not broken
    report["problems"] = broken
    return report


WIDTH = 100
"""Columns the table fits in: a terminal of 100 columns shows every row unwrapped."""


def render(report: Report) -> str:
    """The report as aligned tables for people, one per operation, within :data:`WIDTH` columns.

    The input is the operation's heading rather than a column (it is the same for every backend),
    and a long detail (a skipped backend's reason) wraps under its own column.

    :param report: what :func:`run` returned.
    :returns: the text, ending in a newline.
    """
    import textwrap

    out = [
        f"spacr-accel bench{' --quick' if report['quick'] else ''}: best of {report['repeat']} "
        "after a warm-up; speed-up = NumPy's time / the backend's",
        f"automatic dispatch order here: {', '.join(report['order'])}",
    ]
    headers = ["backend", "status", "device", "agrees", "best ms", "speed-up"]
    for op in report["operations"]:
        rows = []
        for row in op["results"]:
            agrees = "-" if row["agrees"] is None else ("yes" if row["agrees"] else "NO")
            best = "-" if row["best_s"] is None else f"{row['best_s'] * 1e3:.2f}"
            speedup = "-" if row["speedup"] is None else f"{row['speedup']:.2f}x"
            note = row["reason"] if row["status"] != "ok" else row["detail"]
            device = row.get("device") or "-"
            rows.append(([row["backend"], row["status"], device, agrees, best, speedup], note))
        widths = [max(len(cells[i]) for cells in [headers, *(r[0] for r in rows)]) for i in range(len(headers))]
        indent = "  "
        prefix = len(indent) + sum(widths) + 2 * len(widths)
        room = max(WIDTH - prefix, 24)
        out += ["", textwrap.shorten(f"{op['operation']}: {op['input']}", WIDTH, placeholder="...")]
        for cells, note in [(headers, "detail"), *rows]:
            lines = textwrap.wrap(note, room, break_on_hyphens=False) or [""]
            out.append((indent + "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))
                        + "  " + lines[0]).rstrip())
            out += [" " * prefix + line for line in lines[1:]]
    if report["problems"]:
        out += ["", *textwrap.wrap(f"PROBLEMS: {'; '.join(report['problems'])} (wrong answers, or broke "
                                   "the contract)", WIDTH, subsequent_indent="  ")]
    return "\n".join(out) + "\n"


def progress_stream(enabled: bool) -> TextIO | None:
    """stderr when a person is watching it, else ``None``.

    :param enabled: ``False`` with ``--json`` (a script is reading, and may be capturing stderr).
    """
    stream = sys.stderr
    return stream if enabled and stream is not None and stream.isatty() else None
