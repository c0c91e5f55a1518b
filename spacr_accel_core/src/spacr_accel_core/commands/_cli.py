"""The ``spacr-accel`` command: ``doctor`` (what is here and why), ``bench`` (how fast, and right)
and ``run`` (a program with spaCR patched onto the registry: :mod:`spacr_accel_core.patch`).

WHY SO LITTLE AT IMPORT TIME. The console script starts a fresh interpreter for every call, and
the doctor has a budget of 1.5 s (it imports torch only where a GPU device node says there may be
a card to ask, and reads every version from metadata); so this module imports only
:mod:`argparse`, and each subcommand imports what it needs when it runs.

Exit codes: ``0`` success (the doctor ALWAYS exits 0: it reports problems, it is not one, and
that includes an output it cannot write, such as ``> /dev/full``); ``1`` the bench found a backend
that disagrees with NumPy or broke the contract, or could not write its table; ``2`` a usage error
(argparse's own convention, told by the subcommand whose option was wrong). ``run`` exits with the
program's own code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

PROG = "spacr-accel"

DOCS_URL = "https://github.com/EinarOlafsson/spacr-accel/blob/main/docs/cli.md"
"""Where the command line and its ``--json`` keys are documented (a wheel carries no docs/ folder)."""


def _at_least_one(text: str) -> int:
    """argparse type for ``--repeat``: a positive integer, with a message that says so.

    :param text: the argument as typed.
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _version() -> str:
    """The core's installed version, for ``--version`` (read lazily: it touches metadata)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("spacr-accel-core")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


class _VersionAction(argparse.Action):
    """``--version`` that reads the metadata only when asked, not on every start."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(f"{PROG} (spacr-accel-core) {_version()}")
        parser.exit()


class _Formatter(argparse.HelpFormatter):
    """argparse's layout, except that a URL is never broken at its hyphens or its length."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False, break_long_words=False)


_VERBOSE_HELP = "log to stderr: -v INFO, -vv DEBUG (which backend ran, and why others declined)"


def _warm_parser(commands: Any) -> argparse.ArgumentParser:
    """The ``warm`` subcommand's arguments."""
    warm: argparse.ArgumentParser = commands.add_parser(
        "warm",
        allow_abbrev=False,
        formatter_class=_Formatter,
        help="compile every installed backend's kernels now, so that no later process waits for them",
        description="Compile (or load from the cache) every kernel of every installed backend that "
                    "builds them lazily, with a progress bar on stderr, and say what was already "
                    "cached. Idempotent. Exits 1 when a backend is not ready within the timeout.",
        epilog=f"The --json keys are documented at {DOCS_URL}",
    )
    warm.add_argument("--json", action="store_true", help="machine-readable output, no progress bar")
    warm.add_argument("--timeout", type=float, metavar="SECONDS", default=1800.0,
                      help="seconds each backend may take (default 1800)")
    return warm


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, separate from :func:`main` so the docs and tests can inspect it.

    Abbreviated options are refused (``allow_abbrev=False``): a script that wrote ``--js`` would
    break the day another option starting with those letters is added.

    :returns: a parser whose ``command`` attribute names the subcommand and whose
        ``command_parser`` is that subcommand's own parser (for its usage errors)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="spaCR's accelerator layer: what this machine can run, and how fast.",
        epilog=f"Documentation, with the --json keys: {DOCS_URL}",
        allow_abbrev=False,
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action=_VersionAction, help="print the core's version and exit")
    parser.add_argument("-v", "--verbose", action="count", default=0, help=_VERBOSE_HELP)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    doctor = commands.add_parser(
        "doctor",
        allow_abbrev=False,
        formatter_class=_Formatter,
        help="what was found, what is usable and why not, every plugin and override",
        description="Report the device, its capabilities, every plugin and the overrides in force. "
                    "It runs none of the operations, but it does resolve the device as spaCR "
                    "would: it imports torch and, on a GPU, measures float64 and bfloat16 support "
                    "with a two-element tensor (which creates the driver's context). "
                    "It always exits 0.",
        epilog=f"The --json keys are documented at {DOCS_URL}",
    )
    doctor.add_argument("--json", action="store_true", help="machine-readable output (schema version 1)")

    bench = commands.add_parser(
        "bench",
        allow_abbrev=False,
        formatter_class=_Formatter,
        help="time each operation on each backend, checked against NumPy",
        description="Run every operation on every backend that runs here, check each answer "
                    "against NumPy, and print times and speed-ups. "
                    "Exits 1 when a backend gives a different answer.",
        epilog=f"The --json keys are documented at {DOCS_URL}",
    )
    bench.add_argument("--json", action="store_true", help="machine-readable output, no progress line")
    bench.add_argument("--quick", action="store_true", help="small inputs: a check in seconds")
    bench.add_argument("--backend", action="append", metavar="NAME", dest="backends",
                       help="benchmark only this backend (repeatable); NumPy always runs as the reference")
    bench.add_argument("--repeat", type=_at_least_one, metavar="N", default=None,
                       help="timed runs per backend after a warm-up, best kept (default 5, 3 with --quick)")
    warm = _warm_parser(commands)
    # ``run`` is parsed by the patch's runner (main() hands it over first): listed here for --help
    commands.add_parser("run", add_help=False,
                        help="run a Python program with spaCR patched onto the registry (spacr-accel run --help)")
    for command in (doctor, bench, warm):
        # Accepted after the subcommand too (``spacr-accel doctor -v``), counted on its own
        # destination: a subparser's default would otherwise overwrite the count given before it.
        command.add_argument("-v", "--verbose", action="count", default=0, dest="command_verbose",
                             help=_VERBOSE_HELP)
        command.set_defaults(command_parser=command)
    return parser


