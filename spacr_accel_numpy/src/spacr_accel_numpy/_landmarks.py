"""The landmarks family on the floor: a field's peaks spaced as ``peak_local_max`` spaces them, and
spaCR's triangle matching, both by the toolkit's code (the spacing walk in bounded memory; the
triangles on stacks with the per-item calls' bits).

WHY THE TOOLKIT'S CODE. The spacing's order and the triangles' bits are the peers' (scikit-image's
walk, spaCR's NumPy calls); the toolkit holds them once, with the probe that keeps the stacked
triangles honest, and the floor serves them as they are.
"""

from __future__ import annotations

import numpy as np

from spacr_accel_core import hookimpl
from spacr_accel_core.toolkit import spaced_peaks, triangle_matches


@hookimpl
def spacr_accel_spaced_peaks(points: np.ndarray, values: np.ndarray, shape: tuple[int, int],
                             min_distance: int) -> np.ndarray:
    return np.ascontiguousarray(spaced_peaks(points, values, shape, min_distance))


@hookimpl
def spacr_accel_match_triangles(source: np.ndarray, target: np.ndarray, source_triangles: np.ndarray,
                                target_triangles: np.ndarray, tolerance: float) -> tuple[
                                    np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    votes = triangle_matches(source, target, source_triangles, target_triangles, tolerance)
    return votes.scales, votes.angles, votes.source.reshape(-1, 3, 2), votes.target.reshape(-1, 3, 2)
