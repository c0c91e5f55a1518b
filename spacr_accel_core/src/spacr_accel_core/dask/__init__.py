"""The operations on ``dask.array``: a whole plate, or a mosaic no single machine holds.

Installed by the ``dask`` extra (``pip install spacr-accel[dask]``) and imported only when asked
for: ``import spacr_accel_core`` and ``import spacr_accel_core.ops`` import no dask.

DASK IS THE ENGINE. Each function builds a graph whose block tasks call the in-memory
:mod:`spacr_accel_core.ops` on the worker that computes them, so every worker resolves its own
device and falls through on its own faults (a worker beside a busy card runs NumPy while the others
keep their GPUs). The keywords are those of :mod:`spacr_accel_core.ops` (``gpu=``, ``backend=``,
``chunk=``) and so are the error words: shapes and dtypes are checked before any graph is built,
values (NaN coordinates) by :mod:`spacr_accel_core.ops` itself inside the compute.

WHICH BACKEND SERVED THE BLOCKS is tallied per worker process: :func:`tally` around a compute, or
:func:`blocks_served` at any time, gathers it from the workers (docs/dask.md).

THE PACKAGE BY FAMILY. This module is the public face; the graphs live beside it, and all but the
first two are imported only when their operation is asked for:

- ``_blocks``: the shared machinery (the per-process tally and its gathering, the checks made before
  a graph is built, the block helpers) and the graphs of ``maximum_filter``, ``matmul``,
  ``nearest_neighbours`` and ``local_maxima``.
- ``_filters``: the window minimum and maximum in every mode, the Gaussian and its Laplacian.
- ``_decode``: the decode chain's ``window_maxima`` and ``phase_correlate``.
- ``_points``: ``attribute_reads`` and ``count_within``.
- ``_planes``: ``translate`` and ``spot_score``.
- ``_levels``: ``percentiles`` and ``rescale_fields``.
- ``_rows``: the graph of any operation whose row declares ``dask=WholeFields()`` (a field at a
  time, the answer of the stack's shape), built from the row alone: such an operation, the core's
  or a third party's, is ``spacr_accel_core.dask.<name>`` with no Dask code of its own.

The package imports the faces (``ops``) and the folders below them; nothing in the core imports it.
"""

from __future__ import annotations

from typing import Any

import dask.array as da

from ..ops import CHUNK
from . import _blocks, _filters
from ._blocks import BlocksServed, Tally, blocks_served, forget, tally

# The operations on Dask, as in memory: spacr_accel_core.ops (its table lists every primitive).

__all__ = [
    "CHUNK",
    "BlocksServed",
    "Tally",
    "attribute_reads",
    "blocks_served",
    "count_within",
    "forget",
    "gaussian_filter",
    "gaussian_laplace",
    "local_maxima",
    "matmul",
    "maximum_filter",
    "minimum_filter",
    "nearest_neighbours",
    "percentiles",
    "phase_correlate",
    "rescale_fields",
    "spot_score",
    "tally",
    "translate",
    "window_maxima",
]


