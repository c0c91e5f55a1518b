"""How much room one pass has on the card when CuPy's own query cannot say: the free memory
:func:`spacr_accel_core.accelerator.memory` reports for that CUDA device.

THE RULE (written in ``docs/backends.md``). One pass may hold 0.4 of the device's free memory, at
most 16 GiB: the free memory CuPy reports now (``cudaMemGetInfo`` plus the blocks CuPy's pool holds
unused), else what ``accelerator.memory()`` reports free for ``cuda:<index>``, else 64 MiB.
``SPACR_ACCEL_CUPY_PASS_BYTES`` overrides it. A pass that still runs out of memory is halved and
resumed, down to a floor, before the backend declines with ``BackendOutOfMemory``.
"""

from __future__ import annotations

__all__ = ["reported_free"]


def reported_free(index: int) -> int | None:
    """Free bytes :func:`spacr_accel_core.accelerator.memory` reports for CUDA device ``index``.

    :param index: the CUDA device number (CuPy's current device).
    """
    from spacr_accel_core.toolkit import memory

    wanted = {f"cuda:{index}"} | ({"cuda"} if index == 0 else set())
    for row in memory():
        if row.free is not None and row.device in wanted:
            return int(row.free)
    return None
