"""The windowed maximum as separable, cache-sized, log-doubling ``np.maximum`` passes.

WHY NOT scipy.ndimage: on a 4096 x 4096 float32 field with size 15 scipy takes ~0.73 s on this
machine's core, while a copy of the field takes ~10 ms. The maximum over a k-wide window is
separable (rows, then columns) and each 1-D pass is built by doubling: the max over 2w is the max
of two overlapping w-maxima, so width 15 needs four ``np.maximum`` passes per axis instead of 14.
The field is walked in stripes of rows small enough to stay in cache, and the stripes are shared
between threads (NumPy's ufunc loops release the GIL).

The maximum is exact, so the result equals scipy's bit for bit on finite input (the sign of a
zero aside: see docs/decisions.md); ``np.maximum`` propagates NaN, which IS the NaN rule: a window
holding a NaN yields NaN.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

_STRIPE_BYTES = 3 << 19  # measured best of 0.5-2 MiB on 4096-wide fields: less halo, still cache-sized
_MIN_THREADED_PIXELS = 1 << 18  # below this, a thread hand-off costs more than it saves

_WORKERS = max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)))
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_pool_after_fork() -> None:
    # A forked child inherits the pool object but not its threads: submitting to it would wait
    # for ever. The child builds its own on first use.
    global _pool, _pool_lock  # noqa: PLW0603  # resetting the module's lazily created pool
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _executor() -> ThreadPoolExecutor:
    global _pool  # noqa: PLW0603  # one lazily created pool per process, shared by all calls
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="spacr-accel-maxfilter")
    return _pool


def _running_max(
    buffer: np.ndarray, spare: np.ndarray, length: int, size: int, axis: int, out: np.ndarray
) -> None:
    """Write into ``out`` the max over ``size`` consecutive entries along ``axis`` (0 or 1) of
    the first ``length`` entries of ``buffer``; ``out`` has ``length - size + 1`` along it.

    ``buffer`` is overwritten; ``spare`` is scratch of the same shape.
    """
    src, dst = buffer, spare
    width = 1
    while True:
        step = min(width, size - width)  # the last step overlaps two width-maxima to reach size
        valid = length - step
        target = out if width + step == size else dst
        if axis == 0:
            np.maximum(src[:valid], src[step:length], out=target[:valid])
        else:
            np.maximum(src[:, :valid], src[:, step:length], out=target[:, :valid])
        width += step
        if width == size:
            return
        length = valid
        src, dst = dst, src


def _stripes(field: np.ndarray, out: np.ndarray, size: int, stripe: int, first: int, step: int) -> None:
    """Filter stripes ``first, first + step, ...`` of ``stripe`` rows each into ``out``.

    The scratch buffers are allocated once per worker and reused for every stripe: allocating
    them per stripe costs more than the arithmetic (freed and re-faulted pages on every call).
    """
    height, width = field.shape
    radius = size // 2
    rows = stripe + 2 * radius
    padded = np.empty((rows, width + 2 * radius), dtype=field.dtype)
    spare = np.empty_like(padded)
    vertical = np.empty((rows, width), dtype=field.dtype)
    spare_vertical = np.empty_like(vertical)
    for start in range(first * stripe, height, step * stripe):
        stop = min(height, start + stripe)
        lo, hi = max(0, start - radius), min(height, stop + radius)
        top = lo - (start - radius)  # rows of edge repetition above the field
        count = hi - lo
        # Horizontal pass over the rows this stripe needs, written straight into the vertical buffer.
        padded[:count, radius:radius + width] = field[lo:hi]
        padded[:count, :radius] = field[lo:hi, :1]
        padded[:count, radius + width:] = field[lo:hi, width - 1:]
        _running_max(padded[:count], spare[:count], width + 2 * radius, size, 1,
                     vertical[top:top + count])
        vertical[:top] = vertical[top]
        span = stop - start + 2 * radius
        vertical[top + count:span] = vertical[top + count - 1]
        _running_max(vertical[:span], spare_vertical[:span], span, size, 0, out[start:stop])


NARROW = frozenset(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16))
"""Camera dtypes filtered as they are: every value is exact in float32 and the cast keeps order,
so the window maximum commutes with the cast, and the passes move a half or a quarter of the bytes
(a 2048 x 2048 uint16 field, size 5: measured in ``benchmarks/bench_peers.py``)."""


def window_maximum(field: np.ndarray, size: int) -> np.ndarray:
    """The ``size`` x ``size`` window maximum of a 2-D field, edges repeated, as float32.

    :param field: non-empty 2-D float32, or one of the :data:`NARROW` integer dtypes, which are
        filtered in their own dtype and cast once, by the last pass writing float32 (bit-identical
        to filtering ``field.astype(float32)``: the cast is exact and monotone).
    :param size: odd window edge, at least 3.
    :returns: a new float32 array of the field's shape.
    """
    if field.dtype != np.float32 and field.dtype not in NARROW:
        field = field.astype(np.float32)
    height, width = field.shape
    out = np.empty((height, width), dtype=np.float32)
    stripe = min(height, max(size, _STRIPE_BYTES // (field.dtype.itemsize * (width + size))))
    count = -(-height // stripe)
    workers = 1 if height * width < _MIN_THREADED_PIXELS else min(count, _WORKERS)
    if workers == 1:
        _stripes(field, out, size, stripe, 0, 1)
        return out
    futures = [_executor().submit(_stripes, field, out, size, stripe, first, workers)
               for first in range(workers)]
    for future in futures:
        future.result()
    return out
