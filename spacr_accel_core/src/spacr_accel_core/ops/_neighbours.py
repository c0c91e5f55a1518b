"""The neighbours family: the exact k nearest (Euclidean or Hamming), and the mutual pairs built of
two such searches.

``nearest_neighbours`` is declared here once (its hook's specification beside it);
``mutual_nearest_neighbours`` is composed of two of its dispatches, not an operation of its own.
Re-exported by :mod:`spacr_accel_core.ops`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import reference
from ..contract._markers import hookspec
from ..dispatch._registry import REGISTRY
from ..operations._adapters import (
    adapt_neighbours,
)
from ..operations._checks import (
    _F32,
    _I64,
    _options,
    _points,
    _read_only,
    _widths_and_chunk,
    distance_bound,
    metric_name,
    neighbour_count,
    packed_bits,
)
from ..operations._inputs import (
    nearest_bench,
    small_points,
)
from ..operations._operations import OwnGraph, operation
from ..operations._results import (
    agree_nearest,
    check_neighbours,
)

CHUNK = 4096
"""Default rows of ``source`` per pass of :func:`nearest_neighbours` (an upper bound; backends
may take fewer to stay inside their memory budget, and the answer never depends on it)."""


def _point_sets(source: Any, target: Any, metric: str,
                names: tuple[str, str] = ("source", "target")) -> tuple[np.ndarray, np.ndarray]:
    """Both point sets as the backends receive them: C-contiguous float32 and finite (Euclidean),
    or C-contiguous uint8 rows of packed bits (Hamming). ``names`` are the caller's own argument
    names, so a message names what the user passed."""
    src = _points(source, names[0])
    tgt = _points(target, names[1])
    if metric == "hamming":
        packed_bits(src.dtype, names[0])
        packed_bits(tgt.dtype, names[1])
        return np.ascontiguousarray(src), np.ascontiguousarray(tgt)
    with np.errstate(over="ignore"):  # an out-of-range coordinate becomes inf, refused just below
        src = np.ascontiguousarray(src, dtype=_F32)
        tgt = np.ascontiguousarray(tgt, dtype=_F32)
    for name, points in zip(names, (src, tgt), strict=True):
        if not np.isfinite(points).all():
            raise ValueError(f"{name} holds NaN or infinite coordinates (after conversion to float32)")
    return src, tgt


@hookspec
def spacr_accel_nearest_neighbours(  # type: ignore[empty-body]  # a specification has no body
    source: np.ndarray, target: np.ndarray, chunk: int, k: int, max_distance: float | None, metric: str
) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``source`` the ``k`` nearest rows of ``target``, exactly, ties to the lowest index.

    Euclidean "nearest" is decided by the float64 sum, over the coordinates in order, of the
    squared differences of the float32 coordinates; Hamming by the count of differing bits
    (:mod:`spacr_accel_core.reference` holds the plain definitions).

    :param source: ``(N, D)``, C-contiguous, ``N >= 1``, ``D >= 1``: float32 and finite for the
        Euclidean metric, uint8 packed bits for Hamming.
    :param target: ``(M, D)``, the same dtype, ``M >= 1``.
    :param chunk: an upper bound on source rows per pass; the answer must not depend on it.
    :param k: optional (a plugin without it serves ``k=1`` only): neighbours per source row.
    :param max_distance: optional (without it the core applies the bound to the answer): a
        neighbour whose float32 distance exceeds it is ``-1`` with distance ``inf``.
    :param metric: optional (without it, Euclidean only): ``"euclidean"`` or ``"hamming"``.
    :returns: int64 indices and float32 distances, of shape ``(N,)`` for ``k=1`` and ``(N, k)``
        otherwise, nearest first; a missing neighbour (``k > M``, or beyond ``max_distance``) is
        ``-1`` with distance ``inf``.
    """


