"""Running an unchanged program with spaCR patched: ``spacr-accel run`` and
``python -m spacr_accel_core.patch``.

The program runs in this interpreter as ``__main__`` (its own ``sys.argv``, its directory first on
``sys.path``, as ``python script.py`` would), after the patch is installed; the variable is set for
it too, so every process it spawns (spaCR's decode workers) is patched at its start.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence

from ._startup import VARIABLE, modes_from

__all__ = ["USAGE", "main"]

_DASK = "--dask"
"""The option whose value is the cluster (the variable's ``dask=`` word)."""

_FLAGS = {"--check": "check", "--strict": "strict", "--report": "report", "--keep-memory": "keep-memory",
          "--free-memory": "free-memory"}
"""Each option and the variable's word for it (which is also how spawned processes get it)."""

USAGE = ("usage: {prog} [--check] [--strict] [--report] [--keep-memory | --free-memory] [--dask ADDRESS] "
         "(script.py | -m module) [args ...]\n\n"
         "Run a Python program with spaCR patched onto spacr-accel's registry.\n"
         "  --check        run spaCR's own function beside every served call; raise on a difference\n"
         "  --strict       raise where a call would go to spaCR's own function\n"
         "  --report       print what each seam served and passed on when the program exits\n"
         "  --keep-memory  keep freed memory in every process (glibc), so later work reuses its\n"
         "                 arrays; each process then holds its peak memory (by default only the\n"
         "                 workers of spaCR's decode pool do)\n"
         "  --free-memory  keep it in no process, spaCR's decode workers included\n"
         "  --dask ADDRESS decode each well's fields on a Dask cluster: a scheduler address\n"
         "                 (tcp://host:8786) or local:N (a LocalCluster of N process workers)\n")


def _cluster_problem(given: str) -> str:
    """Why ``--dask``'s value is refused ("" when it is a cluster address), read without importing
    the patch: a typo is a usage error before the program starts."""
    if not given.strip() or "," in given:
        return f"a scheduler address (tcp://host:8786) or local:N; got {given!r}"
    from ._cluster import parse_address

    try:
        parse_address(given)
    except ValueError as error:
        return str(error)
    return ""


def main(argv: Sequence[str], prog: str = "python -m spacr_accel_core.patch") -> int:
    """Run the program ``argv`` names, patched.

    :returns: 0 when the program ends normally (its own ``sys.exit`` code otherwise, raised as
        ``SystemExit``), 2 for a usage error.
    """
    words = list(argv)
    wanted: list[str] = []
    while words and (words[0] in (*_FLAGS, "-h", "--help", _DASK) or words[0].startswith(_DASK + "=")):
        flag = words.pop(0)
        if flag in ("-h", "--help"):
            sys.stdout.write(USAGE.format(prog=prog))
            return 0
        if flag.startswith(_DASK):
            given = flag.partition("=")[2] if "=" in flag else (words.pop(0) if words else "")
            problem = _cluster_problem(given)
            if problem:
                sys.stderr.write(USAGE.format(prog=prog))
                sys.stderr.write(f"{prog}: error: {_DASK}: {problem}\n")
                return 2
            wanted.append(f"dask={given.strip()}")
            continue
        wanted.append(_FLAGS[flag])
    if {"keep-memory", "free-memory"} <= set(wanted):
        sys.stderr.write(USAGE.format(prog=prog))
        sys.stderr.write(f"{prog}: error: --keep-memory and --free-memory contradict each other\n")
        return 2
    if not words or (words[0] == "-m" and len(words) < 2) or (words[0].startswith("-") and words[0] != "-m"):
        sys.stderr.write(USAGE.format(prog=prog))
        sys.stderr.write(f"{prog}: error: name a script or -m module to run"
                         + (f" (unknown option {words[0]})" if words and words[0] != "-m" else "") + "\n")
        return 2
    variable = ",".join(["1", *dict.fromkeys(wanted)])
    os.environ[VARIABLE] = variable
    from . import install

    install(**modes_from(variable) or {})
    if words[0] == "-m":
        sys.argv = [words[1], *words[2:]]
        runpy.run_module(words[1], run_name="__main__", alter_sys=True)
    else:
        script = words[0]
        sys.argv = [script, *words[1:]]
        sys.path[0:1] = [os.path.dirname(os.path.abspath(script))]
        runpy.run_path(script, run_name="__main__")
    return 0