def maximum_filter(field: Any, size: Any, *, mode: str = "nearest", gpu: bool = True,
                   backend: str | None = None) -> da.Array:
    """The maximum of each ``size`` x ``size`` window, field by field: BIT-IDENTICAL to
    :func:`spacr_accel_core.ops.maximum_filter` on each whole field, for every chunking.

    Built on ``map_overlap`` with the halo the window needs along each axis and the border pixel
    repeated at the array's edge, so a block sees exactly the pixels its windows cover; the NaN rule
    and the sign of zero are those of ``ops``, which runs each block. A window wider than a chunk
    is served by dask rechunking to chunks at least as wide as the halo (the halo itself never
    exceeds the field: past ``2 * length - 1`` a window already covers the whole axis).

    :param field: a 2-D dask array (a mosaic), or a stack ``(..., H, W)`` of fields filtered one by
        one (a plate: chunk it one or a few fields per block, the last two axes whole, and no halo
        is exchanged at all). A NumPy array is wrapped with ``dask.array.asarray``.
    :param size: the window edge in pixels, as in ``ops``: even sizes are raised to the next odd,
        ``size <= 1`` is a float32 copy.
    :param mode: ``"nearest"`` or ``"reflect"``, as in ``ops`` (the same answer).
    :param gpu: ``False`` keeps every worker on the CPU.
    :param backend: force one backend by name on every worker; its failure is raised from the compute.
    :returns: a lazy float32 dask array of ``field``'s shape and chunks.
    :raises ValueError: ``field`` has fewer than 2 dimensions or unknown chunk sizes, ``size`` is
        negative, or ``mode`` is unknown.
    :raises TypeError: ``field`` is not numeric, or ``size`` is not an integer.
    """
    if mode != "nearest":
        return _filters.extreme("maximum_filter", field, size, mode=mode, gpu=gpu, backend=backend)
    return _blocks.maximum_filter(field, size, gpu=gpu, backend=backend)


def matmul(first: Any, second: Any, *, gpu: bool = True, backend: str | None = None) -> da.Array:
    """``first @ second`` block by block: a tall operand chunked by rows times one small operand.

    ``second`` goes into the graph as a single key, so the scheduler ships it once to each worker
    (and workers share it peer to peer) instead of pickling it into every task. Each block's product
    is ``ops.matmul`` of that block: equal to ``ops.matmul`` on the whole to float32 rounding
    (BLAS sums a row in an order that can depend on how many rows it is handed; exact whenever
    the products are, e.g. integer-valued inputs).

    :param first: a dask array of at least 2-D, ``(..., rows, columns)``, chunked along the rows
        (the columns are brought into one chunk: they are the inner axis every row needs whole).
    :param second: a 1-D ``(columns,)`` or 2-D ``(columns, k)`` operand, in memory (NumPy) or a
        dask array (brought into one chunk).
    :param gpu: ``False`` keeps every worker on the CPU.
    :param backend: force one backend by name on every worker.
    :returns: a lazy float32 dask array chunked like ``first``'s rows.
    :raises ValueError: an operand has the wrong rank, or the inner axes differ (``ops``' words).
    :raises TypeError: an operand is not real-numeric.
    """
    return _blocks.matmul(first, second, gpu=gpu, backend=backend)


def nearest_neighbours(
    source: Any,
    target: Any,
    *,
    gpu: bool = True,
    backend: str | None = None,
    chunk: Any = CHUNK,
    k: Any = 1,
    max_distance: Any = None,
    metric: str = "euclidean",
) -> tuple[da.Array, da.Array]:
    """For each row of ``source``, the closest row of ``target``: the indices and distances of
    :func:`spacr_accel_core.ops.nearest_neighbours`, exactly (ties to the lowest index).

    ``target`` is converted to float32 once, here, and goes into the graph as a single key: each
    worker receives it once, however many blocks of ``source`` it computes; a task carries only its
    block of ``source`` and a reference to that key.

    :param source: ``(N, D)`` points, a dask array chunked by rows (``D`` is brought into one chunk).
    :param target: ``(M, D)`` points, in memory (NumPy) or a dask array (brought into one chunk).
    :param gpu: ``False`` keeps every worker on the CPU.
    :param backend: force one backend by name on every worker.
    :param chunk: at most this many source rows per pass inside a block, as in ``ops``.
    :param k: neighbours per source row, as in ``ops`` (``(N, k)`` results for ``k > 1``).
    :param max_distance: farther neighbours are ``-1``/``inf``, as in ``ops``.
    :param metric: ``"euclidean"``, or ``"hamming"`` for uint8 packed bits, as in ``ops``.
    :returns: ``(indices, distances)``: lazy int64 and float32 dask arrays chunked like ``source``'s
        rows; compute them together (``dask.compute(i, d)``) to search once.
    :raises ValueError: not 2-D, not the same width, no coordinates, or ``chunk < 1``, at once;
        NaN or infinite coordinates from the compute, with ``ops``' words.
    :raises TypeError: non-numeric points or a non-integer chunk.
    """
    return _blocks.nearest_neighbours(source, target, gpu=gpu, backend=backend, chunk=chunk, k=k,
                                    max_distance=max_distance, metric=metric)


