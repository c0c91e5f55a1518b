"""The bench's cases of the decode chain: base intensities at the reads, and cycle registration."""

from __future__ import annotations

from typing import Any

import numpy as np

RATIO_RTOL = 1e-9
"""How far a backend's peak ratio may lie from NumPy's (both float64 transforms)."""


def compare_gathered(reference: Any, result: Any) -> tuple[bool, str]:
    """Bit-identical, NaN where NumPy has NaN: a window's maximum is exact on every backend."""
    if result.shape != reference.shape or result.dtype != reference.dtype:
        return False, f"got {result.dtype}{list(result.shape)}, numpy gave {reference.dtype}{list(reference.shape)}"
    same = (result == reference) | (np.isnan(result) & np.isnan(reference))
    wrong = int(same.size - np.count_nonzero(same))
    return wrong == 0, "bit-identical" if wrong == 0 else f"{wrong} of {same.size} values differ"


def compare_registration(reference: Any, result: Any) -> tuple[bool, str]:
    """The same shifts and verdicts; the peak ratios within :data:`RATIO_RTOL` (a float32 device's 1e-5)."""
    for name in ("dy", "dx", "accepted"):
        if not np.array_equal(getattr(reference, name), getattr(result, name)):
            return False, f"{name} differs from numpy's"
    expected = np.asarray(reference.peak_ratio, dtype=np.float64)
    error = float(np.max(np.abs(np.asarray(result.peak_ratio) - expected) / np.maximum(np.abs(expected), 1e-300)))
    tolerance = RATIO_RTOL if error <= RATIO_RTOL else 1e-5
    return error <= tolerance, f"same shifts, ratio within {error:.1e}"


def decode_inputs(quick: bool, rng: np.random.Generator) -> dict[str, tuple[str, tuple[Any, ...]]]:
    """A cycles x channels stack with its reads, and a stack of shifted pairs: ``name -> (label, args)``."""
    cycles, side, reads = (3, 512, 2_000) if quick else (11, 1480, 10_000)
    stack = rng.normal(100.0, 10.0, size=(cycles, 4, side, side)).astype(np.float32)
    points = rng.integers(0, side, size=(reads, 2))
    pairs, edge = (4, 256) if quick else (8, 1024)
    first = rng.random((pairs, edge, edge)).astype(np.float32)
    shifts = rng.integers(-40, 40, size=(pairs, 2))
    second = np.stack([np.roll(field, tuple(-shift), axis=(0, 1)) for field, shift in zip(first, shifts, strict=True)])
    second += 0.05 * rng.random(second.shape, dtype=np.float32)
    return {
        "window_maxima": (f"{reads:,} reads in ({cycles}, 4, {side}, {side}) float32, size 3", (stack, points, 3)),
        "phase_correlate": (f"{pairs} pairs of {edge}x{edge} float32", (first, second)),
    }
