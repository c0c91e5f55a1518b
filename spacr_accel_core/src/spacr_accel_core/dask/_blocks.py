"""The machinery every graph of :mod:`spacr_accel_core.dask` shares, and the graphs of the first
four operations over ``dask.array`` (``maximum_filter``, ``matmul``, ``nearest_neighbours``,
``local_maxima``).

Dask is the engine: this module only builds graphs whose block tasks call the in-memory
:mod:`spacr_accel_core.ops` on the worker that computes them, so each worker resolves its own device
and falls through on its own faults, and records which backend served it in a per-process tally
that :func:`blocks_served` gathers.

Every check that needs only shapes and dtypes runs here, before a graph is built, with the words
:mod:`spacr_accel_core.ops` uses; checks on values (NaN coordinates) run inside the block tasks,
where :mod:`spacr_accel_core.ops` itself raises them, so their words are the same by construction.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import dask.array as da
import numpy as np
from dask.delayed import delayed

from .. import last_dispatch, ops
from ..operations import _checks

_NUMERIC_KINDS, _F32, _I64 = _checks._NUMERIC_KINDS, _checks._F32, _checks._I64
_PAIR = np.dtype([("index", _I64), ("distance", _F32)])
_LOCAL = "this process"
_TASK_FILTER = "spacr_accel-maximum_filter"  # the block tasks' key prefix, as the dashboard shows it

# ---- the per-process tally every block task adds to --------------------------------------------

_lock = threading.Lock()
_served: Counter[tuple[str, str]] = Counter()  # (operation, backend) -> calls
_passed: Counter[tuple[str, str, str]] = Counter()  # (operation, backend, reason) -> times


def _record() -> None:
    """Add the dispatch this thread just made to the process's tally."""
    done = last_dispatch()
    if done is None:  # pragma: no cover - every ops call records one
        return
    with _lock:
        _served[(done.operation, done.backend)] += 1
        for name, reason in done.declined:
            _passed[(done.operation, name, reason)] += 1


def _local_rows() -> tuple[int, list[tuple[str, str, int]], list[tuple[str, str, str, int]]]:
    """This process's tally: its pid (a restarted worker is a new process) and the counts."""
    with _lock:
        return (os.getpid(), [(op, be, n) for (op, be), n in sorted(_served.items())],
                [(op, be, why, n) for (op, be, why), n in sorted(_passed.items())])


def _forget_local() -> None:
    with _lock:
        _served.clear()
        _passed.clear()


def _fresh_after_fork() -> None:
    # A forked child (a multiprocessing pool) starts with its own, empty tally, and a new lock:
    # one held by another thread at the fork would be held for ever in the child.
    global _lock  # noqa: PLW0603  # the module's lock, replaced in the child only
    _lock = threading.Lock()
    _served.clear()
    _passed.clear()


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_fresh_after_fork)


