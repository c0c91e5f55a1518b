"""The kernels compiled by a detached process of their own, so that numba's cache fills whatever
the lifetime of the process that needed them.

WHY A PROCESS OF ITS OWN. Compiling every kernel takes ~45 s of one core the first time on a
machine, and numba writes a kernel to its cache (``cache=True``) only once it is compiled: a process
that exits sooner (spaCR's decode of one field, a notebook cell, a short script) wrote nothing, and
every such process started over, never getting the compiled kernels at all. The compiler here is a
separate interpreter (``python -m spacr_accel_numba._compile_child FOLDER PACKAGE``) started in a session
of its own with no terminal (stdin and stdout closed), that outlives the process that started it,
at the lowest scheduling priority (``nice 19``; the idle priority class on Windows) with one numba
and one BLAS thread, so that the work it competes with keeps its cores: on a busy machine it waits.

ONE AT A TIME PER CACHE. It holds a lock on :data:`LOCK` in numba's cache folder of this package
(``fcntl.flock``, ``msvcrt.locking`` on Windows: released by the operating system when the compiler
exits or dies, so a stale lock cannot outlive its holder) for as long as it runs; a second compiler
started meanwhile (eight spawned workers, a Dask cluster on one machine) finds it held and exits.
After each kernel it records the kernel in :data:`LEDGER` (written to a temporary file and renamed,
so a reader sees the old ledger or the new one, never half of one), with how many functions numba
compiled for it (0: loaded from the cache). numba itself (0.68) writes a new entry's index before its
data, each to a temporary file renamed into place: a compiler killed between the two leaves an index
naming a data file that is not there, which numba reads as a miss and compiles again. A damaged
entry met while loading is set aside and compiled again (:mod:`._cache`), never loaded, and an entry
compiled from other code never loads at all (:mod:`._locator`: every kernel is stamped with
:func:`fingerprint`). A ledger that does not read cleanly is set aside and rebuilt.

WHAT A PROCESS THAT NEEDS THE KERNELS DOES (:mod:`._warm`). Its warm-up thread starts the compiler
(unless one is running), then for each kernel in turn waits until the ledger lists it, and loads it
from the cache (tens of ms) instead of compiling it too. A compiler that exits without a kernel (it
failed, was killed, or another version's compiler held the lock and did other work) is started
once more; after that, or where no compiler can run at all (no writable cache folder, no
interpreter to start, ``SPACR_ACCEL_NUMBA_COMPILE=here``), the warm-up compiles in its own process,
as it always did.

WHERE. The folder is the one numba's own locators choose for this package's files, found without
importing numba: ``NUMBA_CACHE_DIR`` (a subfolder named after the package's folder), else the
package's ``__pycache__`` if it can be written, else numba's folder in the user's cache.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from spacr_accel_core import Setting

_log = logging.getLogger(__name__)

LOCK = "spacr-accel-numba.lock"
"""The compiler's lock file, in the cache folder."""

LEDGER = "spacr-accel-numba.json"
"""The kernels the compiler has written to the cache, in the cache folder."""

COMPILE = Setting(
    "SPACR_ACCEL_NUMBA_COMPILE", "detached",
    "where numba's kernels compile: 'detached' (a low-priority process of its own that fills the cache "
    "even after this one exits) or 'here' (this process's warm-up thread)")
KERNELS = Setting(
    "SPACR_ACCEL_NUMBA_KERNELS", "",
    "comma-separated kernel names to compile (default: all); for tests that need one small kernel")

POLL = 0.1
"""Seconds between two looks at the ledger while a kernel is compiled elsewhere."""

STALL = 900.0
"""Seconds without a new kernel in the ledger after which a process compiles on its own."""

LOCK_TRIES = 2.0
"""Seconds a new compiler keeps trying the lock (a process looking at it holds it for microseconds)."""

_PACKAGE = Path(__file__).resolve().parent


# ---- where ----------------------------------------------------------------------------------------


def _subpath(folder: Path) -> str:
    """numba's name for a source folder inside a cache root (``get_suitable_cache_subpath``)."""
    return f"{folder.name}_{hashlib.sha1(str(folder).encode()).hexdigest()}"  # numba's own naming, not security


