"""``spacr-accel doctor``: what this machine is, and what every plugin says about itself.

WHY IT NEVER RAISES. The doctor is what a user runs when something is already wrong: a
half-installed driver, a third-party plugin that throws, a placeholder module. A traceback there
would hide the very thing it was run to find, so every section is gathered on its own, and a
section that breaks carries the error text in its ``error`` key while the others still report.

WHAT IT TOUCHES. It runs no operation, but it is not metadata only: the device section calls
:func:`~spacr_accel_core.accelerator.resolve`, the same selecting probe spaCR itself runs, which
imports the vendor library, selects the device, runs one tiny kernel on it and measures float64
and bfloat16 support (creating the driver context). That is deliberate: the doctor reports what
spaCR will REALLY compute on, and a metadata-only inspection can say "usable" where the kernel
says no. Everything later reuses that one answer (``capabilities(found)``), so the cost is one
``import torch`` and one probe, and none at all on a Linux machine with no GPU device node.
Versions are read from the installed distributions' metadata, never by importing the library.

WHAT A PERSON READS FIRST. A lab user pastes this into a bug report, so it opens with a plain
summary (what the machine has, what each task runs on, the one thing to fix), then the versions,
the host's devices and their memory; every line but the plugin table fits 100 columns.

WHY IT NEVER HANGS. Discovering the plugins imports every one of them and asks each to describe
itself; a plugin whose import or ``spacr_accel_backend_info`` hangs would hang every section that
asks the registry. So the registry sections run under the accelerator's probe bound
(``SPACR_ACCEL_PROBE_TIMEOUT``) and report a time-out in their ``error`` instead; once discovery
has been abandoned, later queries answer at once rather than each waiting the bound again.

The JSON keys are part of the command-line contract (documented in ``docs/cli.md``); a change
that renames or removes one bumps :data:`SCHEMA_VERSION`.
"""

from __future__ import annotations

import platform
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from ..contract._errors import describe
from ..contract._install import install_command
from ..dispatch import _settings
from . import _warm
from ._doctor_summary import VERSION_KEYS, _host_devices, _memory, _runs_on, _summary, _versions

SCHEMA_VERSION = 1
"""Bumped when a key of the ``--json`` report is renamed or removed (adding one does not)."""

def overrides() -> tuple[str, ...]:
    """The environment variables that change what spacr-accel does, reported whether set or not:
    the core's (:func:`spacr_accel_core.config.variables`), every variable a loaded plugin declares,
    and each per-operation order that is set (the core names no vendor's variable)."""
    from ..config import core_variables
    from ..dispatch._registry import REGISTRY

    settings = list(core_variables())
    if REGISTRY._snapshot is not None:  # plugins already discovered (never wait here: discovery may hang)
        settings += [setting for _, setting in REGISTRY.declared_settings()]
    names = [setting.environment for setting in settings if "<" not in setting.environment]
    names += _settings.operation_variables()
    return tuple(dict.fromkeys(names))

ACCELERATOR_FIELDS = (
    "kind", "device", "label", "name", "detected", "usable", "note",
    "float64", "bfloat16", "autocast", "fallback",
)
"""The :class:`~spacr_accel_core.accelerator.Accelerator` fields the device section reports."""

Report = dict[str, Any]

WIDTH = 100
"""The text report's widest line (the plugin table excepted: its reasons are its point)."""

"""CuPy's wheels: the distribution's name is the only place its CUDA or ROCm build is written."""


def _section(defaults: Report, gather: Callable[[], Report]) -> Report:
    """Run one section's gatherer, keeping the section's keys whatever happens.

    Stable keys matter more than completeness here: a script reading ``report["device"]["kind"]``
    must get ``None`` from a broken accelerator, not a ``KeyError``.

    :param defaults: every key of the section with the value it has when gathering fails.
    :param gather: returns the section's values; may raise anything.
    :returns: the defaults updated with what was gathered, and ``error`` (``None`` on success).
    """
    section: Report = {"error": None, **defaults}
    try:
        section.update(gather())
    except (Exception, SystemExit) as exc:  # a plugin calling sys.exit must not end the doctor
        section["error"] = describe(exc)
    return section


