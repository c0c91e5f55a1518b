"""spaCR's plane reader, with a stack that several planes of one field come from decoded once.

WHY. spaCR's decode reads a field's planes in a pool of four threads, one plane per call of
``spacr.ops_engine._read_plane``, and each call opens its file and decodes the whole series before
taking its one plane. A sequencing cycle kept as one multi-channel stack (the first cycle's
``DAPI-CY3-A594-CY5-CY7`` file: five 1480^2 planes) is therefore decoded once per base channel,
four times at once, each decode holding the whole stack. Served, the calls that ask for the same
file at the same time share one decode: the first call reads the file with spaCR's own tifffile
calls, the others wait for it, and each takes its plane from the shared stack by spaCR's own steps
(the channel axis by spaCR's ``_channel_axis``, every other leading axis at 0, a float32 copy).

NEVER STALE, NEVER HELD. A stack is shared only between calls that are in progress together, and
is dropped when the last of them returns: nothing outlives the burst of reads that asked for it,
so the memory is at most what spaCR's own concurrent reads hold (less: one stack where spaCR held
one per call), and a later call opens the file again. The calls share only where the file is the
same one: its path, device, inode, size and modification time, read when each call starts.

LEFT TO spaCR. Anything but a success: a source that is not a ``(path, plane)`` pair, a path that
is not a file, a file tifffile cannot read, a plane the stack does not hold, a read that tifffile
logs about (spaCR's own read of it logs that record again, once per call, as it always did): each
of these is handed to spaCR's own function, which reads again and records the reason in
``unreadable`` (or raises, for the failures spaCR raises), exactly as it would have. The served
call never touches ``unreadable``: spaCR writes to it only on a failure.
"""

from __future__ import annotations

import logging
import operator
import os
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from ._outcome import PassThrough

__all__ = ["SHARED", "read_plane"]


class _Entry:
    """One file's decode, shared by the calls that asked for it while it was wanted."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.users = 0
        self.series: tuple[np.ndarray, str] | None = None
        self.reader = threading.get_ident()


class _Quiet(logging.Filter):
    """Holds back tifffile's records from a shared decode's thread and marks that decode as one that
    spoke (it is then left to spaCR, whose own read gives the record)."""

    def __init__(self) -> None:
        super().__init__()
        self.spoke: set[int] = set()
        self.reading: set[int] = set()
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        ident = threading.get_ident()
        with self.lock:
            if ident not in self.reading:
                return True
            self.spoke.add(ident)
        return False


class SharedReads:
    """The decodes in progress, by file identity; each dropped when its last caller returns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[Any, ...], _Entry] = {}
        self.decodes = 0
        """How many files were decoded (for tests: one per burst of calls sharing it)."""
        self._quiet = _Quiet()

    def held(self) -> int:
        """How many decodes are held now (none once every call has returned)."""
        with self._lock:
            return len(self._entries)

    def series(self, path: str, decode: Callable[[str], tuple[np.ndarray, str]]) -> tuple[np.ndarray, str]:
        """The whole first series of the file at ``path`` and its axes, decoded once for every call
        asking for this file while a call on it is in progress.

        :param path: a regular file.
        :param decode: reads the file (spaCR's own tifffile calls).
        :raises PassThrough: the file changed identity, would not read, or tifffile logged about it.
        """
        try:
            stat = os.stat(path)
        except OSError:
            raise PassThrough("the file cannot be looked at (spaCR reads it and records why)") from None
        key = (path, stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        with self._lock:
            entry = self._entries.get(key)
            reader = entry is None
            if entry is None:
                entry = self._entries[key] = _Entry()
            entry.users += 1
        try:
            if reader:
                self._decode(path, entry, decode)
            else:
                entry.done.wait()
            if entry.series is None:
                raise PassThrough("the file did not read cleanly (spaCR reads it and records why)")
            return entry.series
        finally:
            with self._lock:
                entry.users -= 1
                if entry.users == 0 and self._entries.get(key) is entry:
                    del self._entries[key]

    def _decode(self, path: str, entry: _Entry, decode: Callable[[str], tuple[np.ndarray, str]]) -> None:
        logger = logging.getLogger("tifffile")
        ident = threading.get_ident()
        with self._quiet.lock:
            self._quiet.reading.add(ident)
            if len(self._quiet.reading) == 1:
                logger.addFilter(self._quiet)
        try:
            decoded = decode(path)
            with self._quiet.lock:
                spoke = ident in self._quiet.spoke
            if not spoke:
                entry.series = decoded
                with self._lock:
                    self.decodes += 1
        except Exception:  # every failure is spaCR's to read again and record
            pass
        finally:
            with self._quiet.lock:
                self._quiet.reading.discard(ident)
                self._quiet.spoke.discard(ident)
                if not self._quiet.reading:
                    logger.removeFilter(self._quiet)
            entry.done.set()


SHARED = SharedReads()
"""The process's shared decodes."""


def _tiff_series(path: str) -> tuple[np.ndarray, str]:
    """The first series of a TIFF file and its axis letters, as spaCR's reader takes them."""
    import tifffile

    with tifffile.TiffFile(path) as handle:
        series = handle.series[0]
        axes = str(getattr(series, "axes", "") or "")
        array = np.asarray(series.asarray())
    return array, axes


def read_plane(source: Any, unreadable: Any = None, *, original: Callable[..., Any],
               module: ModuleType) -> tuple[Any, str]:
    """``spacr.ops_engine._read_plane``: one 2-D float32 plane of a file, its stack's decode shared
    with the calls on the same file in progress together (see above).

    :param source: ``(path, plane)``; plane None for a single-channel file.
    :param unreadable: spaCR's list of failures, appended to by spaCR's own function alone.
    :param original: spaCR's own reader (unused: a failure is passed to it by the seam).
    :param module: ``spacr.ops_engine``, whose ``_channel_axis`` finds the channel axis.
    :returns: spaCR's plane, and ``"core"``.
    :raises PassThrough: anything but a plane read cleanly.
    """
    del original, unreadable
    if not isinstance(source, tuple) or len(source) != 2:
        raise PassThrough("a source that is not a (path, plane) pair")
    path, plane = source
    if not isinstance(path, (str, os.PathLike)):
        raise PassThrough("a path that is not a path")
    if plane is not None and (isinstance(plane, bool) or not isinstance(plane, int)):
        raise PassThrough(f"plane={plane!r} (spaCR's own comparisons read it)")
    channel_axis = getattr(module, "_channel_axis", None)
    if not callable(channel_axis):
        raise PassThrough("spaCR's module has no _channel_axis")
    name = os.fspath(path)
    if not isinstance(name, str) or not os.path.isfile(name):
        raise PassThrough("not a file (spaCR records it)")
    array, axes = SHARED.series(name, _tiff_series)
    if plane is not None:
        axis = operator.index(channel_axis(array, axes)) if array.ndim >= 3 else -1
        if axis < 0 or array.shape[axis] <= plane:
            raise PassThrough(f"the stack has no plane {plane} (spaCR records it)")
        array = np.take(array, plane, axis=axis)
    while array.ndim > 2:
        array = array[0]
    return array.astype(np.float32), "core"