def _user_cache() -> Path:
    """numba's user-wide cache root (``appdirs.user_cache_dir("numba", appauthor=False)``)."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "numba"
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local") / "numba" / "Cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "numba"


def _writable(folder: Path) -> bool:
    """Whether ``folder`` can be made and written (numba's own test: a temporary file in it)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def cache_folder() -> Path | None:
    """numba's cache folder for this package's kernels, or ``None`` where none can be written (or
    ``NUMBA_CACHE_LOCATOR_CLASSES`` chooses locators this module cannot follow)."""
    if os.environ.get("NUMBA_CACHE_LOCATOR_CLASSES"):
        return None
    chosen = os.environ.get("NUMBA_CACHE_DIR")
    candidates = [Path(chosen) / _subpath(_PACKAGE)] if chosen else []
    candidates += [_PACKAGE / "__pycache__", _user_cache() / _subpath(_PACKAGE)]
    return next((folder for folder in candidates if _writable(folder)), None)


def mode() -> str:
    """``"detached"`` or ``"here"`` (:data:`COMPILE`); an unknown word is the default, warned about."""
    word = os.environ.get(COMPILE.environment, "").strip().lower() or COMPILE.default
    if word not in ("detached", "here"):
        _log.warning("%s=%r is not 'detached' or 'here'; compiling detached", COMPILE.environment, word)
        return "detached"
    return word


def restricted(names: list[str]) -> list[str]:
    """The kernel names :data:`KERNELS` keeps, in their order (all when it is unset)."""
    wanted = {name.strip() for name in os.environ.get(KERNELS.environment, "").split(",") if name.strip()}
    return [name for name in names if name in wanted] if wanted else names


# ---- the ledger -----------------------------------------------------------------------------------


@functools.cache
def _versions() -> tuple[str, ...]:
    """The libraries a kernel is compiled by (read once: a process keeps the ones it imported)."""
    found = []
    for name in ("numba", "llvmlite", "numpy"):
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} ?")
    return tuple(found)


_DIGESTS: dict[tuple[str, int, int], str] = {}
"""Each source file's SHA-256 by its path, modification time and size (hashed again once changed)."""


