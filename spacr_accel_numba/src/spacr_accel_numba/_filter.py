"""The windowed maximum on the compiled kernel: bands of rows shared between threads."""

from __future__ import annotations

from types import ModuleType

import numpy as np

from spacr_accel_core import BackendDeclined
from spacr_accel_core.toolkit import cpu_threads, run_parts

_MIN_THREADED_PIXELS = 1 << 18  # below this a thread hand-off costs more than it saves
_BLOCK_BYTES = 32 << 20
"""Most a thread's two block buffers (``2 x (2 radius + 1)`` rows) may take: a window so tall
that they would not fit goes to the next backend, whose stripes need no such buffers."""


def window_maximum(kernels: ModuleType, field: np.ndarray, size: int) -> np.ndarray:
    """The ``size`` x ``size`` window maximum of a 2-D field, edges repeated, as float32.

    :param kernels: the compiled :mod:`._kernels`.
    :param field: non-empty 2-D float32, uint8 or uint16 (a camera field is filtered in its own
        dtype and cast once when written: the cast is exact and monotone).
    :param size: odd window edge, at least 3; each axis's radius is capped by its own length.
    :raises BackendDeclined: a window so tall that the block buffers would exceed
        :data:`_BLOCK_BYTES` per thread.
    """
    height, width = field.shape
    down, across = min(size // 2, height - 1), min(size // 2, width - 1)
    block = 2 * down + 1
    if 2 * block * width * field.dtype.itemsize > _BLOCK_BYTES:
        raise BackendDeclined(f"a {size}-row window over {width} columns needs more than "
                              f"{_BLOCK_BYTES >> 20} MiB of block buffers per thread")
    if not field.flags.c_contiguous:
        field = np.ascontiguousarray(field)
    if field.flags.writeable:  # the kernel is compiled for the read-only views the core passes
        field = field.view()
        field.flags.writeable = False
    out = np.empty((height, width), dtype=np.float32)
    blocks = -(-height // block)
    threads = 1 if height * width < _MIN_THREADED_PIXELS else min(cpu_threads(), blocks)
    per = -(-blocks // threads)
    parts = [(field, out, down, across, first * block, min(height, (first + per) * block))
             for first in range(0, blocks, per)]
    run_parts(kernels.filter_band, parts)
    return out
