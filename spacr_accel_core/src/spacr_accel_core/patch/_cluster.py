"""spaCR's decode pool on a Dask cluster: ``dask=ADDRESS`` (``SPACR_ACCEL_PATCH=1,dask=...``,
``spacr-accel run --dask ADDRESS``, ``install(dask=...)``).

WHERE IT ENTERS. ``ops_engine._decode`` imports ``_parallel_process_executor`` and
``_guard_workers`` from ``spacr.resource_log`` inside the function, at every call, so replacing
those two module attributes reaches the decode and nothing that bound them at import. The
executor is answered with a :class:`DaskPool` only for the call that hands it spaCR's decode
initializer (``ops_engine._init_decode_worker``, which no other pool of spaCR's uses); every other
call is spaCR's own. The guard (this machine's free memory against the pool's width) is skipped only
for its ``"ops_decode"`` label: the fields run in the cluster's memory, not this machine's.

WHAT SPACR SEES. ``with pool: pool.map(_decode_field, tasks)``, results in the order of the tasks,
a field's own exception raised where spaCR iterates to it: the same rows are written. Each field is
one task; the cluster runs as many at once as it has worker threads (the ``n_workers`` spaCR was
given, its cap of 8 and the memory guard do not narrow it: they size a pool on this machine).

THE WORKERS. A worker imports spaCR afresh, as a spawned process does. The first field a worker runs
for a decode installs the patch there (with the parent's modes, never the cluster word: a worker
starts no cluster), checks that it can read that field's tiles at the paths the parent indexed, and
runs spaCR's initializer with spaCR's arguments; a worker that joins later does the same before its
own first field. spaCR's library goes to the cluster once per decode as one task of its own, which a
worker fetches once; being a task and not scattered data, it is recomputed if the worker holding it
dies.

FAULTS. A worker that dies mid-field has its field rerun elsewhere by the scheduler, within Dask's
``distributed.scheduler.allowed-failures``; a field that outlives that bound raises
:class:`FieldKilledWorkers`. A scheduler that cannot be reached when the decode starts raises
:class:`ClusterUnreachable` naming the address before any field is sent; one lost mid-well raises
:class:`ClusterLost`, and spaCR, which writes a well's rows only after its fields, writes nothing
for that well. ``distributed`` is imported only here, and only once a decode asks for the cluster.
"""

from __future__ import annotations

import atexit
import collections
import importlib
import logging
import os
import re
import sys
import threading
import types
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._install import _Finder, original_of

LOG = logging.getLogger("spacr_accel_core.patch")

__all__ = [
    "ClusterAddress",
    "ClusterLost",
    "ClusterUnreachable",
    "DaskPool",
    "FieldKilledWorkers",
    "FieldsNotShared",
    "address",
    "fields_on_workers",
    "parse_address",
    "use",
]

_RESOURCE_LOG = "spacr.resource_log"
_ENGINE = "spacr.ops_engine"
_INITIALIZER = "_init_decode_worker"
_GUARD_LABEL = "ops_decode"
_HOST_PORT = re.compile(r"[A-Za-z0-9_.\-\[\]]+:\d+")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://\S+")


class ClusterUnreachable(ConnectionError):
    """The Dask scheduler named by ``dask=`` could not be reached when a decode started."""


class ClusterLost(ConnectionError):
    """The Dask scheduler was lost while a well's fields were decoding."""


class FieldKilledWorkers(RuntimeError):
    """A field's task was on more dying workers than the scheduler's ``allowed-failures``."""


class FieldsNotShared(FileNotFoundError):
    """A worker cannot read a tile at the path this process indexed."""


@dataclass(frozen=True)
class ClusterAddress:
    """Where the decode's fields go.

    :param text: the address as given (``local:N`` or a scheduler address).
    :param local_workers: N for ``local:N`` (a ``distributed.LocalCluster`` of N single-threaded
        process workers, started at the first decode and closed when this process exits); None for
        a scheduler that is already running.
    """

    text: str
    local_workers: int | None


def parse_address(value: object) -> ClusterAddress:
    """Read a ``dask=`` value, so that a typo is refused when the patch is installed, not hours later
    when the first well reaches its decode.

    :param value: ``local:N`` (N >= 1), a scheduler address with its protocol
        (``tcp://host:8786``, ``tls://...``) or ``host:port``.
    :raises TypeError: when ``dask`` is not a string.
    :raises ValueError: when it is none of these, naming ``dask``.
    """
    if not isinstance(value, str):
        raise TypeError(f"dask must be a scheduler address or 'local:N', as a string; got {value!r}")
    text = value.strip()
    if text.lower().startswith("local:"):
        count = text[len("local:"):]
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"dask='local:N' needs a whole number of workers N >= 1; got {value!r}")
        return ClusterAddress(text, int(count))
    if _SCHEME.fullmatch(text) or _HOST_PORT.fullmatch(text):
        return ClusterAddress(text, None)
    raise ValueError(f"dask must be a scheduler address ('tcp://host:8786', 'host:8786') or 'local:N'; "
                     f"got {value!r}")


