"""Compiling the kernels in the background, so that no call waits for numba.

WHY NOT COMPILE ON THE FIRST CALL. ``import numba`` alone takes ~0.4-0.6 s here, and compiling
the filter for one dtype ~2-3 s (loading it from numba's on-disk cache afterwards, tens of ms).
A fresh process's first call must stay within 0.5 s of a warm one, so the first call that reaches
this backend starts a daemon thread that imports each family's kernels module and compiles its loops, and
declines (:class:`~spacr_accel_core.BackendDeclined`), which hands the call to the next backend,
the NumPy floor, with the same answer bit for bit. Each kernel serves as soon as it is ready,
the float32 filter first, from half a second after that first call (:data:`_GRACE`).
:func:`warm` starts at once and waits for all of them (the tests and benchmarks call it).

WHERE THE KERNELS COMPILE. Not in this process, by default: the warm-up thread starts a detached
compiler process at the lowest priority (:mod:`._compiler`), which writes each kernel to numba's
cache even after this process exits, and loads each one from the cache as soon as the compiler
has written it; concurrent processes share one compiler. A process that exits before its daemon
thread got to start the compiler (one call and out) starts it as it exits (:func:`_launch_at_exit`).
Where no cache folder can be written (or
``SPACR_ACCEL_NUMBA_COMPILE=here``) this thread compiles them itself, as below.

A DAMAGED CACHE (a truncated or overwritten file of numba's) is set aside and that kernel
compiled again, which writes a fresh cache for every later process (:mod:`._cache`).

A KERNEL THE CACHE HOLDS SERVES THE FIRST CALL THAT NEEDS IT. Where the ledger lists a kernel
for exactly this code (:func:`._compiler.read_ledger` reads only a ledger stamped with this
package's :func:`._compiler.fingerprint`, the stamp of every cache entry), a call that finds it not
yet loaded loads it itself, in the calling thread (:func:`_load_cached`): ``import numba`` and the
load cost a fresh process ~0.4-0.6 s once, and the kernel ~10-40 ms more, which the first few calls
served by numba repay. Such a load never compiles (a compile it would start is stopped before it
begins, :func:`_refusing_compiles`), never waits (another thread loading, or compiling anything
with numba, sends the call on as while warming), and a kernel that fails to load that way is not
tried again in the calling thread: the warm-up thread repairs and loads it as before.

A FORK DURING THE WARM-UP (spaCR forks its workers) waits, bounded, for a moment the child can
inherit, and the child gets numba's locks back and starts its own warm-up (:mod:`._fork`): its
calls never wait on the parent's thread, and :func:`warm` returns there too.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from spacr_accel_core import BackendUnavailable, BackendWarming, WarmState

from . import _cache, _compiler, _fork

_log = logging.getLogger(__name__)

FIELD_DTYPES = ("float32", "uint16", "uint8")
"""The dtypes the filter is compiled for, in the order they are compiled (the common first)."""

_GRACE = 0.5
"""Seconds the warm-up waits before it starts, unless :func:`warm` asks for it now."""

_lock = threading.Lock()
_hurry = threading.Event()
_ready: set[str] = set()
_failure: str | None = None
_thread: threading.Thread | None = None


_holds: dict[int, tuple[_fork.Hold, bool]] = {}
"""What each forking thread holds across its fork (:func:`._fork.hold`), and whether the warm-up ran."""


def _before_fork() -> None:
    # Only while the warm-up runs, or numba is loaded at all: any other fork pays one look-up.
    thread = _thread
    running = thread is not None and thread.is_alive()
    loader = _loading_in if _loading_in != threading.get_ident() else None  # another thread loading a kernel
    if running or loader is not None or "llvmlite.binding.ffi" in sys.modules:
        busy = thread.ident if running and thread else loader
        _holds[threading.get_ident()] = (_fork.hold(busy), running)


def _after_fork_in_parent() -> None:
    taken = _holds.pop(threading.get_ident(), None)
    if taken is not None:
        _fork.release(taken[0])


def _after_fork_in_child() -> None:
    # A forked child inherits what was compiled but not the thread: numba's locks that thread
    # held are replaced, and an unfinished warm-up starts again there on its next call (or warm()).
    global _thread, _lock, _hurry, _failure, _launch_lock, _launched, _load_lock, _loading_in  # noqa: PLW0603  # reset in a forked child
    taken, running = _holds.pop(threading.get_ident(), (None, False))
    _holds.clear()
    _fork.release(taken)
    _fork.repair()
    _compiler.forget_after_fork()
    _lock = threading.Lock()
    _load_lock, _loading_in = threading.Lock(), None  # a loading thread of the parent's is not here
    _launch_lock, _launched = threading.Lock(), False
    _hurry = threading.Event()
    if _failure is None and len(_ready) < len(_jobs()):
        if running and taken is not None and not taken.safe:
            _failure = (f"forked while the warm-up was importing or compiling, with no safe moment in "
                        f"{_fork.FORK_WAIT:g} s; numba is not used in this process")
        else:
            _thread = None


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


def _jobs() -> list[tuple[str, Callable[[], object]]]:
    """Each kernel's name and a call that compiles it on inputs of exactly the driver's types."""

    def compiling(*steps: tuple[str, ...]) -> Callable[[], object]:
        def compile_kernel() -> object:
            # Each step a family's kernels module, its warm-up and that warm-up's arguments: the
            # module compiles its own loops on exactly its drivers' types, here, so no call compiles.
            return [getattr(importlib.import_module(f"{__package__}.{module}"), warm)(*arguments)
                    for module, warm, *arguments in steps]
        return compile_kernel

    # The order is the cache's order of filling, and a process uses the kernels compiled so far (a
    # prefix of it): spaCR's decode first, the most seconds saved per second of compiling first
    # (the level set saves a field 0.9 s for 1.8 s of compiling, the Gaussians 1.5 s for 22 s),
    # then the peaks and the searches, then the filter's rarer dtypes. A kernel's name is the
    # ledger's, whatever module holds it (``science:decode``: the window gather and registration).
    jobs = [
        ("filter:float32", compiling(("_filters_kernels", "warm_filter", "float32"))),
        ("science:levels", compiling(("_levels_kernels", "warm_levels"))),
        ("science:planes", compiling(("_planes_kernels", "warm_score"))),
        ("science:decode", compiling(("_peaks_kernels", "warm_gather"), ("_registration_kernels", "warm_correlate"))),
        ("science:points", compiling(("_points_kernels", "warm_points"))),
        ("science:smooth", compiling(("_filters_kernels", "warm_smooth"))),
        ("science:peaks", compiling(("_peaks_kernels", "warm_peaks"))),
        ("nearest", compiling(("_neighbours_kernels", "warm_grid"))),
        ("nearest:wide", compiling(("_neighbours_kernels", "warm_wide"))),
        ("science:knearest", compiling(("_neighbours_kernels", "warm_knearest"))),
        ("science:hamming", compiling(("_neighbours_kernels", "warm_hamming"))),
        *((f"filter:{dtype}", compiling(("_filters_kernels", "warm_filter", dtype))) for dtype in FIELD_DTYPES[1:]),
    ]
    kept = _compiler.restricted([name for name, _ in jobs])  # SPACR_ACCEL_NUMBA_KERNELS, for tests
    return [job for job in jobs if job[0] in kept]


def _shared(job: Callable[[], object]) -> bool:
    """Whether the detached compiler runs ``job`` too: one of :func:`_jobs`'s own (a stand-in a test
    puts in their place compiles in this process only)."""
    return job.__module__ == __name__ and job.__qualname__.startswith("_jobs.<locals>.")


def _folder() -> Path | None:
    """The cache folder the detached compiler writes, or ``None``: compile in this process."""
    return _compiler.cache_folder() if _compiler.mode() == "detached" else None


_launch_lock = threading.Lock()
_launched = False


def _launch(folder: Path) -> None:
    """Start the detached compiler for ``folder`` once per process, unless every kernel is cached
    already (then each loads from the cache)."""
    global _launched  # noqa: PLW0603  # once per process: by the warm-up thread, or at exit
    with _launch_lock:
        if _launched:
            return
        _launched = True
        listed = _compiler.read_ledger(folder)
        if any(_shared(job) and name not in listed for name, job in _jobs()):
            _compiler.start(folder)


def _launch_at_exit() -> None:
    """A process that exits right after its first call (a script of one call, a short spaCR run)
    can end before its daemon warm-up thread has started the compiler: started here instead, so
    the cache fills after this process all the same."""
    if _thread is None or _failure is not None:
        return
    with _launch_lock:  # a launch under way in the thread is waited for: it is not cut off midway
        launched = _launched
    folder = None if launched else _folder()
    if folder is not None:
        _launch(folder)


atexit.register(_launch_at_exit)


def _compile_all() -> None:
    global _failure, _asked_in  # noqa: PLW0603  # written once by the warm-up thread, read by calls
    # WHY WAIT. Importing numba and loading the kernels holds the GIL for about a second, and a
    # fresh process's first calls import their own modules in that time (scipy.spatial alone takes
    # ~0.45 s, the floor's first search): side by side both ran at half speed, and the first calls
    # took 0.72-0.85 s over warm ones instead of 0.30-0.53 s. Waiting half a second lets them
    # finish first, and a process that makes a few calls and exits never compiles at all.
    # The compiler is started at once: at nice 19 it takes no core the work needs, and the sooner
    # it starts, the more of the cache a short process leaves filled behind it.
    folder = _folder()
    if folder is not None:
        _asked_in = folder
        for name in list(_asked):  # asked before the folder was known: told before the compiler starts
            _compiler.want(folder, name)
        _launch(folder)
    _hurry.wait(_GRACE)
    jobs = dict(_jobs())
    pending = [name for name in jobs if name not in _ready]  # a call may have loaded some from the cache
    try:
        while pending:
            name = _next(pending)
            job = jobs[name]
            switch = functools.partial(_switched, pending, name)
            if folder is not None and _shared(job) and _compiler.wait_for(name, folder, switch=switch) is None:
                continue  # a call now waits for another kernel: that one first
            with _load_lock:  # a call loading a kernel in its own thread finishes first
                if name not in _ready:  # imports numba only now: a compiler elsewhere spared this process it until here
                    _compile(job)
            _ready.add(name)
            pending.remove(name)
            _log.debug("numba kernel %s is ready", name)
    except Exception as exc:  # any failure to compile only makes this backend unusable
        _failure = f"{type(exc).__name__}: {exc}".splitlines()[0]
        _log.warning("spacr-accel-numba: compiling its kernels failed (%s); the next backend answers", _failure)


_asked: list[str] = []
"""The kernels this process's calls have waited for, first asked first: compiled (or loaded) first."""