@dataclass(frozen=True)
class BlocksServed:
    """Which backend served the block calls, per worker, and why the ones above were passed over.

    One call is one in-memory op on one block (for a stack, one per 2-D field of the block), so a
    worker whose card was busy shows its calls under ``numpy`` and the card's backend under
    :attr:`passed_over`, while the other workers show theirs under the card's backend.

    :param served: ``(worker, operation, backend, calls)`` rows; ``worker`` is the worker's
        address, or ``"this process"`` for blocks computed by a local scheduler.
    :param passed_over: ``(worker, operation, backend, reason, times)``: a backend ranked above the
        one that served, and the reason it gave (a ``RuntimeError``'s message, or ``faulty: ...``).
    :param processes: ``(worker, pid)`` of every process asked; a restarted worker is a new pid,
        whose counts start again from zero (the blocks a dead worker served are lost with it and
        counted again where they were recomputed).
    """

    served: tuple[tuple[str, str, str, int], ...] = ()
    passed_over: tuple[tuple[str, str, str, str, int], ...] = ()
    processes: tuple[tuple[str, int], ...] = field(default=(), repr=False)

    def by_backend(self) -> dict[str, int]:
        """Calls per backend, over every worker and operation: ``{"torch": 90, "numpy": 10}``."""
        totals: Counter[str] = Counter()
        for _worker, _op, backend, calls in self.served:
            totals[backend] += calls
        return dict(totals.most_common())

    def workers(self) -> tuple[str, ...]:
        """The workers that served at least one call, in the order they were asked."""
        return tuple(dict.fromkeys(w for w, *_ in self.served))

    def on(self, worker: str) -> BlocksServed:
        """This report restricted to one worker (its address as the cluster names it).

        :param worker: the worker's address, e.g. ``"tcp://127.0.0.1:40123"``.
        """
        return BlocksServed(tuple(r for r in self.served if r[0] == worker),
                            tuple(r for r in self.passed_over if r[0] == worker),
                            tuple(p for p in self.processes if p[0] == worker))

    def since(self, earlier: BlocksServed) -> BlocksServed:
        """What was served after ``earlier`` was taken (the counts of the same process subtracted).

        :param earlier: an earlier :func:`blocks_served` of the same cluster.
        """
        same = set(self.processes) & set(earlier.processes)
        served: Counter[tuple[str, str, str]] = Counter()
        passed: Counter[tuple[str, str, str, str]] = Counter()
        pid = dict(self.processes)
        for w, op, be, n in self.served:
            served[(w, op, be)] += n
        for w, op, be, why, n in self.passed_over:
            passed[(w, op, be, why)] += n
        old_pid = dict(earlier.processes)
        for w, op, be, n in earlier.served:
            if (w, old_pid.get(w)) in same and pid.get(w) == old_pid.get(w):
                served[(w, op, be)] -= n
        for w, op, be, why, n in earlier.passed_over:
            if (w, old_pid.get(w)) in same and pid.get(w) == old_pid.get(w):
                passed[(w, op, be, why)] -= n
        return BlocksServed(tuple((*k, n) for k, n in served.items() if n > 0),
                            tuple((*k, n) for k, n in passed.items() if n > 0),
                            self.processes)

    def __str__(self) -> str:
        if not self.served:
            return "no block calls recorded"
        lines = ["calls per backend: " + ", ".join(f"{be} {n}" for be, n in self.by_backend().items())]
        for worker in self.workers():
            mine = self.on(worker)
            lines.append(f"{worker}: " + ", ".join(f"{op} on {be} x{n}" for _, op, be, n in mine.served))
            lines += [f"    passed over {be} for {op} x{n}: {why}" for _, op, be, why, n in mine.passed_over]
        return "\n".join(lines)


def _client(client: Any) -> Any:
    """The given client, else the default ``dask.distributed`` client if one exists, else None."""
    if client is not None or "distributed" not in sys.modules:
        return client
    from distributed import default_client

    try:
        return default_client()
    except ValueError:  # no client: blocks ran (or will run) in this process
        return None


def blocks_served(client: Any = None) -> BlocksServed:
    """The tally of every worker of ``client`` and of this process, since each process started.

    Gathered with ``client.run`` (one small message per worker, no task). For one compute, take the
    difference with :meth:`BlocksServed.since`, or use :func:`tally`.

    :param client: a ``dask.distributed.Client``; by default the current one, and without one only
        this process (the threaded and synchronous schedulers compute here). The ``"processes"``
        multiprocessing scheduler's pool cannot be asked: use a ``LocalCluster`` instead.
    """
    rows: dict[str, tuple[int, list[tuple[str, str, int]], list[tuple[str, str, str, int]]]] = {}
    chosen = _client(client)
    if chosen is not None:
        rows.update(chosen.run(_local_rows))
    here = _local_rows()
    if here[1] or not rows:
        rows[_LOCAL] = here
    return BlocksServed(
        tuple((w, op, be, n) for w, (_, served, _) in rows.items() for op, be, n in served),
        tuple((w, op, be, why, n) for w, (_, _, passed) in rows.items() for op, be, why, n in passed),
        tuple((w, pid) for w, (pid, _, _) in rows.items()),
    )


class Tally:
    """What :func:`tally` hands out: its :attr:`report` is filled when the ``with`` block ends."""

    def __init__(self) -> None:
        self._report: BlocksServed | None = None

    @property
    def report(self) -> BlocksServed:
        """The calls served inside the ``with`` block."""
        if self._report is None:
            raise RuntimeError("the tally is read after its `with` block ends")
        return self._report


@contextmanager
def tally(client: Any = None) -> Iterator[Tally]:
    """Count the block calls served while the ``with`` block runs, per worker and backend.

    ``with tally() as t: result.compute()`` then ``print(t.report)``. Other computes running on the
    same cluster at the same time are counted too: the tally is per process, not per graph.

    :param client: as for :func:`blocks_served`.
    """
    holder = Tally()
    before = blocks_served(client)
    yield holder
    holder._report = blocks_served(client).since(before)


# ---- checks before any graph is built (the words of spacr_accel_core.ops) ------------------------

