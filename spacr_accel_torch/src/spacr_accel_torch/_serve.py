"""Which torch search serves a ``nearest_neighbours`` call: one neighbour, ``k`` within a distance,
or Hamming; each exact and equal to the NumPy backend's, so none is declined for its arguments."""

from __future__ import annotations

import numpy as np

from ._runtime import Device

__all__ = ["nearest_neighbours"]


def nearest_neighbours(source: np.ndarray, target: np.ndarray, chunk: int, k: int, max_distance: float | None,
                       metric: str, device: Device) -> tuple[np.ndarray, np.ndarray]:
    """The ``spacr_accel_nearest_neighbours`` answer on ``device``.

    :param source: ``(N, D)`` float32 points, or uint8 packed bits for ``metric="hamming"``.
    :param target: ``(M, D)``, the same kind.
    :param chunk: at most this many source rows per pass.
    :param k: neighbours per source row.
    :param max_distance: the farthest neighbour kept (pruned on the device), or ``None``.
    :param metric: ``"euclidean"`` or ``"hamming"``.
    :param device: where to search.
    :returns: ``(N,)`` int64 and float32 for ``k=1``, ``(N, k)`` otherwise.
    """
    if metric == "hamming":
        from ._hamming import hamming

        index, found = hamming(source, target, chunk, k, max_distance, device)
    elif k == 1 and max_distance is None:
        from ._nearest import nearest

        return nearest(source, target, chunk, device)
    else:
        from ._knearest import k_nearest

        index, found = k_nearest(source, target, chunk, k, max_distance, device)
    return (index[:, 0], found[:, 0]) if k == 1 else (index, found)
