"""How a device backend sizes its passes and survives a card another job fills: the public face, for
third-party backend authors, of the kit's module that defines it (``spacr_accel_core.kit._tiling``).

A pass is sized from the room measured now (:func:`pass_budget`, :data:`HOST_PASS_BYTES` on the
host); a tile that runs out of memory is retried at half its size from where it stopped, and only
at the floor does the primitive give up with :class:`~spacr_accel_core.BackendOutOfMemory`
(:func:`tiles`, a loop the backend drives, or :func:`tiled`, handed the step). The CPU backends
share one thread pool, as wide as the host allows (:func:`cpu_threads`, :func:`pool_width`): an
executor a backend maps its own function over (:func:`cpu_pool`, waited for in :func:`settled`), or
:func:`run_parts`, handed the function. The same names, but :func:`pool_width`, are in
:mod:`spacr_accel_core.toolkit`; this module needs only the standard library and knows no vendor.
"""

from __future__ import annotations

from .kit._tiling import (
    HOST_PASS_BYTES,
    Tile,
    cpu_pool,
    cpu_threads,
    pass_budget,
    pool_width,
    run_parts,
    settled,
    tiled,
    tiles,
)

__all__ = ["HOST_PASS_BYTES", "Tile", "cpu_pool", "cpu_threads", "pass_budget", "pool_width", "run_parts",
           "settled", "tiled", "tiles"]
