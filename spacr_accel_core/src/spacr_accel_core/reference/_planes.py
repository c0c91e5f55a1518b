"""The planes family's references: spaCR's translation of each field of a stack by whole pixels,
pixel by pixel, and its read score by its own NumPy expression.
"""

from __future__ import annotations

import warnings

import numpy as np


def translate(stack: object, shifts: object) -> np.ndarray:
    """Each field moved by its whole-pixel ``(dy, dx)`` (``shifts`` broadcast against the leading
    axes), pixel by pixel: ``out[..., y, x] = stack[..., y - dy, x - dx]`` where that pixel exists,
    else zero; the dtype kept."""
    data = np.asarray(stack)
    moves = np.broadcast_to(np.asarray(shifts), (*data.shape[:-2], 2))
    height, width = data.shape[-2:]
    out = np.zeros_like(data)
    for index in np.ndindex(*data.shape[:-2]):
        dy, dx = (max(-extent, min(extent, int(value)))
                  for value, extent in zip(moves[index], (height, width), strict=True))
        for y in range(height):
            if 0 <= y - dy < height:
                for x in range(width):
                    if 0 <= x - dx < width:
                        out[(*index, y, x)] = data[(*index, y - dy, x - dx)]
    return out


def spot_score(stack: object) -> np.ndarray:
    """spaCR's read score, by its own NumPy expression on the float32 stack in C order: the standard
    deviation over the cycles, then the mean over the channels (one cycle: the standard deviation
    over the channels). NumPy's float32 reductions along the first axis of a C-ordered array add
    the cycles in order, pixel by pixel (a single pixel is summed pairwise): that order is the answer."""
    data = np.ascontiguousarray(stack, dtype=np.float32)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # an empty axis: NaN, as NumPy answers it
        score = data[0].std(axis=0) if data.shape[0] == 1 else data.std(axis=0).mean(axis=0)
    return np.asarray(score, dtype=np.float32)
