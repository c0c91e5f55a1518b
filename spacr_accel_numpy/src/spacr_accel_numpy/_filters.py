"""The filters family on the floor: the window maximum and minimum by separable, cache-sized,
log-doubling ``np.maximum`` passes, and the Gaussian and its Laplacian by SciPy itself.

WHY NOT scipy.ndimage FOR THE WINDOW: on a 4096 x 4096 float32 field with size 15 scipy takes
~0.73 s on this machine's core, while a copy of the field takes ~10 ms. The maximum over a k-wide
window is separable (rows, then columns) and each 1-D pass is built by doubling: the max over 2w is the max
of two overlapping w-maxima, so width 15 needs four ``np.maximum`` passes per axis instead of 14.
The field is walked in stripes of rows small enough to stay in cache, and the stripes are shared
between threads (NumPy's ufunc loops release the GIL).

The maximum is exact, so the result equals scipy's bit for bit on finite input (the sign of a
zero aside: see docs/decisions.md); ``np.maximum`` propagates NaN, which IS the NaN rule: a window
holding a NaN yields NaN.

WHY STACKS. A plate (or the cycles of a screen) is dozens of 512 x 512 fields; one call per field
pays the dispatch each time, and a field that small is filtered by one thread. Here every field of
a stack is filtered on its own (the window never crosses into the next field) by the stripes, the
fields shared between the threads, into one result.

THE GAUSSIANS ARE SciPy's OWN. The contract's answer IS ``scipy.ndimage``'s (see
:mod:`spacr_accel_core.separable`), and SciPy is this backend's dependency, so the floor asks it
directly, one field at a time, writing into the result: a stack costs its input, its output and
SciPy's buffers for one field (the Laplacian's second term), never a float64 or float32 copy of the
whole stack.
"""

from __future__ import annotations

import threading

import numpy as np

from spacr_accel_core import hookimpl
from spacr_accel_core.toolkit import cpu_threads, run_parts

_STRIPE_BYTES = 3 << 19  # measured best of 0.5-2 MiB on 4096-wide fields: less halo, still cache-sized
_MIN_THREADED_PIXELS = 1 << 18  # below this, a thread hand-off costs more than it saves

_WORKERS = cpu_threads()  # honours OMP_NUM_THREADS, as a Dask worker sets it


def _running_max(
    buffer: np.ndarray, spare: np.ndarray, length: int, size: int, axis: int, out: np.ndarray,
    pick: np.ufunc = np.maximum,
) -> None:
    """Write into ``out`` the max over ``size`` consecutive entries along ``axis`` (0 or 1) of
    the first ``length`` entries of ``buffer``; ``out`` has ``length - size + 1`` along it.

    ``buffer`` is overwritten; ``spare`` is scratch of the same shape. ``pick`` is ``np.minimum``
    for the windowed minimum (exact, and NaN-propagating, like the maximum).
    """
    src, dst = buffer, spare
    width = 1
    while True:
        step = min(width, size - width)  # the last step overlaps two width-maxima to reach size
        valid = length - step
        target = out if width + step == size else dst
        if axis == 0:
            pick(src[:valid], src[step:length], out=target[:valid])
        else:
            pick(src[:, :valid], src[:, step:length], out=target[:, :valid])
        width += step
        if width == size:
            return
        length = valid
        src, dst = dst, src


_KEEP_BYTES = 32 << 20
"""Scratch a thread keeps between calls: enough for every stripe of a 4096-wide field with windows
into the hundreds (four buffers of ~1.5 MiB at size 15); a call that needs more allocates it for
itself and lets it go, so a rare huge window does not pin its buffers for the thread's life."""

_FRESH_BYTES = 1 << 17
"""Below glibc's fixed mmap threshold (128 KiB) a buffer comes from the heap, cheaply, whatever
``MALLOC_TRIM_THRESHOLD_`` says: small fields allocate afresh (carving views from kept scratch
costs more there: 48 against 41 us for a 16 x 16 field)."""

