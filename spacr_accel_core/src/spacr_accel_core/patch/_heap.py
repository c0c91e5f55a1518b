"""Keeping freed memory in the process: glibc's allocator told to reuse a decode's large arrays
instead of handing them back to the operating system and faulting them in again for the next field.

WHY. A decode allocates arrays of tens to hundreds of megabytes (a field's stack is 385 MB) and
frees them when the field is done. glibc maps every block of 32 MiB or more on its own and unmaps it
at ``free``, and it trims the top of its heap once more than a threshold lies free there; the next
field then takes the same memory back from the kernel a page at a time. Where the kernel is a
virtual machine's guest whose free memory goes back to the host (free page reporting, a balloon),
each of those faults is slow: on a 2-core virtual machine, the page faults of spaCR's own decode of
an 11 x 4 x 1480 x 1480 field were 4.5 to 6.7 s of its 10 to 13 s (system time, ``getrusage``), and
the patched decode's later fields moved between 1.8 and 4.2 s with the system time alone. With
large blocks taken from the heap and the heap never trimmed, the later fields' system time fell
below 0.1 s on both sides (spaCR's own 5.4 s a field, the patched 1.7 s).

THE PRICE. The process keeps its peak memory until it exits: what a field freed is reused by the
next, never returned. That suits a decode worker (one field after another, each the same size) and
not a long-lived process whose peak is an exception. It is process-wide (every allocation of every
library), set once, and not undone: blocks placed after it stay where glibc put them.

ONE HEAP. glibc gives each new thread an arena of its own (up to eight a core), and memory freed in
one arena serves only that arena's threads. A decode allocates from several threads (its reading pool,
the CPU pool that transforms its bands), each field's threads possibly on other arenas than the
last's, so with the heaps kept and an arena per thread a worker's resident memory kept growing, to
2.5 GiB by its fifth field, where one heap held it at 1.75 GiB from the second on (and with
nothing kept, the default, about 1.9 GiB): a kept heap is kept as one.

WHERE, BY DEFAULT. Hence a policy (:func:`set_policy`, the patch's ``keep_memory``) with three
answers. By default (None) only a worker of spaCR's own decode pool keeps what it frees: a process
that ``concurrent.futures``' process pool started and whose initializer is spaCR's decode
initializer (:func:`pool_worker_started`, called by that seam). Such a process exists to decode
fields one after another and ends with the pool; spaCR sized the pool for every worker at its peak
at once (its memory guard), so holding the peak between two fields asks for no memory spaCR's plan
did not count. On the well of ``benchmarks/bench_spacr_well.py`` (nine 11-cycle fields, two
workers) a worker's later fields took 0.1 s of system time instead of 0.7 to 1.5 s, and its largest
resident size was 1.75 GiB against 1.9 GiB with nothing kept (spaCR's own workers: 1.65 to 2.15
GiB). ``True`` keeps freed memory in every process the patch is installed in (the ``keep-memory``
word), ``False`` in none (``free-memory``).

Only glibc's allocator (Linux) is tuned; elsewhere the call says why it did nothing.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import types
from dataclasses import dataclass

__all__ = ["HeapSetting", "keep_freed_memory", "policy", "pool_worker_started", "set_policy"]

_M_TRIM_THRESHOLD = -1  # glibc's <malloc.h>
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8
_NEVER_TRIM = -1  # mallopt(3): "Setting M_TRIM_THRESHOLD to -1 disables trimming completely"

_lock = threading.Lock()
_applied: list[HeapSetting] = []
_policy: list[bool | None] = [None]  # where freed memory is kept: see "WHERE, BY DEFAULT" above

_POOL_WORKER = ("concurrent.futures.process", "_process_worker")
"""The module and function of ``concurrent.futures``' process pool that runs a pool's initializer in
each worker process it starts."""


@dataclass(frozen=True)
class HeapSetting:
    """What :func:`keep_freed_memory` did.

    :param applied: whether the allocator now keeps freed memory in the process.
    :param reason: what was set, or why nothing was (no glibc, a refused setting).
    """

    applied: bool
    reason: str


def _glibc() -> tuple[ctypes.CDLL, str] | None:
    """The C library this process runs on, when it is glibc, and its version."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols: the C library it is linked with
        version = libc.gnu_get_libc_version  # glibc's own, absent from musl and others
    except (OSError, AttributeError):
        return None
    version.restype = ctypes.c_char_p
    return libc, version().decode("ascii", "replace")


def keep_freed_memory() -> HeapSetting:
    """Make this process keep the memory it frees, so that large arrays are reused field after
    field instead of faulted in from the operating system each time (idempotent).

    Sets glibc's ``M_MMAP_MAX`` to 0 (large blocks come from the heap, where a free leaves them for
    the next allocation), ``M_TRIM_THRESHOLD`` to -1 (the heap is never trimmed) and
    ``M_ARENA_MAX`` to 1 (threads started from now on share the main heap, so what one thread frees
    serves the next allocation of any other; see "ONE HEAP" above). The process then holds its peak
    memory until it exits.

    :returns: a :class:`HeapSetting`; ``applied`` is false, with the reason, where the C library is
        not glibc or refused a setting. Never raises.
    """
    with _lock:
        if _applied:
            return _applied[0]
        found = _glibc()
        if found is None:
            setting = HeapSetting(False, "only glibc's allocator can be told to keep freed memory, and this "
                                         f"process ({sys.platform}) does not run on glibc")
        else:
            libc, version = found
            libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
            libc.mallopt.restype = ctypes.c_int
            refused = [name for name, option, value in (("M_MMAP_MAX", _M_MMAP_MAX, 0),
                                                         ("M_TRIM_THRESHOLD", _M_TRIM_THRESHOLD, _NEVER_TRIM),
                                                         ("M_ARENA_MAX", _M_ARENA_MAX, 1))
                       if libc.mallopt(option, value) != 1]
            setting = (HeapSetting(True, f"glibc {version}: large blocks from the heap (M_MMAP_MAX 0), the heap "
                                         "never trimmed (M_TRIM_THRESHOLD -1), one heap for every thread "
                                         "(M_ARENA_MAX 1)") if not refused else
                       HeapSetting(False, f"glibc {version} refused {', '.join(refused)}"))
        _applied.append(setting)
        return setting


def set_policy(keep: bool | None) -> None:
    """Where freed memory is kept: None in spaCR's decode pool workers only (the default), True in
    every process the patch is installed in (applied to this one now, by the caller), False in none.

    :param keep: the patch's ``keep_memory``.
    """
    _policy[0] = keep


def policy() -> bool | None:
    """The policy :func:`set_policy` set last."""
    return _policy[0]


def _called_by_pool_worker(depth: int = 12) -> bool:
    """Whether a frame of the calling thread, within ``depth`` of this one, is ``concurrent.futures``'
    process pool running its initializer in a worker it started."""
    frame: types.FrameType | None = sys._getframe(1)  # the only way to see who runs the initializer
    for _ in range(depth):
        if frame is None:
            return False
        if (frame.f_globals.get("__name__"), frame.f_code.co_name) == _POOL_WORKER:
            return True
        frame = frame.f_back
    return False


def pool_worker_started() -> HeapSetting | None:
    """Keep freed memory in this process if the policy is the default and this process is a worker
    that ``concurrent.futures``' process pool is starting (the caller is that pool's initializer).

    :returns: what :func:`keep_freed_memory` did, or None where the policy or the caller asks for
        nothing (spaCR's decode in its own process, with one worker, calls the same initializer).
    """
    if _policy[0] is not None or not _called_by_pool_worker():
        return None
    return keep_freed_memory()