_asked_in: Path | None = None
"""The cache folder the detached compiler reads the asked kernels from, once the warm-up knows it."""


def _next(pending: list[str]) -> str:
    """The kernel to get next: the first one a call waits for, else the first in the order."""
    return next((name for name in list(_asked) if name in pending), pending[0])


def _switched(pending: list[str], name: str) -> bool:
    """Whether a call now waits for a kernel other than ``name``, the one being waited for."""
    return _next(pending) != name


def _ask(name: str) -> None:
    """Note that a call waits for ``name`` (once per kernel): this process and its compiler take it next."""
    if name in _asked:
        return
    _asked.append(name)
    folder = _asked_in
    if folder is not None:
        _compiler.want(folder, name)


_REPAIRS = 32
"""Damaged cache entries one job may set aside before it gives up (more than the kernels it compiles)."""


def _compile(job: Callable[[], object]) -> None:
    """Run one compile job. A cache file it meets damaged is set aside and the job run again; a
    cache that cannot be written is turned off for this process (:mod:`._cache`)."""
    for _ in range(_REPAIRS):
        try:
            job()
            return
        except Exception as exc:  # only numba's cache is mended here: anything else is a failure
            if _cache.damaged(exc):
                if not _cache.set_aside(exc):
                    _cache.without_disk()
            elif _cache.unwritable(exc):
                _cache.without_disk(nowhere=_compiler.cache_folder() is None)
            else:
                raise
    job()


