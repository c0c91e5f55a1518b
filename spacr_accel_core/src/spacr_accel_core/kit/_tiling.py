"""How a device backend sizes its tiles: for third-party backend authors, beside :mod:`spacr_accel_core.exact`.

WHY TILES. A card is often shared (another job, a notebook, a structure prediction), so a
primitive cannot assume the memory it saw yesterday, nor even the memory it saw at its start. It
sizes each pass from the room measured NOW (:func:`pass_budget`), works in tiles of that size (rows
of a field, rows of a point set), and a tile that runs out of memory half-way through a plate is
retried at half its size from where it stopped (:func:`tiled`), down to a floor; only then does
the primitive give up with :class:`~spacr_accel_core.BackendOutOfMemory`, which the dispatcher
reads as "try the next backend", never as "fail the plate".

WHAT A BACKEND BRINGS. The free bytes of its device (or ``None`` on the host), its library's
out-of-memory test (CuPy raises a ``MemoryError``, torch a ``RuntimeError`` with words) and its
cache release: this module knows no vendor, needs nothing but the standard library and is cheap
to import.
"""

from __future__ import annotations

import contextvars
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ..contract._errors import BackendOutOfMemory, describe

if TYPE_CHECKING:
    from concurrent.futures import Executor, Future

__all__ = ["HOST_PASS_BYTES", "Tile", "cpu_pool", "cpu_threads", "pass_budget", "pool_width", "run_parts",
           "settled", "tiled", "tiles"]

_T = TypeVar("_T")

def cpu_threads(most: int = 8) -> int:
    """Threads a CPU backend's call may use: the CPUs this process may run on, shared with the other
    worker processes of the pool it is one of, at most ``most``, and no more than
    ``OMP_NUM_THREADS`` says where it is set.

    WHY OMP_NUM_THREADS. It is how a host tells its libraries how many threads each may start:
    Dask's Nanny sets it to 1 in every worker (``distributed.nanny.pre-spawn-environ``), whose
    parallelism is its own worker threads. A backend that started a thread per CPU in each of two
    single-threaded workers on two cores ran four threads on two cores.

    WHY THE POOL. A process pool that nobody told (spaCR's decode spawns ``n_workers`` processes, each
    decoding one field at a time) is the same case: each worker's share of the CPUs is the CPUs over
    the pool's width, read from the process's own situation (:func:`pool_width`).

    :param most: the cap (thread hand-offs stop paying beyond about 8 on these primitives).
    """
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    available //= pool_width()
    wanted = os.environ.get("OMP_NUM_THREADS", "").strip()
    if wanted.isdigit() and int(wanted) > 0:
        available = min(available, int(wanted))
    return max(1, min(most, available))


_WIDTH_SECONDS: Final = 1.0
"""How long a pool's width, once read, is taken as it stands (a pool may start its workers one by one,
spaCR's ten seconds apart: a worker that starts alone has the CPUs to itself until its siblings come)."""

_SPAWNED: Final = b"--multiprocessing-fork"
"""The argument multiprocessing's spawned (and forkserver's) workers are started with."""

_width: list[float] = [float("-inf"), 1]  # [when read, the width read]


def pool_width() -> int:
    """How many worker processes of one pool this process is one of: 1 outside a ``multiprocessing``
    child, or where the situation cannot be read.

    A ``multiprocessing`` child (``multiprocessing.parent_process()`` is not None) counts its
    parent's children that are started as it was (on Linux, ``/proc/<parent>/task/*/children``): for
    a spawned worker those started with ``--multiprocessing-fork`` (not the resource tracker), for a
    forked one those running the same command. Read at most once a second (:data:`_WIDTH_SECONDS`).
    A process that has not imported ``multiprocessing`` is no such child and pays nothing.
    """
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return 1
    now = time.monotonic()
    if now - _width[0] < _WIDTH_SECONDS:
        return int(_width[1])
    parent = mp.parent_process()
    width = 1 if parent is None or parent.pid is None else _siblings(parent.pid)
    _width[:] = [now, width]
    return width


def _siblings(parent: int) -> int:
    """The parent's children started as this process was, this one included (1 where unreadable)."""
    try:
        with open("/proc/self/cmdline", "rb") as own:
            mine = own.read()
        tasks = os.listdir(f"/proc/{parent}/task")
    except OSError:
        return 1
    children: set[str] = set()
    for task in tasks:
        try:
            with open(f"/proc/{parent}/task/{task}/children") as listed:
                children.update(listed.read().split())
        except OSError:
            continue
    spawned = _SPAWNED in mine.split(b"\0")
    count = 0
    for child in children:
        try:
            with open(f"/proc/{child}/cmdline", "rb") as listed:
                command = listed.read()
        except OSError:
            continue
        count += (_SPAWNED in command.split(b"\0")) if spawned else command == mine
    return max(1, count)