def _configure_logging(verbosity: int) -> None:
    """Send the library's log to stderr when asked; otherwise leave logging as it was.

    Only on request, because :func:`main` may be called in-process by a program that has its own
    logging set up.

    :param verbosity: the count of ``-v``.
    """
    if verbosity <= 0:
        return
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    log = logging.getLogger("spacr_accel_core")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)


def _write(text: str) -> None:
    """Write to stdout without letting the terminal's encoding turn a report into a traceback.

    A plugin's reason may hold any character, and a Windows console or ``LANG=C`` may not have
    it; the doctor must still print, so unencodable characters become ``?``.

    :param text: what to print, newline included.
    """
    try:
        sys.stdout.write(text)
    except UnicodeEncodeError:
        encoding = getattr(sys.stdout, "encoding", None) or "ascii"
        sys.stdout.write(text.encode(encoding, "replace").decode(encoding))
    sys.stdout.flush()


def _emit_json(report: object) -> None:
    """Print a report as indented JSON on stdout (ASCII-escaped, so any encoding takes it).

    :param report: a JSON-able dict; anything else inside it is written as its ``str``.
    """
    import json

    _write(json.dumps(report, indent=2, default=str) + "\n")


def _silence_stdout() -> None:
    """After a closed pipe (``spacr-accel doctor | head``), point stdout at devnull.

    Otherwise the interpreter's final flush raises again and prints a traceback for what is
    the reader's normal way of saying "enough".
    """
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout replaced by something without a file
        pass


def _complain(text: str) -> None:
    """One line on stderr, if stderr can take it (it may be as full as stdout).

    :param text: the line, without its newline.
    """
    import contextlib

    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    :param argv: the arguments after the program name; ``None`` reads :data:`sys.argv`.
    :returns: the exit code (see the module docstring). Usage errors exit 2 through argparse; the
        bare command prints the help and exits 0 (a newcomer's first try is not a mistake).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "run":  # the program's own arguments are its own: no parser reads them
        from ..patch._run import main as run

        return run(argv[1:], prog=f"{PROG} run")
    if not argv:
        try:
            build_parser().print_help()
        except BrokenPipeError:  # ``spacr-accel | head``
            _silence_stdout()
        return 0
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:  # told by the subcommand's parser, so the usage shown is the one that applies
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    _configure_logging(args.verbose + args.command_verbose)
    try:
        if args.command == "warm":
            code = _warm_command(args)
        else:
            code = _doctor_command(args) if args.command == "doctor" else _bench_command(args)
    except BrokenPipeError:  # ``| head``: the reader's normal way of saying "enough"
        _silence_stdout()
        code = 0
    except OSError as exc:  # ``> /dev/full``, a vanished terminal: say so in one line, no traceback
        _silence_stdout()
        _complain(f"{PROG}: could not write the report: {exc.strerror or exc}")
        code = 0 if args.command == "doctor" else 1
    return code


def _doctor_command(args: argparse.Namespace) -> int:
    """``spacr-accel doctor``: gather, print, exit 0 whatever it found.

    :param args: the parsed arguments (``json``).
    """
    from . import _doctor

    report = _doctor.collect()
    if args.json:
        _emit_json(report)
        return 0
    try:
        text = _doctor.render(report)
    except Exception as exc:  # the doctor never fails: show the raw report rather than nothing
        _write(f"(the text report failed: {type(exc).__name__}: {exc}; the raw report follows)\n")
        _emit_json(report)
    else:
        _write(text)
    return 0


def _warm_command(args: argparse.Namespace) -> int:
    """``spacr-accel warm``: build, print, exit 1 when a backend is not ready, 130 on Ctrl-C.

    :param args: the parsed arguments (``json``, ``timeout``).
    """
    from . import _warm

    stream = None if args.json else sys.stderr
    try:
        result = _warm.run(timeout=args.timeout, stream=stream, tty=bool(stream is not None and stream.isatty()))
    except KeyboardInterrupt:  # Ctrl-C: one line, the shell's code for it, no traceback
        _complain(_warm.INTERRUPTED)
        return 130
    if args.json:
        _emit_json(result)
    else:
        _write(_warm.render(result))
    return 0 if result["ok"] else 1


def _bench_command(args: argparse.Namespace) -> int:
    """``spacr-accel bench``: run, print, exit 1 when a backend gave a wrong answer.

    :param args: the parsed arguments (``json``, ``quick``, ``repeat``, ``backends``).
    """
    from ..dispatch._registry import REGISTRY
    from . import _bench

    installed = REGISTRY.installed()
    unknown = [name for name in args.backends or () if name not in installed]
    if unknown:  # a typo must not run nothing and exit 0
        args.command_parser.error(f"--backend names backends that are not installed: {', '.join(unknown)}; "
                                  f"installed: {', '.join(installed) or 'none'}")
    if args.backends:  # nor may a device prober's name, which serves no operation to time
        rows = {row.name: row for row in REGISTRY.plugins()}
        probers = [name for name in args.backends if rows[name].status == "ok" and not rows[name].operations]
        if probers:
            serving = [row.name for row in rows.values() if row.operations]
            args.command_parser.error(f"--backend names plugins that serve no operation (device probers): "
                                      f"{', '.join(probers)}; backends: {', '.join(serving) or 'none'}")
    result = _bench.run(
        quick=args.quick,
        repeat=args.repeat,
        backends=args.backends,
        progress=_bench.progress_stream(not args.json),
    )
    if args.json:
        _emit_json(result)
    else:
        _write(_bench.render(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":  # pragma: no cover - the console script and __main__ call main()
    raise SystemExit(main())