def _digest(path: Path) -> tuple[str, str]:
    status = path.stat()
    key = (str(path), status.st_mtime_ns, status.st_size)
    digest = _DIGESTS.get(key)
    if digest is None:
        digest = _DIGESTS[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return path.name, digest


def fingerprint() -> str:
    """What a compiled kernel is valid for: this interpreter, these numba, llvmlite and NumPy, and the
    content of every source file of this package.

    WHY EVERY FILE. numba stamps a cached function with its own file alone, and a kernel that calls
    jitted helpers of another module was loaded from the cache after the helper's file changed: an
    answer from code no longer installed. This fingerprint is the stamp of every cached kernel
    (:mod:`._locator`) and of the ledger, so any change (an upgrade in place, another Python or
    numba) makes every entry stale: the kernels compile again. Contents, not times: a reinstall of
    the same files keeps the cache.
    """
    files = sorted(_digest(path) for path in _PACKAGE.glob("*.py"))
    text = json.dumps([sys.version, sys.platform, _versions(), str(_PACKAGE), files])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Entry:
    """One kernel in the ledger.

    :param seconds: how long the compiler took over it.
    :param compiled: functions numba compiled for it (0: all loaded from the cache).
    :param failed: why it could not be compiled ("" when it was).
    """

    seconds: float
    compiled: int
    failed: str = ""


DAMAGED = ".damaged"
"""Appended to a ledger that does not read cleanly when it is set aside."""


def _entry(row: object) -> Entry:
    """One ledger row, or ``ValueError`` where it is not exactly what :func:`write_ledger` writes."""
    if not isinstance(row, dict):
        raise ValueError(f"a row is {type(row).__name__}, not an object")
    seconds, compiled, failed = row.get("seconds"), row.get("compiled"), row.get("failed", "")
    if (not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not math.isfinite(seconds)
            or not 0 <= seconds < 1e9):
        raise ValueError(f"seconds is {str(seconds)[:40]!r}")
    if not isinstance(compiled, int) or isinstance(compiled, bool) or not 0 <= compiled < 1_000_000:
        raise ValueError(f"compiled is {str(compiled)[:40]!r}")
    if not isinstance(failed, str):
        raise ValueError(f"failed is {type(failed).__name__}, not text")
    return Entry(float(seconds), compiled, failed)


def _parsed(text: str) -> dict[str, Entry] | None:
    """The ledger's kernels, ``None`` when it is another code's (stale); ``ValueError`` when damaged."""
    record = json.loads(text)
    if not isinstance(record, dict) or not isinstance(record.get("kernels"), dict):
        raise ValueError("not a ledger (no mapping of kernels)")
    if record.get("fingerprint") != fingerprint():
        return None
    return {str(name): _entry(row) for name, row in record["kernels"].items()}


def read_ledger(folder: Path) -> dict[str, Entry]:
    """The kernels the ledger in ``folder`` lists for this :func:`fingerprint` (none for a missing
    or stale ledger: those kernels are simply not known to be cached).

    A ledger that does not read cleanly (truncated, garbled, another format, a number that overflows,
    a field of the wrong type) is set aside as ``*.damaged`` with one warning, and reads as empty:
    the next compiler writes a new one. It never raises.
    """
    path = folder / LEDGER
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:  # unreadable (a folder in its place, bytes that are not text)
        return _set_aside(path, exc)
    try:
        parsed = _parsed(text)
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # whatever the file holds
        return _set_aside(path, exc)
    return {} if parsed is None else parsed


def _set_aside(path: Path, exc: BaseException) -> dict[str, Entry]:
    """Move a damaged ledger out of the way (another process may have done it first), warning once."""
    try:
        os.replace(path, path.with_name(path.name + DAMAGED))
    except OSError:
        return {}  # gone already (another process set it aside) or not ours to move: read as empty
    _log.warning("spacr-accel-numba: the compiled-kernel ledger %s was damaged (%s); set aside as %s and "
                 "rebuilt", path, f"{type(exc).__name__}: {exc}".splitlines()[0][:200], path.name + DAMAGED)
    return {}


def write_ledger(folder: Path, kernels: dict[str, Entry], where: str) -> None:
    record = {"fingerprint": fingerprint(), "numba_folder": where, "pid": os.getpid(),
              "kernels": {name: {"seconds": round(entry.seconds, 3), "compiled": entry.compiled,
                                 "failed": entry.failed} for name, entry in kernels.items()}}
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".ledger-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as sink:
            json.dump(record, sink, indent=1)
        os.replace(temporary, folder / LEDGER)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


# ---- the kernels the processes wait for ------------------------------------------------------------

WANTED = "spacr-accel-numba.wanted"
"""The kernels calls are waiting for, one name a line, first asked first, in the cache folder: the
compiler takes them before the rest of its order (a process calling only ``nearest_neighbours``
must not wait behind spaCR's decode kernels)."""


def want(folder: Path, name: str) -> None:
    """Ask the compiler for kernel ``name`` next (appended: several processes ask at once)."""
    with contextlib.suppress(OSError), (folder / WANTED).open("a", encoding="utf-8") as sink:
        sink.write(name + "\n")


def wanted(folder: Path) -> list[str]:
    """The kernels asked for in ``folder``, first asked first (none where the file is missing or unreadable)."""
    try:
        text = (folder / WANTED).read_text(encoding="utf-8", errors="replace")[:65536]
    except OSError:
        return []
    return list(dict.fromkeys(line.strip() for line in text.splitlines() if line.strip()))


def served_all(folder: Path) -> None:
    """Every kernel is in the cache: what was asked for is answered (the list starts empty again)."""
    with contextlib.suppress(OSError):
        (folder / WANTED).unlink()


# ---- the lock -------------------------------------------------------------------------------------


def try_lock(handle: IO[bytes]) -> bool:
    """Take the exclusive lock on an open lock file without waiting; whether it was taken."""
    try:
        if sys.platform == "win32":
            import msvcrt

            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        else:
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def unlock(handle: IO[bytes]) -> None:
    with contextlib.suppress(OSError):
        if sys.platform == "win32":
            import msvcrt

            handle.seek(0)
            msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def compiling(folder: Path) -> bool:
    """Whether a compiler holds the lock in ``folder`` now (any process on this machine)."""
    try:
        with (folder / LOCK).open("a+b") as handle:
            if not try_lock(handle):
                return True
            unlock(handle)
    except OSError:
        return False
    return False


# ---- starting one -----------------------------------------------------------------------------------


_state_lock = threading.Lock()
_child: subprocess.Popen[bytes] | None = None
_exited = threading.Event()
_starts = 0

STARTS = 2
"""Compilers one process starts at most: the first, and one more if it exits without a kernel."""


def _environment() -> dict[str, str]:
    """The compiler's environment: one numba and one BLAS thread, this package first on the path,
    and no patch of spaCR (the compiler never runs spaCR)."""
    env = {key: value for key, value in os.environ.items() if key != "SPACR_ACCEL_PATCH"}
    for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(_PACKAGE.parent), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def _reap(child: subprocess.Popen[bytes], exited: threading.Event) -> None:
    child.wait()
    exited.set()


def start(folder: Path) -> bool:
    """Start a compiler for ``folder`` unless one is running (or this process started its last).

    :returns: whether one was started now.
    """
    global _child, _exited, _starts  # noqa: PLW0603  # this process's one compiler at a time
    with _state_lock:
        if (_child is not None and not _exited.is_set()) or _starts >= STARTS or compiling(folder):
            return False
        executable = sys.executable
        if not executable or getattr(sys, "frozen", False):
            _starts = STARTS  # no interpreter to start: compile here
            return False
        options: dict[str, Any] = {}
        if sys.platform == "win32":
            options["creationflags"] = (subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.IDLE_PRIORITY_CLASS
                                        | subprocess.CREATE_NO_WINDOW)
        else:
            options["start_new_session"] = True
        try:
            child = subprocess.Popen(  # this interpreter, this package's own module
                [executable, "-m", "spacr_accel_numba._compile_child", str(folder), str(_PACKAGE)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                cwd=str(folder), env=_environment(), close_fds=True, **options)
        except OSError as exc:
            _log.info("spacr-accel-numba: could not start the compiler (%s); compiling here", exc)
            _starts = STARTS
            return False
        _starts += 1
        _child, _exited = child, threading.Event()
        with contextlib.suppress(RuntimeError):  # started at exit (._warm): no thread then, nor need of one
            threading.Thread(target=_reap, args=(child, _exited), name="spacr-accel-numba-compiler-reaper",
                             daemon=True).start()
        _log.debug("spacr-accel-numba: compiler started (pid %d) for %s", child.pid, folder)
        return True


def forget_after_fork() -> None:
    """In a forked child: the parent's compiler is not this process's child (the lock still says
    whether it runs)."""
    global _child, _exited, _state_lock  # reset in a forked child
    _child, _exited, _state_lock = None, threading.Event(), threading.Lock()


def _running(folder: Path) -> bool:
    with _state_lock:
        mine = _child is not None and not _exited.is_set()
    return mine or compiling(folder)


def wait_for(name: str, folder: Path, stop: threading.Event | None = None,
             switch: Callable[[], bool] | None = None) -> bool | None:
    """Wait until the ledger in ``folder`` lists kernel ``name``, starting a compiler when none runs.

    :param name: the kernel (a name of :func:`._warm._jobs`).
    :param folder: the cache folder (:func:`cache_folder`).
    :param stop: set to stop waiting early (never set in normal use).
    :param switch: asked at each look: ``True`` when the caller now wants another kernel first.
    :returns: ``True`` when the ledger lists it (compiled, or failed there: the caller's own compile
        then says why); ``False`` when no compiler will write it (the caller compiles it itself);
        ``None`` when ``switch`` said to wait for another kernel first.
    """
    deadline = time.monotonic() + STALL
    seen = -1
    while True:
        listed = read_ledger(folder)
        if name in listed:
            return True
        if switch is not None and switch():
            return None
        if len(listed) != seen:
            seen, deadline = len(listed), time.monotonic() + STALL
        if not _running(folder) and not start(folder):
            return False
        if time.monotonic() > deadline:
            _log.warning("spacr-accel-numba: no kernel cached for %.0f s; compiling %s here", STALL, name)
            return False
        if stop is not None and stop.wait(POLL):
            return False
        if stop is None:
            time.sleep(POLL)
