"""Where numba caches this package's kernels, and what a cached kernel is valid for.

WHY A LOCATOR OF OUR OWN. numba's locators stamp a cached function with its own source file
alone (its hash, by modification time and size). A kernel that calls jitted helpers in another
module of this package was loaded from the cache after the helper's file changed: a ``local_maxima``
compiled against a changed helper of the filter's loops, the file then restored, answered with 429
peaks where the floor found 284. Here every kernel of this package is stamped with
:func:`._compiler.fingerprint` (every source file's content, the interpreter, numba, llvmlite and
NumPy), so no entry compiled from other code is ever loaded: numba finds the index stale and
compiles again, and the next save replaces it.

WHERE. The folder numba's own locators would choose (:func:`._compiler.cache_folder`: the same
files, the same names). Where no folder can be written (a read-only ``NUMBA_CACHE_DIR``, package
folder and user cache), numba's locators all refuse and ``cache=True`` fails at import ("no
locator available"); this one claims the kernels anyway, loads what a read-only cache holds for
this very code, and refuses to write (:meth:`PackageLocator.ensure_cache_path`), so each kernel is
compiled in memory (:mod:`._cache` turns the writing off) and the process still gets numba.

CODE CHANGED UNDER A RUNNING PROCESS. The stamp is the first one this process computed; a kernel
module imported after the package's files changed may hold code of neither version, so its
kernels neither load nor save (compiled in memory, never cached).

Imported by every kernel module right after ``import numba``, before its first ``numba.njit``
(a function's locator is chosen when it is decorated); ``NUMBA_CACHE_LOCATOR_CLASSES`` set by the
user replaces numba's list, and this locator with it.
"""

from __future__ import annotations

import errno
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from numba.core import caching

from . import _compiler

_lock = threading.Lock()
_first: str | None = None
_folder: tuple[Path | None, Path] | None = None


def _where() -> tuple[Path | None, Path]:
    """The writable cache folder (or ``None``) and the folder read where none is writable, once."""
    global _folder  # noqa: PLW0603  # looked up once per process: every kernel is decorated against it
    if _folder is None:
        writable = _compiler.cache_folder()
        chosen = os.environ.get("NUMBA_CACHE_DIR")
        readable = writable or (Path(chosen) / _compiler._subpath(_compiler._PACKAGE) if chosen
                                else _compiler._PACKAGE / "__pycache__")
        _folder = (writable, readable)
    return _folder


def stamp() -> tuple[str, bool]:
    """This process's stamp for a kernel decorated now, and whether it may be cached at all.

    :returns: the fingerprint first computed in this process; ``False`` when the files have changed
        since (the stamp then matches no index: nothing loads, nothing is saved).
    """
    global _first  # noqa: PLW0603  # the code this process loaded, fixed at its first kernel
    now = _compiler.fingerprint()
    with _lock:
        if _first is None:
            _first = now
        first = _first
    if now != first:
        return f"{first}:changed:{os.getpid()}", False
    return first, True


class PackageLocator(caching._CacheLocator):  # numba's locator interface, subclassed as numba's own are
    """numba's cache locator for a kernel of this package (see the module's docstring).

    :param py_func: the decorated function (its first line disambiguates it, as numba's own do).
    :param folder: where its index and data live.
    :param source_stamp: :func:`stamp`'s fingerprint.
    :param writable: whether the cache may be written (no: compiled in memory).
    """

    def __init__(self, py_func: Any, folder: Path, source_stamp: str, writable: bool) -> None:
        self._lineno = py_func.__code__.co_firstlineno
        self._path, self._stamp, self._writable = str(folder), source_stamp, writable

    def ensure_cache_path(self) -> None:
        if not self._writable:
            raise OSError(errno.EROFS, "spacr-accel-numba: no writable cache folder for this process's kernels",
                          self._path)
        os.makedirs(self._path, exist_ok=True)
        tempfile.TemporaryFile(dir=self._path).close()  # numba's own test that the folder is writable

    def get_cache_path(self) -> str:
        return self._path

    def get_source_stamp(self) -> str:
        return self._stamp

    def get_disambiguator(self) -> str:
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> PackageLocator | None:
        """This locator for a function defined in this package's folder; ``None`` for any other."""
        try:
            if Path(py_file).resolve().parent != _compiler._PACKAGE:
                return None
        except OSError:
            return None
        writable, readable = _where()
        source_stamp, current = stamp()
        return cls(py_func, writable or readable, source_stamp, current and writable is not None)


def install() -> None:
    """Put :class:`PackageLocator` first in numba's list (once; it claims only this package's files)."""
    classes: list[Any] = caching.CacheImpl._locator_classes  # numba's list of locator classes, tried in order
    with _lock:
        if PackageLocator not in classes:
            classes.insert(0, PackageLocator)


def in_memory() -> bool:
    """Whether this process's kernels cannot be cached (no writable folder): compiled in memory."""
    return _where()[0] is None


install()