_scratch = threading.local()
"""Per thread: ``buffers``, a list of flat uint8 arrays reused as the stripes' scratch."""


def _scratch_arrays(shapes: tuple[tuple[int, int], ...], dtype: np.dtype) -> list[np.ndarray]:
    """Arrays of ``shapes`` and ``dtype`` carved from this thread's reusable scratch.

    WHY REUSE: allocating the four stripe buffers on every call costs more than the arithmetic when
    the allocator hands them back to the system after each call: under ``MALLOC_TRIM_THRESHOLD_=65536``
    (what a Dask Nanny sets in its workers) every call re-faulted fresh pages, and the 1024 x 1024
    filter ran ~3x slower (see docs/dask.md). Kept per thread, so threads never share a buffer; grown
    as needed; not kept beyond :data:`_KEEP_BYTES` in all.
    """
    sizes = [rows * cols * dtype.itemsize for rows, cols in shapes]
    if max(sizes) < _FRESH_BYTES or sum(sizes) > _KEEP_BYTES:
        return [np.empty(shape, dtype=dtype) for shape in shapes]
    buffers: list[np.ndarray] = list(getattr(_scratch, "buffers", ()))
    buffers += [np.empty(0, dtype=np.uint8)] * (len(sizes) - len(buffers))
    if any(buffer.size < n for buffer, n in zip(buffers, sizes, strict=False)):
        buffers = [buffer if buffer.size >= n else np.empty(n, dtype=np.uint8)
                   for buffer, n in zip(buffers, sizes, strict=False)]
        if sum(buffer.size for buffer in buffers) > _KEEP_BYTES:  # grown in turn by different calls
            buffers = [np.empty(n, dtype=np.uint8) for n in sizes]
        _scratch.buffers = buffers
    return [buffer[:n].view(dtype).reshape(shape) for buffer, n, shape in zip(buffers, sizes, shapes, strict=False)]


def _stripes(field: np.ndarray, out: np.ndarray, radii: tuple[int, int], stripe: int, first: int,
             step: int, pick: np.ufunc = np.maximum) -> None:
    """Filter stripes ``first, first + step, ...`` of ``stripe`` rows each into ``out``.

    :param radii: the window's half-edge along rows (vertical) and columns (horizontal), each
        capped by its own axis: past ``n - 1`` a window already holds every pixel of that axis
        from anywhere, the border repeated, so a wider one changes nothing but the padding
        (a ``(1, 70000)`` field with size 1001 would otherwise pad its single row to 1001 rows).
        A radius of 0 makes that pass a copy.
    :param pick: ``np.maximum``, or ``np.minimum`` for the windowed minimum.
    """
    height, width = field.shape
    down, across = radii
    rows = stripe + 2 * down
    padded, spare, vertical, spare_vertical = _scratch_arrays(
        ((rows, width + 2 * across),) * 2 + ((rows, width),) * 2, field.dtype)
    for start in range(first * stripe, height, step * stripe):
        stop = min(height, start + stripe)
        lo, hi = max(0, start - down), min(height, stop + down)
        top = lo - (start - down)  # rows of edge repetition above the field
        count = hi - lo
        # Horizontal pass over the rows this stripe needs, written straight into the vertical buffer.
        if across:
            padded[:count, across:across + width] = field[lo:hi]
            padded[:count, :across] = field[lo:hi, :1]
            padded[:count, across + width:] = field[lo:hi, width - 1:]
            _running_max(padded[:count], spare[:count], width + 2 * across, 2 * across + 1, 1,
                         vertical[top:top + count], pick)
        else:
            vertical[top:top + count] = field[lo:hi]
        vertical[:top] = vertical[top]
        span = stop - start + 2 * down
        vertical[top + count:span] = vertical[top + count - 1]
        if down:
            _running_max(vertical[:span], spare_vertical[:span], span, 2 * down + 1, 0, out[start:stop], pick)
        else:
            out[start:stop] = vertical[:span]


