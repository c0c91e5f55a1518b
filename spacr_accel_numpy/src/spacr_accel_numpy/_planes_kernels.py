"""The floor's whole-plane steps: the translation as slice copies, and the spot score as NumPy's own
expression on bands of rows.

THE TRANSLATION WRITES EACH BYTE ONCE. spaCR's ``_translate`` zeroes the whole output and then
copies the moved block over it; here only the strips the block does not cover are zeroed, and the
block is one slice copy (NumPy's copy loop, the machine's ``memcpy`` for a contiguous run), over
every field at once where they share a shift.

THE SCORE IS NumPy's EXPRESSION, BAND BY BAND. Per pixel, NumPy's float32 ``std(axis=0)`` and
``mean(axis=0)`` of a C-ordered stack add the cycles (then the channels) in order, whatever the
other axes hold, as long as more than one pixel is reduced at a time (a single pixel is summed
pairwise): so the expression on a band of rows of at least two pixels gives the whole stack's bits
for those rows. Bands a few megabytes large keep each pass's temporaries in cache instead of
writing ``stack``-sized ones, and the bands are shared between the CPU's threads.

Imported by the hooks of :mod:`._planes` at their first call.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core.toolkit import cpu_threads, run_parts

__all__ = ["spot_score", "translate"]

BAND_BYTES = 1 << 21
"""Bytes of the stack one band of the score reads: its temporaries stay in a core's cache."""


def _move(source: np.ndarray, out: np.ndarray, dy: int, dx: int) -> None:
    """``out`` (fields, H, W) = ``source`` moved by ``(dy, dx)``, zeros where nothing moved in."""
    height, width = source.shape[-2:]
    top, bottom = max(dy, 0), height + min(dy, 0)
    left, right = max(dx, 0), width + min(dx, 0)
    if top >= bottom or left >= right:
        out[...] = 0
        return
    out[:, :top] = 0
    out[:, bottom:] = 0
    out[:, top:bottom, :left] = 0
    out[:, top:bottom, right:] = 0
    out[:, top:bottom, left:right] = source[:, top - dy:bottom - dy, left - dx:right - dx]


def translate(stack: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """Each field of an ``(F, H, W)`` stack moved by its ``(dy, dx)`` row of ``shifts``."""
    out = np.empty_like(stack)
    if bool((shifts == shifts[0]).all()):
        _move(stack, out, int(shifts[0, 0]), int(shifts[0, 1]))
        return out
    for field, (dy, dx) in enumerate(shifts.tolist()):
        _move(stack[field:field + 1], out[field:field + 1], dy, dx)
    return out


def _bands(height: int, width: int, row_bytes: int) -> list[tuple[int, int]]:
    """Bands of rows of about :data:`BAND_BYTES`, each at least two pixels (a band of one pixel
    would be summed pairwise: another order)."""
    rows = max(1, BAND_BYTES // max(row_bytes, 1), -(-2 // width))
    edges = list(range(0, height, rows))
    if height - edges[-1] < rows and (height - edges[-1]) * width < 2:
        edges.pop()  # a last band of one pixel joins the one before it
    return [(start, stop) for start, stop in zip(edges, [*edges[1:], height], strict=True)]


def _score_bands(stack: np.ndarray, out: np.ndarray, bands: list[tuple[int, int]]) -> None:
    for start, stop in bands:
        out[start:stop] = stack[:, :, start:stop].std(axis=0).mean(axis=0)


def spot_score(stack: np.ndarray) -> np.ndarray:
    """float32 ``(Y, X)``: NumPy's ``stack.std(axis=0).mean(axis=0)`` of a C-ordered float32 stack."""
    cycles, channels, height, width = stack.shape
    out = np.empty((height, width), dtype=np.float32)
    bands = _bands(height, width, cycles * channels * width * stack.itemsize)
    threads = min(cpu_threads(), len(bands))
    with np.errstate(all="ignore"):  # inf - inf is NaN here as in NumPy's own call: no warning asked for
        run_parts(_score_bands, [(stack, out, bands[part::threads]) for part in range(threads)])
    return out