def start() -> None:
    """Start the warm-up thread once per process (a no-op once it is running or done)."""
    global _thread  # noqa: PLW0603  # one warm-up per process
    if _thread is None:
        with _lock:
            if _thread is None:
                _thread = threading.Thread(target=_compile_all, name="spacr-accel-numba-warm-up", daemon=True)
                _thread.start()


def require(name: str) -> None:
    """Return once kernel ``name`` is ready; otherwise start the warm-up and decline.

    :raises BackendWarming: still compiling (the next backend answers this call, and the call's
        :attr:`~spacr_accel_core.Dispatch.waiting` names numba).
    :raises BackendUnavailable: compiling failed in this process (numba cannot run here).
    """
    if name in _ready:
        return
    if _failure is not None:
        raise BackendUnavailable(f"numba could not compile its kernels here ({_failure})")
    loaded = _load_cached(name)
    if loaded:
        return
    if loaded is None:  # another thread is loading, or numba compiles: declined, nothing started
        raise BackendWarming(f"numba is loading its {name} kernel from the cache in another thread; the next "
                             "backend answers until it is ready")
    _ask(name)
    start()
    raise BackendWarming(f"numba is still compiling its {name} kernel in the background (first use in this "
                          "process); the next backend answers until it is ready")


# ---- a cached kernel loaded by the call that needs it ---------------------------------------------