def _bounded_section(defaults: Report, gather: Callable[[], Report]) -> Report:
    """:func:`_section` for a gatherer that asks the registry, under the accelerator's probe bound.

    :param defaults: as for :func:`_section`.
    :param gather: returns the section's values; may raise anything, or never return.
    :returns: as for :func:`_section`; a time-out is a ``TimeoutError`` naming the bound.
    """
    from ..dispatch._bounded import discovering, discovery_note
    from ..dispatch._settings import probe_timeout

    def bounded() -> Report:
        outcome = discovering(gather, probe_timeout(), "doctor")
        if outcome.timed_out:
            raise TimeoutError(discovery_note(outcome))
        if outcome.error is not None:
            raise outcome.error
        values: Report = outcome.value
        return values

    return _section(defaults, bounded)


def _about() -> Report:
    """Versions of what answered: the core, its plugin API, the interpreter and the platform."""
    import importlib.metadata

    from ..contract._markers import API_VERSION

    try:
        version = importlib.metadata.version("spacr-accel-core")
    except importlib.metadata.PackageNotFoundError:
        version = "(not installed)"
    return {
        "core_version": version,
        "api_version": API_VERSION,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "executable": sys.executable,
    }


def _overrides() -> Report:
    """Every override variable, ``None`` when unset, the backend order in force and the
    configuration in force (``only``, the per-operation orders)."""
    values: Report = dict(_settings.values(overrides()))

    def restriction() -> Report:
        from ..dispatch._registry import REGISTRY

        order = REGISTRY.restriction()
        installed = set(REGISTRY.installed())
        from ..config import ENV_BACKENDS, ENV_DISABLE, current, split_names

        settings = current()
        named = {env: split_names(_settings.read(env)) for env in (ENV_BACKENDS, ENV_DISABLE)}
        return {"restriction": list(order) if order is not None else None, "only": settings.only,
                "operations": {op: list(names) for op, names in settings.operations},
                "not_installed": {env: [n for n in names if n not in installed] for env, names in named.items()}}

    values.update(_bounded_section({"restriction": None, "only": False, "operations": {}, "not_installed": {}},
                                   restriction))
    return values


def _plugins() -> Report:
    """Every plugin the registry saw, best first, as plain JSON-able rows."""
    from .. import plugins

    rows = []
    for row in plugins():
        rows.append({
            "name": row.name,
            "priority": row.priority,
            "accelerated": row.accelerated,
            "distribution": row.distribution,
            "version": row.version,
            "status": row.status,
            "reason": row.reason,
            "operations": list(row.operations),
            "faults": [{"operation": op, "what": what} for op, what in row.faults],
        })
    return {"rows": rows}


def _backends() -> Report:
    """What automatic dispatch would walk, with and without accelerated backends."""
    from ..dispatch._registry import REGISTRY
    from ..ops import accelerated_backends

    return {"gpu": list(accelerated_backends(gpu=True)), "cpu": list(accelerated_backends(gpu=False)),
            "floor": REGISTRY.floor()}


def _device() -> tuple[Report, Any]:
    """The resolved accelerator's fields, and the accelerator itself for the later sections.

    Fields are read one by one so a partial implementation still reports what it has.
    """
    from .. import accelerator

    found = accelerator.resolve()
    values: Report = {name: getattr(found, name, None) for name in ACCELERATOR_FIELDS}
    for name in ("is_gpu", "is_cuda"):
        try:
            values[name] = bool(getattr(found, name))
        except Exception:  # a property that raises is reported as unknown, not as a crash
            values[name] = None
    try:
        values["summary"] = accelerator.describe()
    except Exception as exc:  # the fields above are still worth reporting
        values["summary"] = f"(describe() failed: {describe(exc)})"
    return values, found


