"""How a CuPy primitive runs, for every family: on the card ``SPACR_DEVICE`` names, declined under
``gpu=False``, CuPy's errors in the contract's words, and its passes tiled from the memory free now,
a tile that runs out of memory retried at half its size (:func:`spacr_accel_core.tiling.tiled`).

Every family's hook calls :func:`run` with its primitive; every primitive cuts its work with
:func:`tiled`. Nothing here imports CuPy at import time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from spacr_accel_core import BackendDeclined, cpu_requested
from spacr_accel_core.toolkit import call_translated, device_request
from spacr_accel_core.toolkit import tiled as run_tiles

from ._kit import Kit, cupy_kit, is_out_of_memory, translate

__all__ = ["run", "tiled"]

_T = TypeVar("_T")


@contextmanager
def _selected_device() -> Iterator[None]:
    """The card ``SPACR_DEVICE=cuda:N`` names, else CuPy's current one."""
    forced = device_request()
    if forced.family != "cuda" or forced.index is None:
        yield
        return
    import cupy

    with cupy.cuda.Device(forced.index):
        yield


def run(what: str, work: Callable[..., _T], *args: Any) -> _T:
    """Run one primitive on the card, translating CuPy's errors for the dispatcher."""
    if cpu_requested():
        raise BackendDeclined("cupy runs on a CUDA card only, and the call forced it with gpu=False")
    kit: Kit = cupy_kit()
    answer: _T = call_translated(translate, what, _on_the_card, work, kit, *args)
    return answer


def _on_the_card(work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)`` with the card ``SPACR_DEVICE`` names selected (a failure to select it is
    translated like the primitive's own)."""
    with _selected_device():
        return work(*args)


def tiled(total: int, tile: int, floor: int, step: Callable[[int, int], None], kit: Kit,
          what: str) -> None:
    """:func:`spacr_accel_core.tiling.tiled` with CuPy's out-of-memory test and ``kit``'s cache.

    :param total: items to cover.
    :param tile: items per tile to start with.
    :param floor: the smallest tile worth trying; a failure at or below it gives up.
    :param step: does one tile.
    :param kit: the library (its cache is released before a retry).
    :param what: the operation, for the message.
    :raises BackendOutOfMemory: a tile of ``floor`` items still did not fit.
    """
    run_tiles(total, tile, floor, step, is_out_of_memory=is_out_of_memory, release=kit.release,
              label=f"{kit.name} {what}")