_load_lock = threading.Lock()
"""Held while a kernel is loaded or compiled in this process (by a call, or by the warm-up thread): a
call finding it held does not wait, it goes on as while warming."""

_loading_in: int | None = None
"""The thread loading a kernel for a call now (a fork waits for a moment it can inherit)."""

_unloadable: set[str] = set()
"""Kernels a call's load failed for (an entry gone, damaged, or for other code): left to the warm-up."""

_NOT_LOOKED: Path = Path()
_ledger_at: Path | None = _NOT_LOOKED
"""The detached compiler's cache folder, looked up once per process (``None``: there is none)."""


class _WouldCompile(RuntimeError):
    """Raised in a call's own load where numba would compile: a load from the cache never compiles."""


_refusing = threading.local()
_listening = False


def _refuse_compiles() -> None:
    """Listen to numba's compile events (once per process): a compile started in a thread that is
    loading for a call stops before it begins (numba emits the event after its cache missed)."""
    global _listening  # noqa: PLW0603  # one listener per process
    if _listening:
        return
    from numba.core import event

    class Refusal(event.Listener):  # numba's listener interface
        def on_start(self, what: event.Event) -> None:
            if getattr(_refusing, "on", False):
                raise _WouldCompile("not in numba's cache for this code")

        def on_end(self, what: event.Event) -> None:
            return None

    event.register("numba:compile", Refusal())  # type: ignore[no-untyped-call]  # numba ships no annotations
    _listening = True


def _compiler_free() -> bool:
    """Whether numba's compiler lock is free now (taken and given back at once); ``True`` where this
    numba keeps it elsewhere (the load then waits for it like any numba call)."""
    from numba.core.compiler_lock import global_compiler_lock

    inner = getattr(global_compiler_lock, "_lock", None)  # numba's RLock inside its _CompilerLock
    if inner is None or not hasattr(inner, "acquire"):
        return True
    if not inner.acquire(blocking=False):
        return False
    inner.release()
    return True


def _cache_folder() -> Path | None:
    global _ledger_at  # noqa: PLW0603  # looked up once per process (it makes a file to test the folder)
    if _ledger_at is _NOT_LOOKED:
        _ledger_at = _folder()
    return _ledger_at


