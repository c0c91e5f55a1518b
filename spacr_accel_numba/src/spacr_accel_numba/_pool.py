"""One lazily created thread pool per process for the nogil kernels (reset in a forked child)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from spacr_accel_core.tiling import cpu_threads

WORKERS = cpu_threads()
"""Threads a call may use (:func:`spacr_accel_core.tiling.cpu_threads`: a Dask worker's one)."""

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_pool_after_fork() -> None:
    # A forked child inherits the pool object but not its threads: submitting to it would wait for ever.
    global _pool, _pool_lock  # noqa: PLW0603  # resetting the module's lazily created pool
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def run_all(work: Callable[..., Any], parts: Sequence[tuple[Any, ...]]) -> list[Any]:
    """``work(*part)`` for every part, the first in this thread and the others in the pool."""
    global _pool  # noqa: PLW0603  # one lazily created pool per process, shared by all calls
    if len(parts) == 1:
        return [work(*parts[0])]
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="spacr-accel-numba")
    futures = [_pool.submit(work, *part) for part in parts[1:]]
    results = [work(*parts[0])]
    results += [future.result() for future in futures]
    return results