def local_maxima(field: Any, size: Any, *, threshold: Any = None, gpu: bool = True,
                 backend: str | None = None) -> da.Array:
    """The peaks of a mosaic or a plate, as coordinates in the WHOLE array: exactly the rows of
    :func:`spacr_accel_core.ops.local_maxima` on it, for every chunking.

    Each block is searched with the halo its windows need along the rows and the border repeated
    at the array's edge; only the peaks of a block's own rows are kept, so a peak on a block edge
    is found exactly once. Blocks hold whole rows (the last axis is brought into one chunk), so
    the blocks' peaks, in block order, are already in row-major order.

    :param field: a 2-D dask array (a mosaic) or a stack ``(..., H, W)`` (a plate).
    :param size: the window edge, as in ``ops``.
    :param threshold: only pixels above it, as in ``ops``.
    :param gpu: ``False`` keeps every worker on the CPU.
    :param backend: force one backend by name on every worker.
    :returns: a lazy int64 dask array ``(P, field.ndim)`` of unknown length (``compute()`` it).
    :raises ValueError: ``field`` has fewer than 2 dimensions or unknown chunk sizes, ``size`` is
        negative, or the threshold is NaN.
    :raises TypeError: ``field`` is not numeric, or ``size`` or ``threshold`` is not a number.
    """
    return _blocks.local_maxima(field, size, threshold=threshold, gpu=gpu, backend=backend)


# ---- the decode chain's filters ------------------------------------------------------------------


def minimum_filter(field: Any, size: Any, *, mode: str = "nearest", gpu: bool = True,
                   backend: str | None = None) -> da.Array:
    """The minimum of each ``size`` x ``size`` window, field by field: BIT-IDENTICAL to
    :func:`spacr_accel_core.ops.minimum_filter` on each whole field, for every chunking.

    As :func:`maximum_filter`: each block with the halo the window reaches (``size // 2``, capped
    at the axis's length - 1), the border repeated at the array's edge (the answer of either mode).

    :param field: a 2-D dask array (a mosaic) or a stack ``(..., H, W)`` (a plate).
    :param size: the window edge in pixels, as in ``ops``.
    :param mode: ``"nearest"`` or ``"reflect"``, as in ``ops``.
    :param gpu: ``False`` keeps every worker on the CPU.
    :param backend: force one backend by name on every worker.
    :returns: a lazy float32 dask array of ``field``'s shape and chunks.
    :raises ValueError: as :func:`maximum_filter`.
    :raises TypeError: as :func:`maximum_filter`.
    """
    return _filters.extreme("minimum_filter", field, size, mode=mode, gpu=gpu, backend=backend)


def gaussian_filter(field: Any, sigma: Any, *, truncate: Any = 4.0, mode: str = "reflect", gpu: bool = True,
                    backend: str | None = None) -> da.Array:
    """The Gaussian of a mosaic or a plate: BIT-IDENTICAL to :func:`spacr_accel_core.ops.gaussian_filter`
    (and so to SciPy) on each whole field, for every chunking.

    Each block is filtered with a halo of the kernel's reach along each axis (``int(truncate *
    sigma + 0.5)`` pixels), the array's edge continued by ``mode`` (dask's ``reflect`` is SciPy's);
    an axis held whole by every block exchanges no halo, and one shorter than the reach is handed
    to each block whole.

    :param field: a 2-D dask array (a mosaic) or a stack ``(..., H, W)`` (a plate: chunk it a few
        fields per block, the last two axes whole, and no halo is exchanged).
    :param sigma: a number or ``(rows, columns)``, as in ``ops``.
    :param truncate: the reach in standard deviations, as in ``ops``.
    :param mode: ``"reflect"`` or ``"nearest"``.
    :param gpu: ``False`` keeps every worker on the CPU.
    :param backend: force one backend by name on every worker.
    :returns: a lazy float32 dask array of ``field``'s shape and chunks.
    :raises ValueError: as :func:`spacr_accel_core.ops.gaussian_filter`, or unknown chunk sizes.
    :raises TypeError: as :func:`spacr_accel_core.ops.gaussian_filter`.
    """
    return _filters.smoothing("gaussian_filter", field, sigma, truncate=truncate, mode=mode, gpu=gpu,
                                   backend=backend)