_pool: Any = None  # a concurrent.futures.ThreadPoolExecutor, created on first use
_pool_lock = threading.Lock()
_in_pool = threading.local()  # ``inside`` is True in the pool's own threads


def _mark_pool_thread() -> None:
    _in_pool.inside = True


def _forget_pool_after_fork() -> None:
    # A forked child inherits the pool object but not its threads: submitting to it would wait for
    # ever. The child builds its own on first use.
    global _pool, _pool_lock  # noqa: PLW0603  # resetting the module's lazily created pool
    _pool = None
    _pool_lock = threading.Lock()
    _width[:] = [float("-inf"), 1]  # a forked child is a worker of its own pool, read afresh


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def cpu_pool() -> Executor | None:
    """The process-wide pool of :func:`cpu_threads` threads the CPU backends share (for work that
    releases the GIL: NumPy's loops, numba's ``nogil`` kernels), or ``None`` in one of its own
    threads: there a backend runs its parts one after another, since parts queued behind the pool's
    own busy threads could wait for ever.

    WHY AN EXECUTOR, NOT A CALLBACK. A backend maps its own function over the pool
    (``pool.submit``), runs its first part itself and waits in :func:`settled`: the data it hands
    over goes from its module to its module, and a reader following an argument never comes back up
    out of the kit into the backend (which :func:`run_parts`, handed the backend's function, does).

    Each ``submit`` may wrap the work in ``contextvars.copy_context().run`` so that the part sees
    what the call does (a ``config.override`` in force, where the part dispatches an operation).

    One pool for every CPU backend, created on first use and rebuilt in a forked child.
    """
    global _pool  # noqa: PLW0603  # one lazily created pool per process, shared by all calls
    if getattr(_in_pool, "inside", False):
        return None
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                from concurrent.futures import ThreadPoolExecutor  # only where a call runs in parts

                _pool = ThreadPoolExecutor(max_workers=cpu_threads(), thread_name_prefix="spacr-accel-cpu",
                                           initializer=_mark_pool_thread)
    pool: Executor = _pool
    return pool


@contextmanager
def settled(futures: Iterable[Future[Any]]) -> Iterator[None]:
    """The body runs (a backend's first part, in the calling thread) while ``futures`` (the parts it
    handed to :func:`cpu_pool`) run; on leaving, every one of them has finished: they write into
    shared output, which the caller may not read, nor free, before they are done.

    :raises: the body's exception if it raised; else the first exception a part raised, in the
        order of ``futures`` (a part cancelled before it ran: ``CancelledError``, its share of the
        output unwritten).
    """
    waiting = list(futures)
    try:
        yield
    finally:
        # Wait for all, whatever happened: asking a cancelled part for its exception raises at once,
        # which would leave the parts after it running while the caller frees their output.
        from concurrent.futures import CancelledError, wait  # imported already: the parts are its futures

        wait(waiting)
        problems = [CancelledError("a part was cancelled before it ran") if future.cancelled()
                    else future.exception() for future in waiting]
    for problem in problems:
        if problem is not None:
            raise problem


def run_parts(work: Callable[..., _T], parts: Sequence[tuple[Any, ...]]) -> list[_T]:
    """``[work(*part) for part in parts]``, the first in the calling thread and the others side by
    side in :func:`cpu_pool`: the same as a backend submitting its own parts and waiting in
    :func:`settled`, for work that has no reason to keep its arithmetic in its own module.

    ``work`` may itself call :func:`run_parts` (an operation whose checks read a stack in bands,
    called from a part): in a pool thread the nested call runs its parts one after another in that
    thread, since queued behind the pool's own busy threads they could wait for ever.

    Each part runs in a copy of the caller's :mod:`contextvars` context, so a part sees what the
    call does: a ``config.override`` in force (a part that calls an operation dispatches as its
    caller would, not as the process's defaults say), and every other context variable.

    :returns: the results in the order of ``parts``; the first exception raised, after every
        part has finished.
    """
    pool = cpu_pool() if len(parts) > 1 else None
    if pool is None:
        return [work(*part) for part in parts]
    # one copy per part: a context may not be entered by two threads at once
    futures = [pool.submit(contextvars.copy_context().run, work, *part) for part in parts[1:]]
    with settled(futures):
        first = work(*parts[0])
    return [first, *(future.result() for future in futures)]


HOST_PASS_BYTES: Final = 64 << 20
"""One pass's working set on the host: big enough that per-operation overhead vanishes, small
enough to stay near the caches and far from a laptop's memory ceiling."""


