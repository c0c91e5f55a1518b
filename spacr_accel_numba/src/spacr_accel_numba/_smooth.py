"""The decode chain's filters on the compiled loops of :mod:`._smooth_kernels`: bands of rows (or
whole fields of a stack) shared between threads, written straight into the result.

Working memory per thread is a few rows (a float64 accumulator and the continued row), whatever
the stack's size: a stack costs its input and its output.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from spacr_accel_core import BackendDeclined
from spacr_accel_core.toolkit import Pass, cpu_threads, gaussian_passes, laplace_terms, run_parts, source_index

from ._filter import _BLOCK_BYTES, _MIN_THREADED_PIXELS

_TAKEN = frozenset(np.dtype(name) for name in ("float32", "uint16", "uint8"))
"""Dtypes the loops read as they are (any other is cast to float32, field by field)."""


def kernels() -> ModuleType:
    """The compiled loops (imports numba and loads or compiles them on first use)."""
    from . import _smooth_kernels

    return _smooth_kernels


def _weights(terms: tuple[tuple[Pass, ...], ...], axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Each term's half-weights along ``axis`` as ``(terms, radius + 1)`` (``(terms, 0)`` when the
    axis is not smoothed), and their signs."""
    chosen = [next((p for p in passes if p.axis == axis), None) for passes in terms]
    if chosen[0] is None:
        return np.zeros((len(terms), 0)), np.ones(len(terms), np.int64)
    return (np.array([p.weights for p in chosen if p is not None], dtype=np.float64),
            np.array([p.sign for p in chosen if p is not None], dtype=np.int64))


def _parts(count: int, height: int, width: int, block: int) -> list[tuple[int, int, int]]:
    """``(field, first_row, stop_row)`` per thread: whole fields when there are enough, else bands
    of each field (each a multiple of ``block`` rows from the field's top)."""
    threads = 1 if count * height * width < _MIN_THREADED_PIXELS else cpu_threads()
    if count >= threads or height * width < _MIN_THREADED_PIXELS:
        return [(field, 0, height) for field in range(count)]
    blocks = -(-height // block)
    per = -(-blocks // threads)
    return [(field, first * block, min(height, (first + per) * block))
            for field in range(count) for first in range(0, blocks, per)]


def _run(band: object, stack: np.ndarray, into: np.ndarray, parts: list[tuple[int, int, int]], *args: object) -> None:
    threads = cpu_threads()

    def share(first: int) -> None:
        for number in range(first, len(parts), threads):
            plane, start, stop = parts[number]
            band(stack[plane], into[plane], *args, start, stop)  # type: ignore[operator]  # a compiled kernel

    run_parts(share, [(first,) for first in range(min(threads, len(parts)))])


def _prepared(field: np.ndarray, out: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if field.dtype not in _TAKEN:
        field = field.astype(np.float32)  # a float64 or int16 field: the contract's float32 cast
    stack = np.ascontiguousarray(field).reshape(-1, *field.shape[-2:])
    if stack.flags.writeable:  # one compiled variant: the read-only views the core passes
        stack = stack.view()
        stack.flags.writeable = False
    result = np.empty(field.shape, np.float32) if out is None else out
    return stack, result, result.reshape(stack.shape)


def gaussian(field: np.ndarray, sigma: tuple[float, float], out: np.ndarray | None, truncate: float, mode: str,
             laplace: bool) -> np.ndarray:
    """``gaussian_filter`` (or ``gaussian_laplace``) of every field of ``(..., H, W)``, SciPy's bits.

    :param field: float32, uint16 or uint8 (read as they are); other dtypes cast to float32.
    :param sigma: ``(rows, columns)``, not both skipped (the core answers that).
    :param out: the float32 result to write into, or ``None``.
    :param truncate: the reach in standard deviations.
    :param mode: ``"reflect"`` or ``"nearest"``.
    :param laplace: the Laplacian of the Gaussian rather than the Gaussian.
    """
    compiled = kernels()
    terms = laplace_terms(sigma, truncate) if laplace else (gaussian_passes(sigma, truncate),)
    down, down_signs = _weights(terms, -2)
    across, across_signs = _weights(terms, -1)
    stack, result, into = _prepared(field, out)
    _, height, width = stack.shape
    rows = source_index(height, max(down.shape[1] - 1, 0), mode)
    columns = source_index(width, max(across.shape[1] - 1, 0), mode)
    signs = np.ascontiguousarray(np.stack([down_signs, across_signs], axis=1))
    _run(compiled.smooth_band, stack, into, _parts(stack.shape[0], height, width, 1), rows, columns,
         down, across, signs)
    return result


def minimum(field: np.ndarray, size: int, out: np.ndarray | None) -> np.ndarray:
    """The ``size`` x ``size`` window minimum of every field (the window clipped to the field,
    which both boundary modes give), a NaN winning, a zero ``+0.0``."""
    compiled = kernels()
    stack, result, into = _prepared(field, out)
    _, height, width = stack.shape
    down, across = min(size // 2, height - 1), min(size // 2, width - 1)
    block = 2 * down + 1
    if 2 * block * width * stack.dtype.itemsize > _BLOCK_BYTES:
        raise BackendDeclined(f"a {size}-row window over {width} columns needs more than "
                              f"{_BLOCK_BYTES >> 20} MiB of block buffers per thread")
    _run(compiled.minimum_band, stack, into, _parts(stack.shape[0], height, width, block), down, across)
    return result


def warm_job() -> object:
    """Compile (or load) each loop on read-only fields of each dtype it takes: for a warm-up."""
    done = []
    for dtype in sorted(_TAKEN, key=str):
        sample = np.zeros((4, 4), dtype=dtype)
        sample.flags.writeable = False
        done += [gaussian(sample, (1.0, 1.0), None, 4.0, "reflect", laplace=False),
                 gaussian(sample, (1.0, 0.0), None, 4.0, "reflect", laplace=True),
                 gaussian(sample, (1.0, 1.0), None, 4.0, "reflect", laplace=True),
                 minimum(sample, 3, None), minimum(np.zeros((16, 4), dtype=dtype), 9, None)]
    return done