def collect() -> Report:
    """Gather the whole report. Never raises.

    Order matters for speed only: the registry is discovered first, so the accelerator's probers
    come from the already-built snapshot and nothing heavy is imported twice.

    :returns: a JSON-able dict with the keys documented in ``docs/cli.md``.
    """
    report: Report = {"schema_version": SCHEMA_VERSION}
    report["about"] = _section(
        {"core_version": None, "api_version": None, "python": None, "platform": None, "executable": None},
        _about,
    )
    report["plugins"] = _bounded_section({"rows": []}, _plugins)
    report["overrides"] = _overrides()  # after discovery: the plugins' declared variables are known
    rows: Sequence[Report] = report["plugins"]["rows"]
    report["faulty"] = [
        {"name": r["name"], "status": r["status"], "reason": r["reason"], "faults": r["faults"]}
        for r in rows if r["status"] == "faulty" or r["faults"]
    ]
    report["blocked"] = [{"name": r["name"], "reason": r["reason"]} for r in rows if r["status"] == "blocked"]
    report["backends"] = _bounded_section({"gpu": [], "cpu": []}, _backends)
    report["warm"] = _bounded_section({"rows": []}, _warm.doctor_section)  # kernels compiled, or compiling

    found: list[Any] = []

    def device() -> Report:
        values, accelerator = _device()
        found.append(accelerator)
        return values

    device_defaults: Report = dict.fromkeys((*ACCELERATOR_FIELDS, "is_gpu", "is_cuda", "summary"))
    report["device"] = _section(device_defaults, device)
    report["device"]["forced"] = _settings.values([_settings.ENV_DEVICE])[_settings.ENV_DEVICE]

    def engines() -> Report:
        from .. import accelerator

        return {"found": [str(name) for name in accelerator.neural_engines()]}

    report["neural_engines"] = _section({"found": []}, engines)

    def capabilities() -> Report:
        from .. import accelerator

        if not found:
            raise RuntimeError("no accelerator was resolved (see the device section)")
        return {"rows": [{"task": str(task), "accelerated": bool(accelerated), "detail": str(detail)}
                         for task, accelerated, detail in accelerator.capabilities(found[0])]}

    report["capabilities"] = _section({"rows": []}, capabilities)
    report["host_devices"] = _section({"rows": []}, _host_devices)
    report["memory"] = _section({"rows": []}, _memory)
    report["versions"] = _section(dict.fromkeys(VERSION_KEYS), lambda: _versions(report))
    report["summary"] = _section({"machine": None, "device": None, "tasks": [], "fix": None},
                                 lambda: _summary(report))
    return report