@dataclass(frozen=True)
class _Decode:
    """What every field task of one decode shares, sent to the cluster once.

    :param token: names this decode; a worker prepares once per token.
    :param function: ``(module, name)`` of the field function, looked up in the worker once the patch
        is installed there (so it is the patched one), or the function itself when it has no name
        to be found by.
    :param initializer: the same for spaCR's initializer.
    :param initargs: the initializer's arguments.
    :param install: :func:`spacr_accel_core.patch.install`, handed down by the package (this module
        cannot import the package that imports it) and sent by reference, so a worker calls its own.
    :param modes: the :func:`spacr_accel_core.patch.install` keywords the workers install with.
    """

    token: str
    function: Any
    initializer: Any
    initargs: tuple[Any, ...]
    install: Callable[..., Any]
    modes: dict[str, bool] = field(default_factory=dict)


def _reference(function: Callable[..., Any]) -> Any:
    """``(module, name)`` where the module holds ``function`` (or the function patched from it)."""
    module = sys.modules.get(getattr(function, "__module__", "") or "")
    name = getattr(function, "__qualname__", "")
    if module is not None and "." not in name and original_of(getattr(module, name, None)) is original_of(function):
        return (module.__name__, name)
    return function


def _resolve(reference: Any) -> Callable[..., Any]:
    if isinstance(reference, tuple):
        found: Callable[..., Any] = getattr(importlib.import_module(reference[0]), reference[1])
        return found
    return reference  # type: ignore[no-any-return]  # a function shipped by value


# ---- in the worker --------------------------------------------------------------------------------

_prepared: set[str] = set()
_preparing = threading.Lock()


def _hold(decode: _Decode) -> _Decode:
    """The decode's shared record as a task of its own (recomputed if its worker dies)."""
    return decode


def _readable_paths(task: Mapping[str, Any]) -> Iterator[str]:
    """The tile paths a field task names (spaCR's planes: ``cycle -> [(path, page) or None]``)."""
    planes = task.get("planes") if isinstance(task, Mapping) else None
    if not isinstance(planes, Mapping):
        return
    for entries in planes.values():
        for entry in entries or ():
            if entry and isinstance(entry, (tuple, list)) and isinstance(entry[0], (str, os.PathLike)):
                yield os.fspath(entry[0])


def _prepare(decode: _Decode, task: Any, worker: str) -> None:
    """The patch, the shared-filesystem check and spaCR's initializer, once per worker per decode."""
    with _preparing:
        if decode.token in _prepared:
            return
        modes = decode.modes
        decode.install(check=modes.get("check", False), strict=modes.get("strict", False),
                      report=modes.get("report", False), keep_memory=modes.get("keep_memory", False))
        for path in _readable_paths(task):
            if not os.access(path, os.R_OK):
                raise FieldsNotShared(f"dask worker {worker} cannot read {path}, a tile this field was indexed "
                                      "at: every worker must see the plate at the paths the process running "
                                      "spaCR indexed (a filesystem shared by the cluster)")
        _resolve(decode.initializer)(*decode.initargs)
        _prepared.add(decode.token)


def _run_field(task: Any, *, decode: _Decode) -> tuple[str, Any]:
    """One field on a worker: prepared once, then spaCR's field function. Returns where it ran."""
    from distributed import get_worker

    worker = str(get_worker().address)
    _prepare(decode, task, worker)
    return worker, _resolve(decode.function)(task)


# ---- in the process running spaCR -----------------------------------------------------------------

_fields: collections.Counter[str] = collections.Counter()
_fields_lock = threading.Lock()


def fields_on_workers() -> dict[str, int]:
    """How many fields each worker decoded in this process so far (worker address -> fields): where
    the width of the cluster went."""
    with _fields_lock:
        return dict(_fields)