NARROW = frozenset(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16))
"""Camera dtypes filtered as they are: every value is exact in float32 and the cast keeps order,
so the window maximum commutes with the cast, and the passes move a half or a quarter of the bytes
(a 2048 x 2048 uint16 field, size 5: measured in ``benchmarks/bench_science.py --only
maximum_filter``)."""


def window_maximum(field: np.ndarray, size: int) -> np.ndarray:
    """The ``size`` x ``size`` window maximum of a 2-D field, edges repeated, as float32.

    :param field: non-empty 2-D float32, or one of the :data:`NARROW` integer dtypes, which are
        filtered in their own dtype and cast once, by the last pass writing float32 (bit-identical
        to filtering ``field.astype(float32)``: the cast is exact and monotone).
    :param size: odd window edge, at least 3 (any width: each axis's pass is capped by that axis's
        own length, so a window far wider than a thin field costs the field, not the window).
    :returns: a new float32 array of the field's shape.
    """
    if field.dtype != np.float32 and field.dtype not in NARROW:
        field = field.astype(np.float32)
    height, width = field.shape
    out = np.empty((height, width), dtype=np.float32)
    radii = (min(size // 2, height - 1), min(size // 2, width - 1))  # each axis capped by its own length
    stripe = min(height, max(2 * radii[0] + 1,
                             _STRIPE_BYTES // (field.dtype.itemsize * (width + 2 * radii[1] + 1))))
    count = -(-height // stripe)
    workers = 1 if height * width < _MIN_THREADED_PIXELS else min(count, _WORKERS)
    if workers == 1:
        _stripes(field, out, radii, stripe, 0, 1)
        return out
    run_parts(_stripes, [(field, out, radii, stripe, first, workers) for first in range(workers)])
    return out


def odd_size(size: int) -> int:
    """The window edge the contract filters with: an even ``size`` raised to the next odd."""
    return size + 1 if size % 2 == 0 else size


def _plan(shape: tuple[int, int], size: int, itemsize: int) -> tuple[tuple[int, int], int]:
    """``(radii, stripe)`` for one field, as :func:`window_maximum` cuts it."""
    height, width = shape
    radii = (min(size // 2, height - 1), min(size // 2, width - 1))
    stripe = min(height, max(2 * radii[0] + 1, _STRIPE_BYTES // (itemsize * (width + 2 * radii[1] + 1))))
    return radii, stripe


def _filter_fields(fields: np.ndarray, out: np.ndarray, size: int, first: int, step: int,
                   pick: np.ufunc = np.maximum) -> None:
    """Filter fields ``first, first + step, ...`` of a ``(F, H, W)`` stack into ``out``, one thread."""
    radii, stripe = _plan(fields.shape[1:], size, fields.dtype.itemsize)
    for number in range(first, fields.shape[0], step):
        _stripes(fields[number], out[number], radii, stripe, 0, 1, pick)


def _filter_one(field: np.ndarray, out: np.ndarray, size: int, pick: np.ufunc = np.maximum) -> None:
    """Filter one 2-D field into ``out``, its stripes shared between the threads."""
    radii, stripe = _plan(field.shape, size, field.dtype.itemsize)
    count = -(-field.shape[0] // stripe)
    workers = 1 if field.size < _MIN_THREADED_PIXELS else min(count, _WORKERS)
    run_parts(_stripes, [(field, out, radii, stripe, first, workers, pick) for first in range(workers)])


def maximum_filter_stack(fields: np.ndarray, size: int, out: np.ndarray | None = None,
                         pick: np.ufunc = np.maximum) -> np.ndarray:
    """The windowed maximum of every 2-D field of a ``(..., H, W)`` stack, each on its own, as float32.

    :param fields: ``(..., H, W)`` float32 or one of the floor's narrow camera dtypes (filtered in
        their own dtype, cast once on the last pass); other dtypes are cast to float32 first.
    :param size: the window edge, at least 1 (even raised to odd; 1 copies).
    :param out: a float32 C-contiguous array of the stack's shape to write into (a caller filtering
        the same shape again and again skips a fresh result's page faults); checked by the caller.
    :param pick: ``np.maximum``, or ``np.minimum`` for the windowed minimum.
    :returns: ``out``, or a new float32 array. A maximum of zero may be ``-0.0`` where the field
        holds one (as :func:`window_maximum`: the core adds ``+0.0`` to the result).
    """
    if fields.dtype != np.float32 and fields.dtype not in NARROW:
        fields = fields.astype(np.float32)
    result = np.empty(fields.shape, dtype=np.float32) if out is None else out
    if fields.size == 0:
        return result
    size = odd_size(size)
    if size <= 1:
        np.copyto(result, fields, casting="unsafe")
        result += np.float32(0.0)  # the contract's sign of zero: a maximum of zero is +0.0
        return result
    stack = np.ascontiguousarray(fields).reshape((-1, *fields.shape[-2:]))
    into = result.reshape(stack.shape)
    if stack.shape[0] == 1 or stack[0].size >= _MIN_THREADED_PIXELS:
        for number in range(stack.shape[0]):
            _filter_one(stack[number], into[number], size, pick)
    else:  # small fields: whole fields per thread, no hand-off per stripe
        workers = min(stack.shape[0], _WORKERS)
        run_parts(_filter_fields, [(stack, into, size, first, workers, pick) for first in range(workers)])
    return result


def _fields(field: np.ndarray, out: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    result = np.empty(field.shape, dtype=np.float32) if out is None else out
    return result, field.reshape(-1, *field.shape[-2:]), result.reshape(-1, *field.shape[-2:])


def gaussian_stack(field: np.ndarray, sigma: tuple[float, float], out: np.ndarray | None, truncate: float,
                   mode: str, laplace: bool) -> np.ndarray:
    """``scipy.ndimage.gaussian_filter`` (or ``gaussian_laplace``) of every field of ``(..., H, W)``.

    :param field: float32 or a camera dtype (each field cast to float32 on its own).
    :param sigma: ``(rows, columns)`` standard deviations.
    :param out: the float32 result to write into, or ``None``.
    :param truncate: the reach in standard deviations.
    :param mode: ``"reflect"`` or ``"nearest"``.
    :param laplace: the Laplacian of the Gaussian rather than the Gaussian.
    :returns: ``out``, or a new float32 array.
    """
    from scipy import ndimage  # a few hundred ms on first import: only when a filter is asked for

    result, fields, into = _fields(field, out)
    run = ndimage.gaussian_laplace if laplace else ndimage.gaussian_filter
    for number in range(fields.shape[0]):
        plane = fields[number] if fields.dtype == np.float32 else fields[number].astype(np.float32)
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN, as SciPy says
            run(plane, sigma, output=into[number], mode=mode, truncate=truncate)
    return result


# ---- the family's hooks ---------------------------------------------------------------------------


@hookimpl
def spacr_accel_maximum_filter(field: np.ndarray, size: int, out: np.ndarray | None) -> np.ndarray:
    if field.ndim == 2 and out is None:
        return window_maximum(field, size)
    return maximum_filter_stack(field, size, out)


@hookimpl
def spacr_accel_minimum_filter(field: np.ndarray, size: int, out: np.ndarray | None) -> np.ndarray:
    return maximum_filter_stack(field, size, out, np.minimum)


@hookimpl
def spacr_accel_gaussian_filter(field: np.ndarray, sigma: tuple[float, float], out: np.ndarray | None,
                                truncate: float, mode: str) -> np.ndarray:
    return gaussian_stack(field, sigma, out, truncate, mode, laplace=False)


@hookimpl
def spacr_accel_gaussian_laplace(field: np.ndarray, sigma: tuple[float, float], out: np.ndarray | None,
                                 truncate: float, mode: str) -> np.ndarray:
    return gaussian_stack(field, sigma, out, truncate, mode, laplace=True)