def gaussian_laplace(field: Any, sigma: Any, *, truncate: Any = 4.0, mode: str = "reflect", gpu: bool = True,
                     backend: str | None = None) -> da.Array:
    """The Laplacian of the Gaussian of a mosaic or a plate: BIT-IDENTICAL to
    :func:`spacr_accel_core.ops.gaussian_laplace` on each whole field, for every chunking (the
    halo and the edge as :func:`gaussian_filter`: both terms reach as far).

    :param field: a 2-D dask array (a mosaic) or a stack ``(..., H, W)`` (a plate).
    :param sigma: a number or ``(rows, columns)``, as in ``ops``.
    :param truncate: the reach in standard deviations.
    :param mode: ``"reflect"`` or ``"nearest"``.
    :param gpu: ``False`` keeps every worker on the CPU.
    :param backend: force one backend by name on every worker.
    :returns: a lazy float32 dask array of ``field``'s shape and chunks.
    :raises ValueError: as :func:`gaussian_filter`.
    :raises TypeError: as :func:`gaussian_filter`.
    """
    return _filters.smoothing("gaussian_laplace", field, sigma, truncate=truncate, mode=mode, gpu=gpu,
                                   backend=backend)


# ---- the decode chain: base intensities and registration ----------------------------------------


def window_maxima(stack: Any, points: Any, size: Any, *, gpu: bool = True, backend: str | None = None) -> da.Array:
    """The base intensities of reads on a chunked stack: exactly :func:`spacr_accel_core.ops.window_maxima`
    on the whole stack, for every chunking.

    ``points`` are the WHOLE field's ``(y, x)`` (as ``local_maxima`` on Dask returns them). Each
    block is grown by the window's radius along the rows and columns (the border repeated at the
    array's edge) and reads the points centred in its own pixels; the values are put back in the
    points' order.

    :param stack: a dask array ``(..., H, W)``, chunked any way.
    :param points: ``(N, 2)`` integer coordinates inside the field (in memory).
    :param size: the window edge, as in ``ops``.
    :param gpu: ``False`` keeps every worker on the CPU.
    :param backend: force one backend by name on every worker.
    :returns: a lazy float32 dask array ``(N, *stack.shape[:-2])``.
    :raises ValueError: as ``ops.window_maxima``, or unknown chunk sizes.
    :raises TypeError: as ``ops.window_maxima``.
    """
    from . import _decode

    return _decode.window_maxima(stack, points, size, gpu=gpu, backend=backend)


def phase_correlate(first: Any, second: Any, *, expected: Any = (0, 0), tolerance: Any = None,
                    min_peak_ratio: Any = 3.0, gpu: bool = True, backend: str | None = None) -> Any:
    """The registrations of a stack of pairs: :func:`spacr_accel_core.ops.phase_correlate` per block of pairs.

    A pair is never split: the last two axes are brought whole into every block (rechunked if
    they were not), and each block of pairs is one call on the worker that computes it.

    :param first: a dask array ``(..., H, W)`` of reference fields.
    :param second: the fields to register against them, the same shape.
    :param expected: as in ``ops``.
    :param tolerance: as in ``ops``.
    :param min_peak_ratio: as in ``ops``.
    :param gpu: ``False`` keeps every worker on the CPU.
    :param backend: force one backend by name on every worker.
    :returns: a :class:`~spacr_accel_core.Registration` whose fields are lazy dask arrays of the
        leading shape (0-d for two 2-D fields), its ``backend`` ``"dask"`` (:func:`blocks_served`
        says who served the blocks).
    :raises ValueError: as ``ops.phase_correlate`` (finite pixels are checked in the blocks).
    :raises TypeError: as ``ops.phase_correlate``.
    """
    from . import _decode

    return _decode.phase_correlate(first, second, expected=expected, tolerance=tolerance,
                                        min_peak_ratio=min_peak_ratio, gpu=gpu, backend=backend)