def _dask(value: Any, name: str) -> da.Array:
    array = value if isinstance(value, da.Array) else da.asarray(value)
    if array.dtype.kind not in _NUMERIC_KINDS:
        raise TypeError(f"{name} must hold real numbers (bool, integer or float), got dtype {array.dtype}")
    return array


# One rule, one message: the in-memory checks are the ops' own.
_memory = _checks._numeric
_integer = _checks._integer


def _known(array: da.Array, name: str, axes: tuple[int, ...]) -> None:
    for axis in axes:
        if any(math.isnan(c) for c in array.chunks[axis]):
            raise ValueError(
                f"{name} has unknown chunk sizes along axis {axis} (shape {array.shape}); "
                f"call {name}.compute_chunk_sizes() first"
            )


def _sole_chunk(array: da.Array, axis: int) -> da.Array:
    """``array`` with ``axis`` in one chunk (the axis a block function needs whole)."""
    return array if len(array.chunks[axis]) <= 1 else array.rechunk({axis: -1})


def _in_graph_once(array: np.ndarray) -> da.Array:
    """An in-memory operand as ONE key of the graph, so it is shipped once to each worker that
    needs it (by the scheduler, then peer to peer) instead of being pickled into every task."""
    return da.from_array(array, chunks=-1, inline_array=False)


# ---- maximum_filter ---------------------------------------------------------------------------

def _maximum_filter_block(block: np.ndarray, window: int, gpu: bool, backend: str | None) -> np.ndarray:
    """``ops.maximum_filter`` on each 2-D field of a block (with its halo), recorded."""
    if block.ndim == 2:
        out = ops.maximum_filter(block, window, gpu=gpu, backend=backend)
        _record()
        return out
    result = np.empty(block.shape, dtype=_F32)
    for index in np.ndindex(*block.shape[:-2]):
        result[index] = ops.maximum_filter(block[index], window, gpu=gpu, backend=backend)
        _record()
    return result


def maximum_filter(field: Any, size: Any, *, gpu: bool = True, backend: str | None = None) -> da.Array:
    """See :func:`spacr_accel_core.dask.maximum_filter`."""
    _checks._options(gpu, backend)
    array = _dask(field, "field")
    _checks.fields_shape(array.shape)
    window = _checks.window_edge(size)
    _known(array, "field", tuple(range(array.ndim)))
    height, width = array.shape[-2:]
    meta = np.empty((0,) * array.ndim, dtype=_F32)
    if window <= 1 or array.size == 0:
        # ops answers these without a backend (a copy); one call per 2-D field, as there.
        return da.map_blocks(_maximum_filter_block, array, dtype=_F32, meta=meta, token=_TASK_FILTER,
                             window=1, gpu=gpu, backend=backend)
    # The halo is what the window reaches along EACH axis, capped there at length - 1 pixels (a
    # window of 2 * length - 1 already covers the whole axis from any pixel, the edge repeated), so
    # dask can always gather it, rechunking chunks narrower than the halo, however much wider than
    # a chunk the window is. An axis held whole by every block needs no halo at all (ops repeats the
    # border itself): a plate chunked field by field runs as plain map_blocks. The blocks get the
    # window itself: ops applies its own cap to each block with its halo, and for a 1 x 1 field
    # (capped to 1) its single-pixel rule, the sign of zero included.
    depth = dict.fromkeys(range(array.ndim - 2), 0)
    for axis, length in ((array.ndim - 2, height), (array.ndim - 1, width)):
        depth[axis] = 0 if len(array.chunks[axis]) == 1 else (min(window, 2 * length - 1) - 1) // 2
    if not any(depth.values()):
        return da.map_blocks(_maximum_filter_block, array, dtype=_F32, meta=meta, token=_TASK_FILTER,
                             window=window, gpu=gpu, backend=backend)
    return da.map_overlap(
        _maximum_filter_block, array, depth=depth, boundary="nearest", trim=True, dtype=_F32, meta=meta,
        token=_TASK_FILTER, window=window, gpu=gpu, backend=backend,
    )


# ---- matmul -----------------------------------------------------------------------------------

def _matmul_block(first: np.ndarray, second: np.ndarray, gpu: bool, backend: str | None) -> np.ndarray:
    out = ops.matmul(first, second, gpu=gpu, backend=backend)
    _record()
    return out


