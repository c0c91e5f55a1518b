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
not a long-lived process whose peak is an exception, which is why it is a switch and not a default.
It is process-wide (every allocation of every library), set once, and not undone: blocks placed
after it stay where glibc put them.

Only glibc's allocator (Linux) is tuned; elsewhere the call says why it did nothing.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from dataclasses import dataclass

__all__ = ["HeapSetting", "keep_freed_memory"]

_M_TRIM_THRESHOLD = -1  # glibc's <malloc.h>
_M_MMAP_MAX = -4
_NEVER_TRIM = -1  # mallopt(3): "Setting M_TRIM_THRESHOLD to -1 disables trimming completely"

_lock = threading.Lock()
_applied: list[HeapSetting] = []


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
    the next allocation) and ``M_TRIM_THRESHOLD`` to -1 (the heap is never trimmed). The process
    then holds its peak memory until it exits.

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
                                                         ("M_TRIM_THRESHOLD", _M_TRIM_THRESHOLD, _NEVER_TRIM))
                       if libc.mallopt(option, value) != 1]
            setting = (HeapSetting(True, f"glibc {version}: large blocks from the heap (M_MMAP_MAX 0), the heap "
                                         "never trimmed (M_TRIM_THRESHOLD -1)") if not refused else
                       HeapSetting(False, f"glibc {version} refused {', '.join(refused)}"))
        _applied.append(setting)
        return setting