def _cell(value: Any) -> str:
    """A value as people read it in a table: yes/no, ``-`` for unknown or empty.

    :param value: a JSON-able value from the report.
    """
    if value is None or value in ("", []):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Left-aligned columns, the last one unpadded so a long reason does not pad every line.

    :param headers: column titles; an empty sequence prints no header line.
    :param rows: the cells, already text.
    :param indent: prefix of every line.
    :returns: the lines, without newlines.
    """
    everything = [list(headers), *map(list, rows)] if headers else [list(r) for r in rows]
    if not everything:
        return []
    columns = max(len(r) for r in everything)
    widths = [max((len(r[i]) for r in everything if i < len(r)), default=0) for i in range(columns)]
    lines = []
    for row in everything:
        cells = [cell.ljust(widths[i]) if i < len(row) - 1 else cell for i, cell in enumerate(row)]
        lines.append((indent + "  ".join(cells)).rstrip())
    return lines


def _error_lines(section: Report) -> list[str]:
    """The line that says a section could not be gathered, or nothing.

    :param section: one section of the report.
    """
    return [f"  ERROR: {section['error']}"] if section.get("error") else []


_DEVICE_ROWS = (("kind", "kind"), ("device", "device"), ("name", "name"), ("label", "label"),
                ("detected", "detected (present)"), ("usable", "usable (dispatched to)"),
                ("is_gpu", "is_gpu"), ("is_cuda", "is_cuda"), ("note", "note"),
                ("float64", "float64"), ("bfloat16", "bfloat16"), ("autocast", "autocast"),
                ("fallback", "CPU fallback for missing ops"))
"""The device section's rows: the report's key, and the words a person reads for it."""


_COMMAND = re.compile(r"`[^`]*(?:pip install|install-from-clone)[^`]*`|pip install [^;()`]*?(?=;|\)|\s\(|$)")
"""A command a note tells the user to run (in backticks, or a bare ``pip install ...``): kept whole,
on a line of its own, so it can be pasted."""

_CODE_SPAN = re.compile(r"`[^`]*`")
_KEEP = "\x00"
"""Stands for a space inside a code span while the text is wrapped: textwrap breaks only at
whitespace, so a span is never split across lines (a command broken there cannot be pasted)."""


def _wrap(text: str, indent: str = "  ", follow: str = "    ") -> list[str]:
    """One logical line as lines of at most :data:`WIDTH` columns.

    Long words are not broken (a URL stays whole) and a code span in backticks is never split. An
    install command in a text too long for one line gets a line of its own, so it can be pasted as
    it is, with the punctuation that touches it (``(`` before, ``),`` after): the parenthesis opens
    and closes with its words, as in the sentence. A text that fits on one line stays one line.
    """
    command = _COMMAND.search(text)
    if command is not None and len(indent) + len(text) > WIDTH:
        before, after = text[:command.start()], text[command.end():]
        # what touches the command with no space between (``(`` before it, ``),`` after it) stays
        # on its line: no line then ends with a lone ``(`` or starts with a ``)``
        glued_before = before.split()[-1] if before.strip() and not before[-1].isspace() else ""
        glued_after = after.split()[0] if after.strip() and not after[0].isspace() else ""
        alone = glued_before + command.group(0) + glued_after
        if 4 + len(alone) <= WIDTH:
            before = before[:len(before) - len(glued_before)].rstrip()
            after = after[len(glued_after):].lstrip()
            lines = _wrap(before, indent, follow) if before else []
            lead = follow if lines else indent
            if len(lead) + len(alone) > WIDTH:  # a deep table column: the command comes first
                lead = "    "
            lines.append(lead + alone)
            return lines + (_wrap(after, follow, follow) if after else [])
    kept = _CODE_SPAN.sub(lambda span: span.group(0).replace(" ", _KEEP), text)
    lines = textwrap.wrap(kept, WIDTH, initial_indent=indent, subsequent_indent=follow,
                          break_long_words=False, break_on_hyphens=False) or [indent.rstrip()]
    return [line.replace(_KEEP, " ") for line in lines]


def _render_summary(report: Report) -> list[str]:
    """The plain summary a person reads first."""
    summary = report["summary"]
    out = ["", "Summary", *_error_lines(summary)]
    if summary.get("machine") is None:
        return out
    out += _wrap(f"This machine: {summary['machine']}")
    out += _wrap(f"spaCR computes on: {summary['device']}")
    tasks = summary["tasks"]
    width = max((len(t["task"]) for t in tasks), default=0)
    for task in tasks:
        out += _wrap(f"{task['task'].ljust(width)}  {task['runs_on']}", follow=" " * (width + 4))
    out += _wrap(f"To fix: {summary['fix']}" if summary.get("fix") else "To fix: nothing")
    return out


def _gib(value: Any) -> str:
    return f"{value / 2**30:.1f} GiB"


def _amount(row: Report) -> str:
    """``3.2 GiB free of 40.0 GiB``, or what is known of it."""
    free, total = row["free"], row["total"]
    if free is not None and total is not None:
        return f"{_gib(free)} free of {_gib(total)}"
    if total is not None:
        return f"{_gib(total)} in all, free unknown"
    return "unknown: spaCR does not use this device" if not str(row["device"]).startswith(
        ("cuda", "mps", "xpu", "privateuseone")) else "unknown"


def _render_versions(report: Report) -> list[str]:
    """Python, numpy, torch and its build, CuPy, numba and the driver."""
    versions = report["versions"]
    out = ["", "Versions", *_error_lines(versions)]
    torch = versions.get("torch")
    build = versions.get("torch_build")
    rows = [["Python", _cell(versions.get("python"))], ["numpy", _cell(versions.get("numpy"))],
            ["torch", f"{torch} ({build})" if torch and build else _cell(torch)],
            ["CuPy", _cell(versions.get("cupy"))], ["numba", _cell(versions.get("numba"))],
            ["GPU driver", _cell(versions.get("driver"))]]
    return out + table([], rows)


def _render_hosts(report: Report) -> list[str]:
    """The silicon the operating system lists."""
    hosts = report["host_devices"]
    out = ["", "Host devices (listed by the operating system)", *_error_lines(hosts)]
    for row in hosts["rows"]:
        where = ", ".join(part for part in (row["kind"].upper(), row["pci_id"], row["address"],
                                            f"driver {row['driver']} {row['driver_version']}".strip()
                                            if row["driver"] or row["driver_version"] else "",
                                            row["source"]) if part)
        out += _wrap(f"{row['name']} ({where})")
    if not hosts["rows"] and not hosts["error"]:
        out.append("  (none listed)")
    return out


def _render_memory(report: Report) -> list[str]:
    """Free and total memory per device."""
    memory = report["memory"]
    out = ["", "Memory", *_error_lines(memory)]
    rows = [[str(r["device"]), str(r["name"]), _amount(r)] for r in memory["rows"]]
    out += table([], rows) if rows else ([] if memory["error"] else ["  (no device memory to report)"])
    return out


def _render_header(report: Report) -> list[str]:
    """The first line: which core, plugin API, Python and platform answered."""
    about = report["about"]
    return [
        f"spacr-accel doctor (spacr-accel-core {_cell(about['core_version'])}, plugin API "
        f"{_cell(about['api_version'])}, Python {_cell(about['python'])}, {_cell(about['platform'])})",
        *_error_lines(about),
    ]


def _render_device(report: Report) -> list[str]:
    """What this machine computes on, field by field, and whether ``SPACR_DEVICE`` forced it."""
    device = report["device"]
    out = ["", "Device", *_error_lines(device)]
    if device.get("summary"):
        out += _wrap(str(device["summary"]))
    if not device.get("error") or any(device.get(key) is not None for key, _ in _DEVICE_ROWS):
        for line in table([], [[label, _cell(device.get(key))] for key, label in _DEVICE_ROWS]):
            out += _wrap(line.strip(), follow=" " * 32) if len(line) > WIDTH else [line]
    forced = device.get("forced")
    out.append(f"  SPACR_DEVICE is {forced!r}: the device is forced" if forced
               else "  SPACR_DEVICE is not set: the device is chosen by probing")
    return out


def _render_engines(report: Report) -> list[str]:
    """Inference silicon found here and never used."""
    engines = report["neural_engines"]
    out = ["", "Neural engines found, not used", *_error_lines(engines)]
    out += [f"  {name}" for name in engines["found"]] or ([] if engines["error"] else ["  (none found)"])
    return out


def _render_capabilities(report: Report) -> list[str]:
    """Which of spaCR's tasks run accelerated here, and why."""
    caps = report["capabilities"]
    out = ["", "Capabilities", *_error_lines(caps)]
    if caps["rows"]:
        # One short line each: who serves the task. The reasons a backend was passed over are
        # the plugin table's, said once there rather than on every row.
        lines = table(["task", "accelerated", "served by"],
                      [[r["task"], _cell(r["accelerated"]), _runs_on(r)] for r in caps["rows"]])
        out += [line if len(line) <= WIDTH else line[:WIDTH - 3] + "..." for line in lines]
    elif not caps["error"]:
        out.append("  (no tasks reported)")
    return out