class _Connection:
    """One client per address per process, made at the first decode, closed when the process exits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, tuple[Any, Any]] = {}
        self._closing_at_exit = False

    def client(self, address: ClusterAddress) -> Any:
        with self._lock:
            known = self._open.get(address.text)
            if known is not None and known[0].status == "running":
                return known[0]
            import distributed

            cluster = None
            try:
                if address.local_workers is not None:
                    cluster = distributed.LocalCluster(  # type: ignore[no-untyped-call]  # distributed's constructors carry no annotations
                        n_workers=address.local_workers, threads_per_worker=1, processes=True,
                        dashboard_address=None)
                    client = distributed.Client(cluster, set_as_default=False)  # type: ignore[no-untyped-call]  # as above
                else:
                    client = distributed.Client(address.text, set_as_default=False)  # type: ignore[no-untyped-call]  # as above
            except (OSError, TimeoutError) as error:
                if cluster is not None:
                    cluster.close()
                raise ClusterUnreachable(f"the Dask cluster at {address.text} (dask={address.text}) cannot be "
                                         f"reached, so no field was sent: {type(error).__name__}: {error}") from error
            self._open[address.text] = (client, cluster)
            if not self._closing_at_exit:
                atexit.register(self.close)
                self._closing_at_exit = True
            return client

    def close(self) -> None:
        """Close every client and every cluster started for the run; one that fails to close (a
        scheduler already gone) never keeps the others open."""
        with self._lock:
            opened = list(self._open.values())
            self._open.clear()
        for client, cluster in opened:
            for closing in (client.close, None if cluster is None else cluster.close):
                if closing is None:
                    continue
                try:
                    closing()
                except Exception as error:  # at exit, or after a lost cluster: the rest must still close
                    LOG.debug("spacr-accel patch: closing a Dask connection failed: %s", error)


_connection = _Connection()


class DaskPool:
    """spaCR's decode pool, with a Dask cluster in place of the local process pool: what ``_decode``
    uses of ``ProcessPoolExecutor`` (``with``, ``map`` in order, ``shutdown``).

    :param address: the cluster.
    :param initializer: spaCR's initializer, run once in each worker before its first field.
    :param initargs: its arguments.
    :param modes: the patch's modes for the workers.
    :param install: the patch's install, which each worker calls with ``modes``.
    :raises ClusterUnreachable: when the cluster cannot be reached (before any field is sent).
    """

    def __init__(self, address: ClusterAddress, initializer: Callable[..., Any], initargs: Iterable[Any],
                 modes: Mapping[str, bool], install: Callable[..., Any]) -> None:
        self._address = address
        self._client = _connection.client(address)
        self._initializer = _reference(initializer)
        self._initargs = tuple(initargs)
        self._modes = dict(modes)
        self._install = install
        self._pending: list[Any] = []

    def __enter__(self) -> DaskPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Cancel what was sent and not yet read (the cluster itself stays up for the next well).

        :param wait: accepted as ``ProcessPoolExecutor.shutdown`` takes it.
        :param cancel_futures: likewise; what is unread is always cancelled.
        """
        pending, self._pending = self._pending, []
        if pending:
            self._client.cancel(pending)

    def map(self, fn: Callable[..., Any], *iterables: Iterable[Any], timeout: float | None = None,
            chunksize: int = 1) -> Iterator[Any]:
        """Send every field now, one task each; yield the answers in the tasks' order.

        :param fn: spaCR's field function.
        :param iterables: its arguments, one iterable per parameter (spaCR passes one).
        :param timeout: seconds to wait for each answer, as ``Executor.map`` reads it.
        :param chunksize: accepted as ``ProcessPoolExecutor.map`` takes it; each field is one task.
        """
        tasks = [arguments[0] if len(arguments) == 1 else arguments for arguments in zip(*iterables, strict=True)]
        if len(iterables) != 1:
            fn = _star(fn)
        token = uuid.uuid4().hex
        decode = _Decode(token, _reference(fn), self._initializer, self._initargs, self._install, self._modes)
        held = self._client.submit(_hold, decode, key=f"spacr-decode-shared-{token}", pure=False)
        keys = [f"spacr-decode-field-{_site(task, index)}-{token}" for index, task in enumerate(tasks)]
        futures = self._client.map(_run_field, tasks, key=keys, pure=False, decode=held) if tasks else []
        self._pending = [*futures, held]
        return self._answers(futures, tasks, timeout)

    def _answers(self, futures: list[Any], tasks: list[Any], timeout: float | None) -> Iterator[Any]:
        from distributed.scheduler import KilledWorker

        try:
            for index, (future, task) in enumerate(zip(futures, tasks, strict=True)):
                try:
                    worker, answer = future.result(timeout=timeout)
                except KilledWorker as error:
                    raise FieldKilledWorkers(
                        f"field {_site(task, index)} of this decode was on workers of {self._address.text} that "
                        f"died more times than distributed.scheduler.allowed-failures allows: {error}") from error
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as error:  # distributed's cancellation is asyncio's, a BaseException
                    if future.status == "error":
                        raise  # the field's own exception, as spaCR's pool raises it
                    words = " ".join(str(error).split())
                    raise ClusterLost(f"the Dask cluster at {self._address.text} was lost while field "
                                      f"{_site(task, index)} was decoding ({type(error).__name__}: {words}); "
                                      "nothing is written for this well") from error
                future.release()
                with _fields_lock:
                    _fields[worker] += 1
                yield answer
        finally:
            self.shutdown()