def _load_cached(name: str) -> bool | None:
    """Load kernel ``name`` in the calling thread where the ledger lists it for this code.

    WHY IN THE CALL. A fresh process with a complete cache declined every call until its warm-up
    thread had loaded the kernel (half a second of grace, then ``import numba``): a spawned spaCR
    decode worker sent its first 5-8 percentile calls of a 1480 x 1480 field to spaCR's own code.
    Loading here costs the first call ``import numba`` once (~0.4-0.6 s) and the kernel's load.

    :param name: a kernel of :func:`_jobs`.
    :returns: ``True``: ready now. ``None``: another thread is loading a kernel, or numba compiles
        something in this process; the call goes on as while warming, and no warm-up starts for it.
        ``False``: not for this call to load (not listed, the warm-up thread at work, or a load that
        would have to compile or failed: that kernel is then left to the warm-up thread).
    """
    global _loading_in  # noqa: PLW0603  # the thread loading a kernel for a call, for a fork
    thread = _thread
    if name in _unloadable or (thread is not None and thread.is_alive()):
        return False  # the warm-up loads it, asked for first
    folder = _cache_folder()
    entry = _compiler.read_ledger(folder).get(name) if folder is not None else None
    job = dict(_jobs()).get(name)
    if entry is None or entry.failed or job is None or not _shared(job):
        return False
    if not _load_lock.acquire(blocking=False):
        return None
    _loading_in = threading.get_ident()
    try:
        if name in _ready:
            return True
        _refuse_compiles()
        if not _compiler_free():
            return None  # compiling elsewhere in this process: a load would wait for it
        _refusing.on = True
        try:
            job()
        finally:
            _refusing.on = False
    except Exception as exc:  # any failure to load here leaves the kernel to the warm-up, as before
        _unloadable.add(name)
        _log.debug("numba kernel %s did not load from the cache in the call (%s); the warm-up gets it",
                   name, f"{type(exc).__name__}: {exc}".splitlines()[0])
        return False
    else:
        _ready.add(name)
        _log.debug("numba kernel %s loaded from the cache by the call that needs it", name)
        return True
    finally:
        _loading_in = None
        _load_lock.release()


def warm(timeout: float | None = None) -> bool:
    """Compile every kernel now (or wait for the warm-up already running) and say whether all are ready.

    :param timeout: seconds to wait at most; ``None`` waits as long as compiling takes (a few
        seconds the first time on a machine, well under one from numba's cache after).
    :returns: ``True`` when every kernel is ready; ``False`` on a timeout or a failure
        (:func:`failure` says which).
    """
    _hurry.set()
    start()
    thread = _thread
    if thread is not None:
        thread.join(timeout)
    return _failure is None and len(_ready) == len(_jobs())


def failure() -> str | None:
    """Why compiling failed in this process, or ``None``."""
    return _failure


def state() -> WarmState:
    """How far the kernels have got on this machine, without compiling or importing numba: the
    kernels ready in this process, or listed in the detached compiler's ledger, whichever is more,
    and whether anything compiles now (this process's warm-up, or a compiler holding the lock)."""
    names = [name for name, _ in _jobs()]
    folder = _folder()
    listed = _compiler.read_ledger(folder) if folder is not None else {}
    on_disk = sum(1 for name in names if name in listed and not listed[name].failed)
    thread = _thread
    building = (thread is not None and thread.is_alive()) or (folder is not None and _compiler.compiling(folder))
    note = f"cache: {folder}" if folder is not None else _why_no_folder()
    return WarmState(done=max(len(_ready & set(names)), on_disk), total=len(names), building=building, note=note)


def _why_no_folder() -> str:
    """The doctor's words for a process that has no detached compiler: why each process compiles."""
    if _compiler.mode() == "here":
        return "compiled in each process (SPACR_ACCEL_NUMBA_COMPILE=here)"
    if os.environ.get("NUMBA_CACHE_LOCATOR_CLASSES"):
        return "NUMBA_CACHE_LOCATOR_CLASSES chooses numba's cache: each process compiles or loads its own kernels"
    return ("no writable cache folder (NUMBA_CACHE_DIR, the package's __pycache__, the user's cache): each "
            "process compiles its kernels in memory, in the background")
