"""spaCR's decode worker start, ``spacr.ops_engine._init_decode_worker``: spaCR's own initializer,
run after the process is told to keep the memory it frees when it is a worker of spaCR's decode
pool (:mod:`._heap`, "WHERE, BY DEFAULT").

WHY HERE. spaCR starts its decode pool with ``initializer=_init_decode_worker``, which runs once in
each worker process before its first field, and nowhere else but in spaCR's own process when the
decode runs there with one worker. So this initializer, called by ``concurrent.futures``' process
pool, is the one moment at which a process is known to be a decode worker and nothing else: the
patch changes no argument, result or scheduling of spaCR's, only how that process's allocator
treats what a field frees.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _heap

__all__ = ["init_decode_worker"]


def init_decode_worker(*args: Any, original: Callable[..., Any], **kwargs: Any) -> tuple[Any, str]:
    """``spacr.ops_engine._init_decode_worker``: spaCR's own function with spaCR's arguments, after
    :func:`._heap.pool_worker_started`.

    :param original: spaCR's own initializer.
    :returns: what spaCR's initializer returns, and ``"core"``.
    """
    _heap.pool_worker_started()
    return original(*args, **kwargs), "core"
