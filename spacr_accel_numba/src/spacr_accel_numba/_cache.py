"""A damaged kernel cache is set aside and rebuilt, not a reason to give numba up.

WHY. numba keeps each compiled kernel on disk (an index ``*.nbi`` and data ``*.nbc`` per function,
``cache=True``), and reads them back with :mod:`pickle`. A truncated, emptied or overwritten file
(a full disk, a killed process, a copy gone wrong) raises from numba's ``caching`` module on every
load; unhandled, the warm-up failed, and every later process on the machine failed the same way
until someone found and deleted the files.

WHAT IS DONE. A compile that fails reading a cache entry back (:func:`damaged`) has that
function's files renamed to ``*.damaged`` beside them (:func:`set_aside`, one copy kept per file,
for a bug report), and is compiled again: numba, finding no index, compiles from source and
writes a fresh cache for every later process. A cache that cannot be written (:func:`unwritable`:
a full or read-only disk) stops being written for this process (:func:`without_disk`): what it
holds still loads, and what is compiled stays in memory. Any other failure is not the cache's: it
is raised.
"""

from __future__ import annotations

import glob
import logging
import os
import sys
from types import ModuleType, TracebackType
from typing import Any

_log = logging.getLogger(__name__)

SUFFIX = ".damaged"
"""Appended to each file set aside."""


def _caching_frames(exc: BaseException) -> list[tuple[str, dict[str, Any]]]:
    """The function name and local variables of each frame of ``exc``'s traceback in numba's
    caching module."""
    found = []
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename.replace("\\", "/").endswith("/numba/core/caching.py"):
            found.append((code.co_name, tb.tb_frame.f_locals))
        tb = tb.tb_next
    return found


_READING = frozenset({"load", "_load_index", "_load_data", "rebuild"})
"""numba's functions that read a cache entry back: an exception raised in one is a damaged file
(one raised further in, in what ``load_overload`` calls before it reads, is not)."""

_WRITING = frozenset({"save", "_save_index", "_save_data", "_open_for_write", "save_overload", "_save_overload"})
"""numba's functions that write a cache entry (a full or read-only disk)."""


def _innermost(exc: BaseException) -> str:
    frames = _caching_frames(exc)
    return frames[-1][0] if frames else ""


def damaged(exc: BaseException) -> bool:
    """Whether ``exc`` was raised reading a cache entry back: a damaged file."""
    return _innermost(exc) in _READING


def unwritable(exc: BaseException) -> bool:
    """Whether ``exc`` was raised writing a cache entry: a disk that setting files aside cannot mend."""
    return _innermost(exc) in _WRITING


def _files(cache: Any) -> list[str]:
    """The index and data files of one function's numba cache (a ``numba.core.caching.Cache``)."""
    cache_file = getattr(cache, "_cache_file", None)
    index = getattr(cache_file, "_index_path", None)
    if not isinstance(index, str):
        return []
    base = index[:-len(".nbi")] if index.endswith(".nbi") else index
    return [index, *sorted(glob.glob(glob.escape(base) + ".*.nbc"))]


def set_aside(exc: BaseException) -> bool:
    """Rename the files of the function whose cache raised ``exc`` to ``*.damaged``.

    :param exc: an exception :func:`damaged` accepts; the cache it came from is read off its
        traceback (the ``Cache`` whose method raised), so only that function compiles again.
    :returns: whether its index is out of the way now (set aside here, or already gone: another
        process racing on the same cache may have set it aside first).
    """
    moved = []
    index = None
    for _, frame in _caching_frames(exc):
        owner = frame.get("self")
        files = _files(owner) if hasattr(owner, "_cache_file") else []
        index = files[0] if files else index
        for path in files:
            try:
                os.replace(path, path + SUFFIX)  # one copy kept: a later one replaces it
            except OSError:
                continue  # gone already, or not ours to move
            moved.append(path)
    if moved:
        _log.warning("spacr-accel-numba: numba's cache of a kernel was damaged (%s); set aside %s and "
                     "compiling it again", f"{type(exc).__name__}: {exc}".splitlines()[0],
                     ", ".join(os.path.basename(path) for path in moved))
    return index is not None and not os.path.exists(index)


def _unwritten(*args: object) -> None:
    """Stands for a cache's ``save_overload`` once writing is turned off: saves nothing."""


def without_disk(modules: list[ModuleType] | None = None, nowhere: bool = False) -> int:
    """Turn writing numba's disk cache off for every kernel of this distribution (this process
    only): what is there still loads, what is compiled stays in memory.

    :param modules: the modules whose dispatchers stop writing (default: every loaded module of
        ``spacr_accel_numba``).
    :param nowhere: no cache folder can be written at all (said once, at INFO: the doctor says it).
    :returns: how many dispatchers were changed.
    """
    if modules is None:
        modules = [module for name, module in list(sys.modules.items())
                   if name.startswith("spacr_accel_numba.") and module is not None]
    changed = 0
    for module in modules:
        for value in list(vars(module).values()):
            cache = getattr(value, "_cache", None) if hasattr(value, "py_func") else None  # a numba dispatcher
            if cache is not None and hasattr(cache, "save_overload"):
                cache.save_overload = _unwritten
                changed += 1
    global _said  # noqa: PLW0603  # said once per process
    if not _said:
        _said = True
        if nowhere:  # known before any compile, and shown by the doctor: not a surprise worth a warning
            _log.info("spacr-accel-numba: no writable cache folder; this process compiles its kernels in memory")
        else:
            _log.warning("spacr-accel-numba: numba's cache cannot be written here; what it holds still loads, "
                         "and the kernels compiled now stay in memory for this process")
    return changed


_said = False