def translate(stack: Any, shifts: Any, *, gpu: bool = True, backend: str | None = None) -> da.Array:
    """Each field moved by whole pixels, zeros where nothing moved in: exactly
    :func:`spacr_accel_core.ops.translate` on the whole stack, for every chunking.

    Each block holds whole fields (the last two axes brought into one chunk, rechunked if they were
    not) and moves them by their own shifts: ``shifts`` (in memory) is checked and broadcast once
    against the whole stack's leading axes, and each block reads its fields' rows of it.

    :param stack: a dask array ``(..., H, W)`` of any real dtype, which the answer keeps.
    :param shifts: one ``(dy, dx)`` pair, or pairs shaped ``(..., 2)`` broadcasting against the
        stack's leading axes, as in ``ops``.
    :param gpu: ``False`` keeps every worker on the CPU.
    :param backend: force one backend by name on every worker.
    :returns: a lazy dask array of the stack's shape and dtype.
    :raises ValueError: as ``ops.translate``, or unknown chunk sizes.
    :raises TypeError: as ``ops.translate``.
    """
    from . import _planes

    return _planes.translate(stack, shifts, gpu=gpu, backend=backend)


def spot_score(stack: Any, *, gpu: bool = True, backend: str | None = None) -> da.Array:
    """The read score of a chunked ``(cycles, channels, Y, X)`` stack: exactly
    :func:`spacr_accel_core.ops.spot_score` on the whole stack, for every chunking of the rows and
    columns (each pixel's score reads only its own cycles and channels, which every block holds whole).

    :param stack: a dask array ``(cycles, channels, Y, X)`` of real numbers (taken as float32).
    :param gpu: ``False`` keeps every worker on the CPU.
    :param backend: force one backend by name on every worker.
    :returns: a lazy float32 dask array ``(Y, X)``, chunked as the stack's rows and columns.
    :raises ValueError: not four-dimensional, or unknown chunk sizes.
    :raises TypeError: not real numbers.
    """
    from . import _planes

    return _planes.spot_score(stack, gpu=gpu, backend=backend)


def attribute_reads(peaks: Any, centroids: Any, areas: Any, *, footprint: Any = 10.0, tie: Any = 1.0,
                    gpu: bool = True, backend: str | None = None) -> tuple[da.Array, da.Array]:
    """Each read's owner and refusal, the reads chunked: exactly
    :func:`spacr_accel_core.ops.attribute_reads` on all the reads, for every chunking of them (a
    read's owner depends on the objects alone, which every block is given whole).

    :param peaks: a dask array ``(N, 2)`` of read positions, chunked along the reads.
    :param centroids: ``(M, 2)`` object centroids, in memory.
    :param areas: ``(M,)`` object areas, in memory.
    :param footprint: as in ``ops``.
    :param tie: as in ``ops``.
    :param gpu: ``False`` keeps every worker on the CPU.
    :param backend: force one backend by name on every worker.
    :returns: lazy ``(owner, ambiguous)``: int64 and bool ``(N,)``, chunked as the reads.
    :raises ValueError: as ``ops.attribute_reads``, or unknown chunk sizes.
    :raises TypeError: as ``ops.attribute_reads``.
    """
    from . import _points

    return _points.attribute_reads(peaks, centroids, areas, footprint=footprint, tie=tie, gpu=gpu,
                                        backend=backend)


