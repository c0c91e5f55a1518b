"""How a CuPy primitive runs, for every family: on the card ``SPACR_DEVICE`` names, declined under
``gpu=False``, CuPy's errors in the contract's words, and its passes tiled from the memory free now,
a tile that runs out of memory retried at half its size (:func:`spacr_accel_core.tiling.tiled`).

A family's hook calls its primitive itself inside :func:`on_the_card` (the fields go from the hook
to the primitive, never through this module and back), or hands it to :func:`run`; a primitive
drives :func:`tiles` with its own step, or hands the step to :func:`tiled`. Nothing here imports
CuPy at import time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from spacr_accel_core import BackendDeclined, cpu_requested
from spacr_accel_core.toolkit import Tile, device_request, translated_errors
from spacr_accel_core.toolkit import tiled as run_tiles
from spacr_accel_core.toolkit import tiles as kit_tiles

from ._kit import Kit, cupy_kit, is_out_of_memory, translate

__all__ = ["on_the_card", "run", "tiled", "tiles"]

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


@contextmanager
def on_the_card(what: str) -> Iterator[Kit]:
    """The library to run on, the body run with the card ``SPACR_DEVICE`` names selected and
    CuPy's errors translated for the dispatcher (a failure to select the card is translated like
    the primitive's own): ``with on_the_card("phase_correlate") as kit: ...``.

    :raises BackendDeclined: the call forced ``gpu=False``.
    """
    if cpu_requested():
        raise BackendDeclined("cupy runs on a CUDA card only, and the call forced it with gpu=False")
    kit: Kit = cupy_kit()
    with translated_errors(translate, what), _selected_device():
        yield kit


def run(what: str, work: Callable[..., _T], *args: Any) -> _T:
    """Run one primitive on the card, translating CuPy's errors for the dispatcher:
    ``work(kit, *args)`` inside :func:`on_the_card`."""
    with on_the_card(what) as kit:
        answer: _T = work(kit, *args)
    return answer


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


def tiles(total: int, tile: int, floor: int, kit: Kit, what: str) -> Iterator[Tile]:
    """:func:`spacr_accel_core.tiling.tiles` with CuPy's out-of-memory test and ``kit``'s cache: the
    loop a primitive drives itself (``for part in tiles(...): with part: ...``), calling its own
    step, so its fields never pass through the kit.

    :param total: items to cover.
    :param tile: items per tile to start with.
    :param floor: the smallest tile worth trying; a failure at or below it gives up.
    :param kit: the library (its cache is released before a retry).
    :param what: the operation, for the message.
    :raises BackendOutOfMemory: a tile of ``floor`` items still did not fit.
    """
    return kit_tiles(total, tile, floor, is_out_of_memory=is_out_of_memory, release=kit.release,
                     label=f"{kit.name} {what}")
