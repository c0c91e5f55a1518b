"""How much room one pass has on a card when torch's own query cannot say: the free memory
:func:`spacr_accel_core.accelerator.memory` reports for that device.

THE RULE (written in ``docs/backends.md``). One pass of a primitive may hold ``fraction`` (0.4) of
the free memory of its device, at most 16 GiB: the free memory torch reports now
(``torch.cuda.mem_get_info`` plus the blocks torch's cache holds unused; Metal's recommended
working set less what it allocated), else what ``accelerator.memory()`` reports free for the
device, else a fixed gigabyte. ``SPACR_ACCEL_TORCH_PASS_BYTES`` overrides it. A call larger than
that runs in passes; a pass that still runs out of memory (another job took the room) is halved and
resumed, down to a floor, before the backend declines with ``BackendOutOfMemory``.
"""

from __future__ import annotations

__all__ = ["reported_free"]


def _same_device(reported: str, wanted: str) -> bool:
    """``"cuda"`` and ``"cuda:0"`` name one device: the index defaults to 0."""

    def normal(name: str) -> str:
        return name if ":" in name else f"{name}:0"

    return normal(reported) == normal(wanted)


def reported_free(device: str) -> int | None:
    """Free bytes :func:`spacr_accel_core.accelerator.memory` reports for ``device``, or ``None``.

    :param device: the torch device string (``"cuda:0"``, ``"xpu:1"``, ``"mps"``).
    """
    from spacr_accel_core.toolkit import memory

    for row in memory():
        if row.free is not None and _same_device(row.device, device):
            return int(row.free)
    return None