def count_within(moved: Any, target: Any, radius: Any, *, gpu: bool = True, backend: str | None = None) -> da.Array:
    """Each moved set's points within ``radius`` of a target, the sets chunked: exactly
    :func:`spacr_accel_core.ops.count_within` on all of them, for every chunking of the sets.

    :param moved: a dask array ``(..., N, 2)``; each block is given whole sets (the last two axes
        rechunked into one where they were not).
    :param target: ``(M, 2)`` targets, in memory.
    :param radius: as in ``ops``.
    :param gpu: ``False`` keeps every worker on the CPU.
    :param backend: force one backend by name on every worker.
    :returns: a lazy int64 dask array of shape ``moved.shape[:-2]``.
    :raises ValueError: as ``ops.count_within``, or unknown chunk sizes.
    :raises TypeError: as ``ops.count_within``.
    """
    from . import _points

    return _points.count_within(moved, target, radius, gpu=gpu, backend=backend)


def percentiles(stack: Any, q: Any, *, gpu: bool = True, backend: str | None = None) -> da.Array:
    """:func:`spacr_accel_core.ops.percentiles` of every field of a dask stack: BIT-IDENTICAL to it.

    A field is never split: the last two axes are brought into one chunk (rechunked where a field
    spans blocks), and each block of whole fields is one ``ops.percentiles`` call on its worker.

    :param stack: a dask array ``(..., H, W)`` (a NumPy array is wrapped).
    :param q: as in ``ops``: one percentile, or a 1-D sequence of them.
    :param gpu: ``False`` keeps every worker on the CPU.
    :param backend: force one backend by name on every worker.
    :returns: a lazy dask array ``(..., len(q))`` (``(...)`` for one percentile) in NumPy's dtype,
        chunked like the leading axes. One exception: where every field holds NaN, ``ops`` answers a
        float64 ``q`` in the fields' dtype (NumPy's rule), a dtype that depends on the data; the
        lazy array declares the dtype of finite fields' answers and gives the same NaN in it.
    :raises ValueError: as ``ops.percentiles``, or unknown chunk sizes.
    :raises TypeError: as ``ops.percentiles``.
    """
    from . import _levels

    return _levels.percentiles(stack, q, gpu=gpu, backend=backend)


def rescale_fields(stack: Any, scale: Any, low: Any, high: Any, *, gpu: bool = True,
                   backend: str | None = None) -> da.Array:
    """:func:`spacr_accel_core.ops.rescale_fields` on a dask stack, field by field: BIT-IDENTICAL to it.

    :param stack: a dask array ``(..., H, W)``; each block is given whole fields.
    :param scale: one divisor per field (a number, or an array broadcasting against ``stack.shape[:-2]``,
        in memory or on Dask).
    :param low: the lower bound of each field, likewise.
    :param high: the upper bound of each field, likewise.
    :param gpu: ``False`` keeps every worker on the CPU.
    :param backend: force one backend by name on every worker.
    :returns: a lazy dask array of ``stack``'s shape in the dtype ``ops`` gives.
    :raises ValueError: as ``ops.rescale_fields``, or unknown chunk sizes.
    :raises TypeError: as ``ops.rescale_fields``.
    """
    from . import _levels

    return _levels.rescale_fields(stack, scale, low, high, gpu=gpu, backend=backend)


def __getattr__(name: str) -> Any:
    """An operation declared with ``dask=WholeFields()`` and no graph of its own here (a third
    party's, or one added later): its graph from its row (:mod:`._rows`)."""
    from ..operations._operations import OPERATIONS, WholeFields

    row = OPERATIONS.get(name)
    if row is None or not isinstance(row.dask, WholeFields):
        hint = "" if row is None else (" (its row declares no Dask form)" if row.dask is None else "")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}{hint}")
    built = _FROM_ROWS.get(name)
    if built is None or built[0] is not row:  # built once per row (a module reloaded declares anew)
        from ._rows import whole_fields

        built = _FROM_ROWS[name] = (row, whole_fields(row))
    return built[1]


_FROM_ROWS: dict[str, tuple[Any, Any]] = {}
"""The graphs built from rows so far, by name, with the row each was built from."""