def matmul(first: Any, second: Any, *, gpu: bool = True, backend: str | None = None) -> da.Array:
    """See :func:`spacr_accel_core.dask.matmul`."""
    _checks._options(gpu, backend)
    a = _dask(first, "first")
    b = _sole_chunk(second, 0) if isinstance(second, da.Array) else None
    if b is not None:
        if b.dtype.kind not in _NUMERIC_KINDS:
            raise TypeError(f"second must hold real numbers (bool, integer or float), got dtype {b.dtype}")
        b_shape: tuple[int, ...] = b.shape
    else:
        memory = _memory(second, "second")
        b_shape = memory.shape
    if not a.shape or not b_shape:
        raise ValueError(f"matmul: operands must be at least 1-D, got first {a.shape} and second {b_shape}")
    if a.ndim < 2:
        raise ValueError(f"matmul: first must be at least 2-D (rows, columns), the rows chunked, got shape {a.shape}")
    if len(b_shape) > 2:
        raise ValueError(f"matmul: second must be 1-D or 2-D (one small operand for every row), got shape {b_shape}")
    if a.ndim == 2 and len(b_shape) == 2:
        if a.shape[1] != b_shape[0]:
            raise ValueError(
                f"matmul: first has {a.shape[1]} columns but second has {b_shape[0]} rows "
                f"(shapes {a.shape} and {b_shape})"
            )
    elif a.shape[-1] != b_shape[0]:
        raise ValueError(
            f"matmul: the last axis of first ({a.shape[-1]}) must match the "
            f"{'only' if len(b_shape) == 1 else 'second-to-last'} axis of second ({b_shape[0]}) "
            f"(shapes {a.shape} and {b_shape})"
        )
    _known(a, "first", (a.ndim - 1,))
    if b is None:
        b = _in_graph_once(memory)
    else:
        b = b.rechunk(-1)
        _known(b, "second", tuple(range(b.ndim)))
    a = _sole_chunk(a, a.ndim - 1)
    index = tuple(f"a{i}" for i in range(a.ndim - 1))
    out = index + (("cols",) if b.ndim == 2 else ())
    return da.blockwise(
        _matmul_block, out, a, (*index, "inner"), b, ("inner", "cols")[: b.ndim],
        gpu, None, backend, None, concatenate=True, token="spacr_accel-matmul", dtype=_F32,
        meta=np.empty((0,) * len(out), dtype=_F32),
    )


# ---- nearest_neighbours -----------------------------------------------------------------------

def _nearest_block(source: np.ndarray, target: np.ndarray, gpu: bool, backend: str | None,
                   chunk: int, k: int, max_distance: float | None, metric: str) -> np.ndarray:
    index, distance = ops.nearest_neighbours(source, target, gpu=gpu, backend=backend, chunk=chunk, k=k,
                                             max_distance=max_distance, metric=metric)
    _record()
    pairs = np.empty(index.shape, dtype=_PAIR)
    pairs["index"] = index
    pairs["distance"] = distance
    return pairs


def _field_of(pairs: np.ndarray, name: str) -> np.ndarray:
    return np.ascontiguousarray(pairs[name])


def nearest_neighbours(source: Any, target: Any, *, gpu: bool = True, backend: str | None = None,
                       chunk: Any = ops.CHUNK, k: Any = 1, max_distance: Any = None,
                       metric: str = "euclidean") -> tuple[da.Array, da.Array]:
    """See :func:`spacr_accel_core.dask.nearest_neighbours`."""
    _checks._options(gpu, backend)
    kind = _checks.metric_name(metric)
    count = _checks.neighbour_count(k)
    bound = _checks.distance_bound(max_distance)
    src = _dask(source, "source")
    if src.ndim != 2:
        raise ValueError(f"source must be a 2-D (points, coordinates) array, got shape {src.shape}")
    lazy = isinstance(target, da.Array)
    tgt_shape: tuple[int, ...]
    if lazy:
        tgt_lazy = _dask(target, "target")
        tgt_shape = tgt_lazy.shape
    else:
        tgt_memory = _memory(target, "target")
        tgt_shape = tgt_memory.shape
    if len(tgt_shape) != 2:
        raise ValueError(f"target must be a 2-D (points, coordinates) array, got shape {tgt_shape}")
    rows = _checks._widths_and_chunk(src.shape, tgt_shape, chunk)
    if kind == "hamming":
        _checks.packed_bits(src.dtype, "source")
        _checks.packed_bits(tgt_lazy.dtype if lazy else tgt_memory.dtype, "target")
    _known(src, "source", (1,))
    if lazy:
        tgt = tgt_lazy.rechunk(-1)
    else:
        # float32 (or packed bits) and contiguous once, here, so no block task converts the target
        # again; values are checked by ops inside each block, with its words.
        with np.errstate(over="ignore"):
            tgt = _in_graph_once(np.ascontiguousarray(tgt_memory, dtype=None if kind == "hamming" else _F32))
    src = _sole_chunk(src, 1)
    out = ("rows",) if count == 1 else ("rows", "k")
    pairs = da.blockwise(
        _nearest_block, out, src, ("rows", "width"), tgt, ("targets", "width"),
        gpu, None, backend, None, rows, None, count, None, bound, None, kind, None, concatenate=True,
        new_axes={} if count == 1 else {"k": count}, token="spacr_accel-nearest_neighbours",
        dtype=_PAIR, meta=np.empty((0,) * len(out), dtype=_PAIR),
    )
    indices = da.map_blocks(_field_of, pairs, "index", token="spacr_accel-nearest-indices", dtype=_I64,
                            meta=np.empty((0,) * len(out), dtype=_I64))
    distances = da.map_blocks(_field_of, pairs, "distance", token="spacr_accel-nearest-distances",
                              dtype=_F32, meta=np.empty((0,) * len(out), dtype=_F32))
    return indices, distances