@operation(
    spec=spacr_accel_nearest_neighbours,
    task="Cell matching (nearest_neighbours)",
    check=check_neighbours,
    agree=agree_nearest,
    reference=reference.nearest_neighbours,
    small=small_points,
    bench=nearest_bench,
    adapt=adapt_neighbours,
    optional={"chunk": None, "k": 1, "max_distance": None, "metric": "euclidean"},
    dask=OwnGraph(),
)
def nearest_neighbours(
    source: Any,
    target: Any,
    *,
    gpu: Any = True,
    backend: str | None = None,
    chunk: Any = CHUNK,
    k: Any = 1,
    max_distance: Any = None,
    metric: str = "euclidean",
) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``source``, the closest rows of ``target``: exact, ties to the lowest index.

    CHUNKED, ALWAYS: a well can carry a hundred thousand nuclei and the full distance matrix
    between two such sets is 40 GB, so every backend bounds its working set however large the
    well is. Ties go to the lower index on every backend, so a caller pairing mutual nearest
    neighbours gets the same pairs whatever ran. Coordinates are taken as float32 (as spaCR
    did); "nearest" is decided exactly in float64 on those values.

    :param source: ``(N, D)`` points (uint8 packed bits for ``metric="hamming"``).
    :param target: ``(M, D)`` points, the same kind.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :param chunk: at most this many source rows per pass; the answer does not depend on it.
    :param k: neighbours per source row: the ratio test's nearest and second nearest is ``k=2``.
    :param max_distance: a neighbour farther than this (compared on the returned float32
        distance) is ``-1`` with distance ``inf``: a cell that left the field is matched to nobody
        rather than to a stranger. It also prunes the search.
    :param metric: ``"euclidean"``, or ``"hamming"`` for binary descriptors (ORB): the distance is
        the count of differing bits, as a float32 holding an exact integer.
    :returns: ``(indices, distances)``: int64 and float32, of shape ``(N,)`` for ``k=1`` and
        ``(N, k)`` otherwise, nearest first, equal distances in index order. A neighbour missing
        (fewer than ``k`` targets, an empty ``target``, or beyond ``max_distance``) is ``-1``/``inf``.
    :raises ValueError: not 2-D, not the same width, no coordinates, NaN or infinite
        coordinates, ``chunk < 1``, ``k < 1``, a negative or NaN ``max_distance``, an unknown metric.
    :raises TypeError: non-numeric points, a non-integer chunk or k, or Hamming points not uint8.
    """
    use_gpu = _options(gpu, backend)
    kind = metric_name(metric)
    count = neighbour_count(k)
    bound = distance_bound(max_distance)
    src, tgt = _point_sets(source, target, kind)
    rows = _widths_and_chunk(src.shape, tgt.shape, chunk)
    n, m = src.shape[0], tgt.shape[0]
    if n == 0 or m == 0:
        REGISTRY.record_served("nearest_neighbours")
        shape = (n,) if count == 1 else (n, count)
        return np.full(shape, -1, dtype=_I64), np.full(shape, np.inf, dtype=_F32)
    return REGISTRY.dispatch(  # type: ignore[no-any-return]  # the check guarantees the pair
        "nearest_neighbours", {"source": _read_only(src), "target": _read_only(tgt), "chunk": rows, "k": count,
                               "max_distance": bound, "metric": kind}, gpu=use_gpu,
        backend=backend, expected=(n, m, count, bound is not None or count > m))


def mutual_nearest_neighbours(first: Any, second: Any, *, max_distance: Any = None,
                              metric: str = "euclidean", gpu: Any = True,
                              backend: str | None = None) -> np.ndarray:
    """The pairs of points that are each other's nearest: how spaCR matches cells between cycles.

    Exactly the pairs the two one-way calls agree on: ``(i, j)`` with ``j`` the nearest of
    ``first[i]`` in ``second`` and ``i`` the nearest of ``second[j]`` in ``first``, both within
    ``max_distance``. Each direction is one :func:`nearest_neighbours` dispatch (ties to the lowest
    index on every backend, so the pairs never depend on what ran).

    :param first: ``(N, D)`` points (uint8 packed bits for ``metric="hamming"``).
    :param second: ``(M, D)`` points, the same kind.
    :param max_distance: a pair farther apart than this is no pair.
    :param metric: ``"euclidean"`` or ``"hamming"``.
    :param gpu: ``False`` keeps it on the CPU.
    :param backend: force one backend by name; its failure is raised.
    :returns: int64 pairs ``(P, 2)`` sorted by the first index.
    :raises ValueError: as :func:`nearest_neighbours`.
    :raises TypeError: as :func:`nearest_neighbours`.
    """
    use_gpu = _options(gpu, backend)
    kind = metric_name(metric)
    bound = distance_bound(max_distance)
    a, b = _point_sets(first, second, kind, ("first", "second"))  # checked once, for both directions
    _widths_and_chunk(a.shape, b.shape, CHUNK, ("first", "second"))
    if a.shape[0] == 0 or b.shape[0] == 0:
        REGISTRY.record_served("mutual_nearest_neighbours")
        return np.empty((0, 2), dtype=_I64)
    served = []
    directions = ((a, b), (b, a))
    found = []
    for source, target in directions:
        index, _ = REGISTRY.dispatch(
            "nearest_neighbours", {"source": _read_only(source), "target": _read_only(target), "chunk": CHUNK, "k": 1,
                                   "max_distance": bound, "metric": kind}, gpu=use_gpu,
            backend=backend, expected=(source.shape[0], target.shape[0], 1, bound is not None))
        found.append(index)
        served.append(REGISTRY.last_dispatch())
    forward, backward = found
    matched = np.flatnonzero(forward >= 0)
    mutual = matched[backward[forward[matched]] == matched]
    names = list(dict.fromkeys(d.backend for d in served if d is not None))
    declined = tuple(dict.fromkeys(row for d in served if d is not None for row in d.declined))
    waiting = tuple(dict.fromkeys(name for d in served if d is not None for name in d.waiting))
    REGISTRY.record_served("mutual_nearest_neighbours", ", ".join(names), declined, waiting)
    return np.stack([mutual, forward[mutual]], axis=1).astype(_I64, copy=False).reshape(-1, 2)