def pass_budget(free: int | None, *, override: str | None, host: int,
                fraction: float = 0.4, cap: int = 16 << 30) -> int:
    """Bytes one pass of a primitive may use now: the room measured on a card, not assumed.

    A shared card's free memory is the budget's basis (another job may hold most of it), taken
    at ``fraction`` because the pass allocates more than its one big buffer; ``cap`` keeps a huge
    card from getting passes so long that an out-of-memory retry throws away minutes of work.

    :param free: free device bytes now, or ``None`` where that cannot be asked (the host).
    :param override: an operator's byte count (a backend's ``SPACR_ACCEL_*_PASS_BYTES``), or ``None``.
    :param host: the budget where ``free`` is unknown: cache-sized passes on a CPU.
    :param fraction: the share of the free memory one pass may take.
    :param cap: the most one pass may take.
    """
    if override:
        try:
            return max(1 << 16, int(override))
        except ValueError:
            pass  # an unreadable override is ignored rather than fatal to the call
    if free is None:
        return host
    return int(max(1 << 20, min(cap, free * fraction)))


class Tile:
    """One tile of :func:`tiles`: items ``start`` to ``stop``; its work runs inside ``with tile:``,
    which keeps an out-of-memory error for the retry (its reason only: the failed tile's arrays,
    held by the traceback, go with it) and lets any other error through."""

    __slots__ = ("_is_out_of_memory", "failed", "start", "stop")

    def __init__(self, start: int, stop: int, is_out_of_memory: Callable[[BaseException], bool]) -> None:
        self.start, self.stop = start, stop
        self._is_out_of_memory = is_out_of_memory
        self.failed: str | None = None
        """Why the tile's work ran out of memory, or ``None``."""

    def __enter__(self) -> Tile:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, trace: object) -> bool:
        if not isinstance(exc, Exception) or not self._is_out_of_memory(exc):
            return False
        self.failed = describe(exc)
        return True


def tiles(total: int, tile: int, floor: int, *, is_out_of_memory: Callable[[BaseException], bool],
          release: Callable[[], None], label: str) -> Iterator[Tile]:
    """The tiles over ``range(total)``, a tile whose work ran out of memory given again at half its size.

    WHY. A card is often shared, so the room a primitive measured at its start may be gone half-way
    through a plate. The retry resumes at the tile that failed, so work already done is kept: a
    card another job fills costs a few smaller tiles, not the plate. Only at the floor does it give
    up with :class:`~spacr_accel_core.BackendOutOfMemory`, which the dispatcher reads as "try the
    next backend". Any error that is not out-of-memory propagates unchanged (a bug is not a busy
    card).

    WHY A LOOP, NOT A CALLBACK. The backend drives the loop and calls its own function for each tile
    (``for tile in tiles(...): with tile: step(tile.start, tile.stop)``): its data never passes
    through the kit, and the arrays of a failed tile die with ``step``'s frame before the retry
    (:func:`tiled` is the same loop for a backend that hands its step over).

    :param total: items to cover.
    :param tile: items per tile to start with (at least 1 is used).
    :param floor: the smallest tile worth trying; a failure at or below it gives up.
    :param is_out_of_memory: whether an exception the tile's work raised means "out of memory" (the
        library's own class or words: CuPy raises a MemoryError, torch a RuntimeError).
    :param release: hands cached blocks back to the driver; called before every retry, after the
        failed tile's ``with`` block has let its exception go.
    :param label: who is running what, for the message, e.g. ``"cupy nearest_neighbours"``.
    :raises BackendOutOfMemory: a tile of ``floor`` items (or fewer) still did not fit.
    """
    tile = max(1, tile)
    floor = max(1, min(floor, tile))
    start = 0
    while start < total:
        stop = min(total, start + tile)
        attempt = Tile(start, stop, is_out_of_memory)
        yield attempt
        if attempt.failed is None:
            start = stop
            continue
        release()
        if stop - start <= floor:
            raise BackendOutOfMemory(
                f"{label}: out of memory even for {stop - start} item(s) per pass (the floor): {attempt.failed}"
            )
        tile = max(floor, (stop - start) // 2)


def tiled(total: int, tile: int, floor: int, step: Callable[[int, int], None], *,
          is_out_of_memory: Callable[[BaseException], bool], release: Callable[[], None],
          label: str) -> None:
    """Run ``step(start, stop)`` over ``range(total)`` in tiles, halving a tile that runs out of
    memory: the loop of :func:`tiles`, for a backend that hands its step over.

    :param total: items to cover.
    :param tile: items per tile to start with (at least 1 is used).
    :param floor: the smallest tile worth trying; a failure at or below it gives up.
    :param step: does one tile; may raise anything.
    :param is_out_of_memory: whether an exception ``step`` raised means "out of memory" (the
        library's own class or words: CuPy raises a MemoryError, torch a RuntimeError).
    :param release: hands cached blocks back to the driver; called before every retry, outside the
        exception handler, so the failed tile's arrays (held by the traceback) are already gone.
    :param label: who is running what, for the message, e.g. ``"cupy nearest_neighbours"``.
    :raises BackendOutOfMemory: a tile of ``floor`` items (or fewer) still did not fit.
    """
    for part in tiles(total, tile, floor, is_out_of_memory=is_out_of_memory, release=release, label=label):
        with part:
            step(part.start, part.stop)