# ---- local_maxima -----------------------------------------------------------------------------

def _peaks_block(block: np.ndarray, window: int, threshold: Any, gpu: bool, backend: str | None,
                 halo: int, origin: tuple[int, ...]) -> np.ndarray:
    """The peaks of one block's interior (its halo rows dropped), in the whole array's coordinates."""
    peaks = ops.local_maxima(block, window, threshold=threshold, gpu=gpu, backend=backend)
    _record()
    rows = block.shape[-2] - 2 * halo
    axis = block.ndim - 2
    inside = peaks[(peaks[:, axis] >= halo) & (peaks[:, axis] < halo + rows)]
    inside[:, axis] -= halo
    return inside + np.asarray(origin, dtype=_I64)


def local_maxima(field: Any, size: Any, *, threshold: Any = None, gpu: bool = True,
                 backend: str | None = None) -> da.Array:
    """See :func:`spacr_accel_core.dask.local_maxima`."""
    _checks._options(gpu, backend)
    _checks.threshold_below(threshold)  # refused here, with ops' words, before any graph is built
    array = _dask(field, "field")
    _checks.fields_shape(array.shape)
    window = _checks.window_edge(size)
    _known(array, "field", tuple(range(array.ndim)))
    # Whole rows in every block: the blocks' peaks, concatenated in block order, are then in
    # row-major order with no global sort. Only the rows exchange a halo.
    array = _sole_chunk(array, array.ndim - 1)
    axis, height = array.ndim - 2, array.shape[-2]
    split = [i for i in range(axis + 1) if len(array.chunks[i]) > 1]
    if split and split[-1] > 0:
        # Block order is row-major only when every axis before the last split one is chunked by 1:
        # a block holding fields 0 and 1 of axis 0, split along axis 1, would list field (1, 0)
        # before field (0, 1). Rows split: one field per block.
        array = array.rechunk(dict.fromkeys(range(split[-1]), 1))
    halo = 0 if len(array.chunks[axis]) == 1 else (min(max(window, 1), 2 * height - 1) - 1) // 2
    if halo:  # as dask's overlap would rechunk, but here, so the origins below are the blocks'
        from dask.array.overlap import ensure_minimum_chunksize

        array = array.rechunk({axis: ensure_minimum_chunksize(halo, array.chunks[axis])})
    grown = da.overlap.overlap(array, depth={axis: halo}, boundary="nearest") if halo else array
    starts = [np.cumsum((0, *chunks[:-1])) for chunks in array.chunks]
    parts = []
    for number, block in np.ndenumerate(grown.to_delayed()):
        origin = tuple(int(starts[i][number[i]]) for i in range(array.ndim))
        task = delayed(_peaks_block, pure=True)(block, window, threshold, gpu, backend, halo, origin)
        parts.append(da.from_delayed(task, shape=(np.nan, array.ndim), dtype=_I64,
                                     meta=np.empty((0, array.ndim), dtype=_I64)))
    return da.concatenate(parts, axis=0) if parts else da.empty((0, array.ndim), dtype=_I64)


def forget() -> None:
    """Zero this process's tally (the workers' own are zeroed with ``client.run(forget)``)."""
    _forget_local()