def _render_plugins(report: Report) -> list[str]:
    """Every plugin the registry saw, best first."""
    plugins = report["plugins"]
    out = ["", "Plugins (best first)", *_error_lines(plugins)]
    out += table(
        ["name", "priority", "accel", "status", "distribution", "version", "operations", "reason"],
        [[_cell(r[key]) for key in ("name", "priority", "accelerated", "status", "distribution",
                                     "version", "operations", "reason")] for r in plugins["rows"]],
    )
    if not plugins["rows"] and not plugins["error"]:
        out.append(f"  (no plugins installed: `{install_command()}` brings the NumPy backend)")
    return out


def _render_faulty(report: Report) -> list[str]:
    """The plugins that broke the contract, each fault on its own line."""
    out = ["", "Faulty plugins"]
    for row in report["faulty"]:
        out.append(f"  {row['name']}: {row['reason'] or 'faults at run time'}")
        out += [f"    {fault['operation']}: {fault['what']}" for fault in row["faults"]]
    if not report["faulty"]:
        out.append("  (none)")
    return out


def _render_blocked(report: Report) -> list[str]:
    """The plugins ``SPACR_ACCEL_DISABLE`` kept from being imported."""
    out = ["", "Blocked plugins (never imported)"]
    out += [f"  {row['name']}: {row['reason']}" for row in report["blocked"]] or ["  (none)"]
    return out


