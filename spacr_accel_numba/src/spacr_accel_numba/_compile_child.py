"""The detached compiler's own process (:mod:`._compiler` starts it and says why):
``python -m spacr_accel_numba._compile_child FOLDER PACKAGE``.

It lowers its priority first (``nice 19``), takes the cache folder's lock (or exits at once: another
compiler is at work), and compiles (or loads) each kernel of :func:`._warm._jobs` in the warm-up's
order, a kernel a process waits for first (:data:`._compiler.WANTED`), listing each in the ledger
as soon as numba has written it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from . import _warm
from ._compiler import (
    _PACKAGE,
    LOCK,
    LOCK_TRIES,
    Entry,
    read_ledger,
    served_all,
    try_lock,
    unlock,
    wanted,
    write_ledger,
)


def _compiles(modules: list[Any]) -> int:
    """Functions numba compiled (cache misses) so far in ``modules``' dispatchers."""
    total = 0
    for module in modules:
        for value in list(vars(module).values()):
            stats = getattr(value, "stats", None) if hasattr(value, "py_func") else None
            misses = getattr(stats, "cache_misses", None)
            if misses is not None:
                total += sum(misses.values())
    return total


def _ours() -> list[Any]:
    return [module for name, module in list(sys.modules.items())
            if name.startswith("spacr_accel_numba.") and module is not None]


AUTOGROUP = Path("/proc/self/autogroup")
"""Linux's scheduling group of this session (where ``sched_autogroup_enabled`` is on)."""


def _lower_priority() -> None:
    """The lowest priority, in this process and in its scheduling group.

    WHY THE GROUP TOO. The compiler starts a session of its own, and where Linux groups each session
    for scheduling (autogroup, on by default in desktop and many server kernels) a process's nice
    value only orders it within its group, while the groups share the cores by their own nice
    value: at nice 19 alone the compiler still took 41% of a core a busy process of another session
    needed, and the floor's calls beside it ran 1.44x slower. With its group at nice 19 too it takes
    almost none (a floor ``phase_correlate`` beside it: 1.12x of one beside a paused compiler).
    Where there is no such file, or it cannot be written, the process's own nice value
    is all there is.

    ONLY ITS OWN GROUP. The group is the session's, shared by every process in it: run from a
    terminal or a test (not started by :func:`._compiler.start`, which gives it a session of its
    own), writing it would leave the user's whole session at nice 19 after the compiler exits. It is
    written only where this process leads its session.
    """
    if hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(19)
    if _leads_its_session():
        with contextlib.suppress(OSError):
            AUTOGROUP.write_text("19", encoding="ascii")


def _leads_its_session() -> bool:
    """Whether this process started its own session (so its scheduling group is its alone)."""
    getsid = getattr(os, "getsid", None)
    return getsid is not None and getsid(0) == os.getpid()


def main(argv: list[str] | None = None) -> int:
    """Take the lock, compile (or load) each kernel, and list each in the ledger as it is written.

    :param argv: ``[FOLDER, PACKAGE]``: the cache folder, and the package folder the starting
        process imported (a different copy first on this path would compile other kernels).
    :returns: 0 done (or another compiler holds the lock); 3 started for another copy of the package.
    """
    _lower_priority()
    folder, package = (argv if argv is not None else sys.argv[1:])[:2]
    if Path(package).resolve() != _PACKAGE:
        return 3
    path = Path(folder)
    with (path / LOCK).open("a+b") as handle:
        deadline = time.monotonic() + LOCK_TRIES
        while not try_lock(handle):
            if time.monotonic() > deadline:
                return 0  # another compiler is at work on this cache
            time.sleep(0.05)
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n".encode())
            handle.flush()
            _compile_into(path)
        finally:
            unlock(handle)
    return 0


def _compile_into(folder: Path) -> None:
    from ._filters_kernels import filter_band  # numba's cache folder for this package: every kernel's

    listed = read_ledger(folder)
    where = ""
    jobs = dict(_warm._jobs())
    pending = list(jobs)
    while pending:
        asked = [name for name in wanted(folder) if name in pending]  # what processes wait for, first
        name = asked[0] if asked else pending[0]
        pending.remove(name)
        job = jobs[name]
        began, before = time.perf_counter(), _compiles(_ours())
        failed = ""
        try:
            _warm._compile(job)
        except Exception as exc:  # recorded for the waiting processes, whose own compile says why
            failed = f"{type(exc).__name__}: {exc}".splitlines()[0]
        cache = getattr(filter_band, "_cache", None)
        where = where or str(getattr(cache, "_cache_path", ""))
        listed[name] = Entry(time.perf_counter() - began, _compiles(_ours()) - before, failed)
        write_ledger(folder, listed, where)
    served_all(folder)


if __name__ == "__main__":
    sys.exit(main())