def _site(task: Any, index: int) -> str:
    site = task.get("site") if isinstance(task, Mapping) else None
    return f"site-{site}" if isinstance(site, int) else f"task-{index}"


def _star(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` of one tuple of arguments (``map`` over several iterables)."""
    def starred(arguments: tuple[Any, ...]) -> Any:
        return function(*arguments)

    return starred


# ---- the seam in spacr.resource_log ---------------------------------------------------------------

class _Seam:
    """The two replaced attributes of ``spacr.resource_log``, kept so they can be put back."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.address: ClusterAddress | None = None
        self.modes: dict[str, bool] = {}
        self.install: Callable[..., Any] | None = None
        self._finder: _Finder | None = None
        self._undo: list[tuple[types.ModuleType, str, Any, Any]] = []

    def use(self, address: ClusterAddress | None, modes: Mapping[str, bool],
            install: Callable[..., Any] | None) -> None:
        with self._lock:
            self.address = address
            self.modes = {key: bool(value) for key, value in modes.items()}
            self.install = install
            if address is None:
                self._take_out()
                return
            if self._undo or self._finder is not None:
                return
            module = sys.modules.get(_RESOURCE_LOG)
            if module is not None:
                self._apply(module)
            else:
                self._finder = _Finder(frozenset({_RESOURCE_LOG}), self._loaded)
                sys.meta_path.insert(0, self._finder)

    def _loaded(self, module: types.ModuleType) -> None:
        with self._lock:
            if self._finder is not None and self._finder in sys.meta_path:
                sys.meta_path.remove(self._finder)
            self._finder = None
            if self.address is not None and not self._undo:
                self._apply(module)

    def _take_out(self) -> None:
        _connection.close()
        if self._finder is not None and self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        self._finder = None
        for module, name, original, replacement in reversed(self._undo):
            if getattr(module, name, None) is replacement:
                setattr(module, name, original)
        self._undo.clear()

    def _apply(self, module: types.ModuleType) -> None:
        executor = getattr(module, "_parallel_process_executor", None)
        guard = getattr(module, "_guard_workers", None)
        if callable(executor):
            self._set(module, "_parallel_process_executor", self._executor(original_of(executor)))
        if callable(guard):
            self._set(module, "_guard_workers", self._guard(original_of(guard)))

    def _set(self, module: types.ModuleType, name: str, replacement: Any) -> None:
        original = original_of(getattr(module, name))
        replacement.__spacr_accel_original__ = original
        self._undo.append((module, name, original, replacement))
        setattr(module, name, replacement)

    def _executor(self, original: Callable[..., Any]) -> Callable[..., Any]:
        seam = self

        def _parallel_process_executor(max_workers: Any = None, mp_context: Any = None, initializer: Any = None,
                                       initargs: Any = (), max_tasks_per_child: Any = None, **options: Any) -> Any:
            address, install = seam.address, seam.install
            if (address is None or install is None or max_tasks_per_child is not None or options
                    or not _is_decode(initializer)):
                return original(max_workers, mp_context, initializer, initargs, max_tasks_per_child, **options)
            return DaskPool(address, initializer, initargs, seam.modes, install)

        return _parallel_process_executor

    def _guard(self, original: Callable[..., Any]) -> Callable[..., Any]:
        seam = self

        def _guard_workers(module: Any, n_jobs: Any, unit_bytes: Any, **options: Any) -> Any:
            if seam.address is not None and module == _GUARD_LABEL:
                return n_jobs
            return original(module, n_jobs, unit_bytes, **options)

        return _guard_workers


def _is_decode(initializer: Any) -> bool:
    """Whether ``initializer`` is spaCR's decode initializer (the one pool that goes to the cluster)."""
    engine = sys.modules.get(_ENGINE)
    own = getattr(engine, _INITIALIZER, None) if engine is not None else None
    return own is not None and original_of(initializer) is original_of(own)


_seam = _Seam()


def use(dask: str | None, modes: Mapping[str, bool], install: Callable[..., Any] | None = None) -> None:
    """Send spaCR's decode to the cluster at ``dask`` (None: spaCR's own pool again, and the clients
    and ``local:N`` clusters this process opened are closed).

    :param dask: the ``dask=`` value (:func:`parse_address`), or None.
    :param modes: the patch's other modes, which the workers install with.
    :param install: the patch's install (:func:`spacr_accel_core.patch.install`), which each worker
        calls with ``modes``; the package hands it down, since this module cannot import its package.
    :raises ValueError: a ``dask`` given without ``install``.
    """
    if dask is not None and install is None:
        raise ValueError("install must be the patch's install function when dask is given")
    _seam.use(None if dask is None else parse_address(dask), modes, install)


def address() -> ClusterAddress | None:
    """The cluster in use, or None."""
    return _seam.address