def _render_dispatch(report: Report) -> list[str]:
    """What automatic dispatch walks, with and without accelerated backends."""
    backends = report["backends"]
    out = ["", "Dispatch order", *_error_lines(backends)]
    out += table([], [["gpu=True", _cell(backends["gpu"])], ["gpu=False", _cell(backends["cpu"])]])
    if report["blocked"] and backends.get("floor", "") is None:
        out.append("  no floor is loaded and SPACR_ACCEL_DISABLE blocks a plugin: a call no other backend "
                   "serves fails")
    return out


def _render_overrides(report: Report) -> list[str]:
    """Every override variable, set or not, and what the backend variables mean here."""
    overrides = report["overrides"]
    out = ["", "Overrides in force", *_error_lines(overrides)]
    names = [name for name in overrides if name == name.upper() and not isinstance(overrides[name], (dict, list))]
    out += table([], [[name, "(not set)" if overrides[name] is None else repr(overrides[name])] for name in names])
    if overrides.get("restriction") is not None:
        out.append(f"  backend order in force: {_cell(overrides['restriction'])}"
                   f"{' (only: no fall-through)' if overrides.get('only') else ''}")
    for operation, names in (overrides.get("operations") or {}).items():
        out.append(f"  {operation}: {_cell(names)}")
    for env, names in (overrides.get("not_installed") or {}).items():
        if names:
            out.append(f"  {env} names what is not installed (ignored): {_cell(names)}")
    return out


_SECTIONS: tuple[Callable[[Report], list[str]], ...] = (
    _render_header, _render_summary, _render_versions, _render_hosts, _render_device, _render_memory,
    _render_engines, _render_capabilities, _render_plugins, _warm.render_doctor, _render_faulty, _render_blocked,
    _render_dispatch, _render_overrides,
)
"""The text report's sections, in the order a person reads them."""


def render(report: Report) -> str:
    """The report as aligned plain text for people.

    :param report: what :func:`collect` returned.
    :returns: the text, ending in a newline.
    """
    lines: list[str] = []
    for section in _SECTIONS:
        for line in section(report):
            if len(line) <= WIDTH or section is _render_plugins:
                lines.append(line)
            else:  # a long reason or value: continued, indented, on the next lines
                indent = line[:len(line) - len(line.lstrip())]
                lines += _wrap(line.strip(), indent=indent, follow=indent + "    ")
    return "\n".join(lines) + "\n"
