"""The hook specifications: the public contract third-party plugins build on.

A plugin is any module or object holding functions decorated with
:data:`spacr_accel_core.hookimpl`, advertised under the entry-point group ``spacr_accel``.
It implements whichever hooks it has something to say about.

A primitive hook is called with input the core has ALREADY validated and normalised, so a backend
never re-checks ranks, widths or dtypes; it says "not me, not now" by raising :class:`RuntimeError`
(ideally :class:`~spacr_accel_core.BackendUnavailable`, :class:`~spacr_accel_core.BackendDeclined` or
:class:`~spacr_accel_core.BackendOutOfMemory`), and anything else it raises is a fault.

DISPATCH IS THE CORE'S OWN. pluggy finds the hookimpls and matches a plugin's signature to these
names; the core then calls each plugin's function itself (in its own order, one at a time, with a
bound, a result check and quarantine), never ``manager.hook.<name>()``. So these specifications
carry no pluggy call options (``firstresult``, ``historic``): they would promise a calling
convention nothing uses. The arguments of a primitive hook are passed by position in the order
written here; ``ops`` names them and the operation table orders them
(:meth:`~spacr_accel_core.operations._operations.Operation.positional`).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

import numpy as np

from ._markers import hookspec
from ._records import Accelerator, BackendInfo, HostDevice, WarmState


@hookspec
def spacr_accel_backend_info() -> BackendInfo:  # type: ignore[empty-body]  # a specification has no body
    """Whether this plugin can run here now, and what on (what it IS, its declaration says).

    Asked lazily, the first time the plugin is next in line, once per process (again after
    :func:`spacr_accel_core.refresh`), bounded like a probe. It may import the plugin's library to
    answer; a ``RuntimeError`` here marks the plugin unusable with that reason, anything else
    marks it faulty. It must not call the ops or :func:`~spacr_accel_core.accelerator.resolve`
    (both may be waiting for this answer); ask your own library, bounded with
    :func:`~spacr_accel_core.toolkit.call_bounded` if a driver might hang.
    """


@hookspec
def spacr_accel_probe(
    torch: ModuleType | None, device_names: bool, include_cuda: bool
) -> Accelerator | None:
    """Find the accelerator this plugin knows how to drive, or return ``None``.

    Probers are walked best first (by their plugin's priority); the first usable answer wins,
    and a detected-but-unusable answer is remembered for the report if nothing better is found.
    Each call is bounded by ``SPACR_ACCEL_PROBE_TIMEOUT``; one that does not answer in time is
    abandoned and the machine resolves to the CPU. Raising :class:`RuntimeError` (e.g.
    :class:`~spacr_accel_core.BackendUnavailable`: "my library will not import") is the expected
    way to say "not here" and its message becomes the CPU's note; anything else is logged as a
    fault. A prober honours ``SPACR_DEVICE`` for the devices it drives (the core has already
    handled the values that force the CPU).

    :param torch: the torch module to ask (from :func:`~spacr_accel_core.accelerator.inspect_torch`:
        allocate nothing and change no environment, report declared dtype support), or ``None``
        when called by :func:`~spacr_accel_core.accelerator.resolve`, in which case the prober
        imports its own library, selects a device for this process and may measure it.
    :param device_names: ``False`` forbids device-property queries that may initialise a runtime.
    :param include_cuda: ``False`` skips CUDA and ROCm entirely.
    """


@hookspec
def spacr_accel_neural_engines() -> Sequence[str]:  # type: ignore[empty-body]  # a specification has no body
    """Names of inference silicon present here that no torch device reaches (found, never used)."""


@hookspec
def spacr_accel_capabilities(found: Accelerator) -> Sequence[tuple[str, bool, str]]:  # type: ignore[empty-body]  # a specification has no body
    """Extra ``(task, accelerated, detail)`` rows for the capabilities table."""


@hookspec
def spacr_accel_empty_cache(torch: ModuleType | None, found: Accelerator) -> str | None:
    """Hand the driver back what this plugin's library caches; return what was done, or ``None``.

    :param torch: the caller's own torch handle, or ``None`` (then use the process's torch if it
        is already imported; never import it just to free memory).
    :param found: the usable accelerator whose cache to release.
    :returns: the call made, e.g. ``"torch.cuda.empty_cache()"``; the first non-empty answer wins.
    """


@hookspec
def spacr_accel_warm_up(timeout: float) -> bool:  # type: ignore[empty-body]  # a specification has no body
    """Build now what this backend otherwise builds lazily (compiled kernels, a device context), and
    wait for it at most ``timeout`` seconds. Optional; never called by dispatch, only by
    :func:`spacr_accel_core.warm_up` (``spacr-accel bench`` calls it before timing anything).

    :param timeout: seconds to wait at most.
    :returns: whether everything is ready now.
    """


@hookspec
def spacr_accel_warm_state() -> WarmState:  # type: ignore[empty-body]  # a specification has no body
    """How far the lazy build :func:`spacr_accel_warm_up` waits for has got on this machine, read
    without building anything or importing anything heavy (the doctor asks it, and
    ``spacr-accel warm`` every fraction of a second while it waits). Optional.

    :returns: a :class:`~spacr_accel_core.WarmState`: pieces done of total, and whether a build
        runs now (in any process on this machine).
    """


@hookspec
def spacr_accel_host_devices() -> Sequence[HostDevice]:  # type: ignore[empty-body]  # a specification has no body
    """Compute silicon this plugin knows is present, found without initialising any device.

    The core's own answer is the operating system's inventory (PCI display and processing
    controllers, macOS and Windows display adapters, the Qualcomm Hexagon NPU); a plugin adds what
    only it can see. Called under the probe bound; a plugin that raises or overruns contributes
    nothing. Entries that are not :class:`~spacr_accel_core.HostDevice` are dropped with a warning.

    :returns: the records (an empty sequence when there is nothing to add).
    """


@hookspec
def spacr_accel_maximum_filter(  # type: ignore[empty-body]  # a specification has no body
    field: np.ndarray, size: int, out: np.ndarray | None
) -> np.ndarray:
    """The maximum of every ``size`` x ``size`` window, edges repeating the border pixel.

    (Repeated or mirrored, the border gives the same answer: a window crossing an edge holds the
    pixels the border would copy already, so ``mode="reflect"`` is served by this hook as it is.)

    :param field: a non-empty 2-D float32 array (may be non-contiguous; never modify it); a stack
        ``(..., H, W)`` only for a plugin whose declaration says ``stacks=True`` (each field
        filtered on its own, the window never crossing fields). A plugin that declares
        ``field_dtypes`` also receives fields of those camera dtypes unconverted, so it can filter
        in the narrow type and cast once. The answer must equal the filter of
        ``field.astype(float32)`` bit for bit.
    :param size: an odd window edge, at least 3.
    :param out: optional (leave it out of the signature and the core copies the result in): a
        writable C-contiguous float32 array of ``field.shape`` to write into and return, or
        ``None`` for a new array.
    :returns: a float32 array of ``field.shape`` (``out`` when given); a window holding a NaN
        yields NaN.
    """


@hookspec
def spacr_accel_matmul(  # type: ignore[empty-body]  # a specification has no body
    first: np.ndarray, second: np.ndarray, out: np.ndarray | None
) -> np.ndarray:
    """``first @ second`` with NumPy's shape rules, as float32.

    :param first: a non-empty real numeric array of at least one dimension.
    :param second: the same; the shapes are already checked to be compatible.
    :param out: optional, as for ``maximum_filter``: a float32 array of the result's shape to write
        into and return, or ``None``.
    :returns: the float32 product (a 0-d array for two vectors).
    """


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


@hookspec
def spacr_accel_local_maxima(  # type: ignore[empty-body]  # a specification has no body
    field: np.ndarray, size: int, threshold: np.float32 | None
) -> np.ndarray:
    """The pixels equal to their window's ``maximum_filter`` and above ``threshold``.

    On a card only the coordinates come back: a few kilobytes instead of the whole filtered field.

    :param field: as for ``maximum_filter`` (2-D, or a stack for a plugin declaring ``stacks``).
    :param size: an odd window edge, at least 3.
    :param threshold: ``None``, or a float32 ``t`` chosen by the core so that, for a float32 pixel
        ``v``, ``v > t`` is exactly "above the caller's threshold"; compare in float32.
    :returns: int64 coordinates ``(P, field.ndim)`` in row-major order; a NaN is never a peak.
    """


# ---- the decode chain's filters -------------------------------------------------------------------


@hookspec
def spacr_accel_minimum_filter(  # type: ignore[empty-body]  # a specification has no body
    field: np.ndarray, size: int, out: np.ndarray | None
) -> np.ndarray:
    """The minimum of every ``size`` x ``size`` window: ``maximum_filter``'s contract with the
    minimum (the same field, size and ``out``; a window holding a NaN yields NaN; a minimum of
    zero is ``+0.0``, which the core sees to for a plugin not declaring ``positive_zeros``)."""


@hookspec
def spacr_accel_gaussian_filter(  # type: ignore[empty-body]  # a specification has no body
    field: np.ndarray, sigma: tuple[float, float], out: np.ndarray | None, truncate: float, mode: str
) -> np.ndarray:
    """``scipy.ndimage.gaussian_filter(field.astype(float32), sigma, mode=mode, truncate=truncate,
    axes=(-2, -1))``, bit for bit.

    :func:`spacr_accel_core.separable.gaussian_passes` gives the passes (SciPy's float64 weights)
    and the order each pixel's sum is taken in; only that order, in float64 without fused
    multiply-adds, rounded to float32 after each pass, gives SciPy's bits.

    :param field: as for ``maximum_filter`` (2-D float32, a declared camera dtype, or a stack for a
        plugin declaring ``stacks``); every field filtered on its own.
    :param sigma: ``(rows, columns)`` standard deviations in pixels, each ``>= 0``; an axis whose
        sigma is at most ``1e-15`` is not filtered (as in SciPy), but not both (the core copies).
    :param out: optional, as for ``maximum_filter``.
    :param truncate: the kernel's reach in standard deviations (radius ``int(truncate * sigma + 0.5)``).
    :param mode: ``"reflect"`` or ``"nearest"``.
    :returns: float32 of ``field.shape`` (``out`` when given).
    """


@hookspec
def spacr_accel_gaussian_laplace(  # type: ignore[empty-body]  # a specification has no body
    field: np.ndarray, sigma: tuple[float, float], out: np.ndarray | None, truncate: float, mode: str
) -> np.ndarray:
    """``scipy.ndimage.gaussian_laplace`` of each field of ``field.astype(float32)``, bit for bit:
    the two terms of :func:`spacr_accel_core.separable.laplace_terms`, each rounded to float32,
    added in float32. The arguments are ``gaussian_filter``'s.
    """


# ---- the decode chain: base intensities and registration ----------------------------------------


@hookspec
def spacr_accel_window_maxima(  # type: ignore[empty-body]  # a specification has no body
    stack: np.ndarray, points: np.ndarray, size: int
) -> np.ndarray:
    """The maximum of the ``size`` x ``size`` window centred on each point, in every field of a stack.

    Exactly ``maximum_filter(stack, size)[:, y, x]`` for each point (the window clipped at the
    field's edges, a window holding NaN is NaN), without filtering the stack: on a card only the
    ``N x F`` values come back.

    :param stack: a non-empty ``(F, H, W)`` float32 stack (a plugin that declares ``field_dtypes``
        also receives those camera dtypes unconverted); never modify it.
    :param points: C-contiguous int64 ``(N, 2)`` rows ``(y, x)``, every one inside the field,
        ``N >= 1``.
    :param size: an odd window edge, at least 1.
    :returns: float32 ``(N, F)``; a maximum of zero is ``+0.0``.
    """


@hookspec
def spacr_accel_phase_correlate(  # type: ignore[empty-body]  # a specification has no body
    first: np.ndarray, second: np.ndarray, pairing: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The phase-correlation surface's peak of each pair of fields, and its height against the surface.

    The surface of a pair is the inverse real FFT, at the field's shape, of the cross-power
    spectrum ``A * conj(B)`` of the float64 real FFTs ``A`` of the pair's reference field and ``B``
    of its ``second`` field, each term divided by its magnitude where that is non-zero (else 0), the
    zero frequency set to 0.

    :param first: a non-empty C-contiguous ``(K, H, W)`` stack of finite float32 or float64
        reference fields (computed on as float64); never modify it.
    :param second: a C-contiguous ``(B, H, W)`` stack of the same dtype and field shape.
    :param pairing: int64 ``(B,)``: field ``i`` of ``second`` is registered against
        ``first[pairing[i]]``. One reference field commonly serves many pairs (every cycle against
        the reference cycle): compute its transform once. A field equal to an earlier one is
        never pointed at (the pairs point at the earlier one). Optional: a plugin that leaves it out
        of its signature receives ``first[pairing]``, one reference field per pair.
    :returns: ``(peaks, ratios)``: int64 ``(B,)`` flat row-major index of each surface's FIRST
        maximum, and float64 ``(B,)`` that maximum divided by the mean absolute value of the
        surface (0 where that mean is 0). A device without float64 computes in float32.
    """


@hookspec
def spacr_accel_translate(  # type: ignore[empty-body]  # a specification has no body
    stack: np.ndarray, shifts: np.ndarray
) -> np.ndarray:
    """Each field's content moved by whole pixels, the gap filled with zeros: how a field's cycles and
    channels are put in one frame once each registration is measured.

    ``out[f, y, x] = stack[f, y - dy, x - dx]`` where that pixel exists, else zero (all-zero bytes:
    ``0``, ``+0.0``, ``False``), ``(dy, dx) = shifts[f]``. Every other bit is copied as it is.

    :param stack: a non-empty C-contiguous ``(F, H, W)`` stack of any real dtype (bool, integer,
        float), kept; never modify it.
    :param shifts: C-contiguous int64 ``(F, 2)`` rows ``(dy, dx)``: positive moves down and right;
        ``|dy| <= H`` and ``|dx| <= W`` (the core clips a larger shift: every pixel leaves the field).
    :returns: a new array of the stack's shape and dtype.
    """


@hookspec
def spacr_accel_spot_score(  # type: ignore[empty-body]  # a specification has no body
    stack: np.ndarray,
) -> np.ndarray:
    """Where a read is likely: how much each pixel changes over the cycles, averaged over channels.

    NumPy's float32 ``stack.std(axis=0).mean(axis=0)`` to the bit, in its order: per pixel, the
    cycles summed in order from ``+0.0`` in float32, divided by their count (rounded once), each
    deviation squared and summed in order from ``+0.0``, divided by the count, the float32 square
    root; then the channels' values summed in order from ``+0.0`` and divided by their count. NaN
    and infinity propagate as in IEEE arithmetic.

    :param stack: a C-contiguous float32 ``(C, K, Y, X)`` stack, ``C >= 1``, ``K >= 1``, at least
        two pixels (spaCR's one-cycle case reaches a backend as ``(K, 1, Y, X)``); never modify it.
    :returns: float32 ``(Y, X)``.
    """


@hookspec
def spacr_accel_attribute_reads(  # type: ignore[empty-body]  # a specification has no body
    peaks: np.ndarray, centroids: np.ndarray, radius: np.ndarray, footprint: float, tie: float
) -> tuple[np.ndarray, np.ndarray]:
    """Each read given to the object whose boundary (the disc of its area) is nearest: spaCR's
    ``attribute_reads`` exactly.

    A read's candidates are the objects whose centre lies within ``reach = radius.max() +
    footprint``, by SciPy's KD-tree ball test (``fl(dy*dy) + fl(dx*dx) <= fl(reach*reach)``, the
    tree's own verdict where a sum lies within rounding of the bound); each candidate's gap is
    ``np.hypot(dy, dx) - radius[j]`` in float64 (``np.hypot``'s bits: C's ``hypot``, not a square
    root of the sum); the smallest gap wins, the lowest object index among equal gaps. No owner
    when that gap exceeds ``footprint``; refused as ambiguous (no owner) when the second smallest
    gap minus the smallest is below ``tie``.

    :param peaks: C-contiguous finite float64 ``(N, 2)`` read positions ``(y, x)``, ``N >= 1``.
    :param centroids: C-contiguous finite float64 ``(M, 2)`` object centres, ``M >= 1``.
    :param radius: C-contiguous float64 ``(M,)``: ``sqrt(max(area, 0) / pi)``, computed by the core.
    :param footprint: finite, at least 0.
    :param tie: finite, at least 0.
    :returns: ``(owner, ambiguous)``: int64 ``(N,)`` (an index into ``centroids`` or -1) and bool ``(N,)``.
    """


@hookspec
def spacr_accel_count_within(  # type: ignore[empty-body]  # a specification has no body
    moved: np.ndarray, target: np.ndarray, limit: float
) -> np.ndarray:
    """How many points of each moved set land near a target: the merge's score of a candidate transform.

    A point counts when ``fl(dy*dy) + fl(dx*dx) <= limit`` for some target, the sum in float64 as
    SciPy's KD-tree takes it; ``limit`` is the largest float64 whose square root is within the
    caller's radius, so the count is that of SciPy's ``distance <= radius``.

    :param moved: C-contiguous finite float64 ``(B, N, 2)``, ``B, N >= 1``; never modify it.
    :param target: C-contiguous finite float64 ``(M, 2)``, ``M >= 1``.
    :param limit: the squared distance bound, at least 0 (``inf``: every point counts).
    :returns: int64 ``(B,)``.
    """


@hookspec
def spacr_accel_percentiles(  # type: ignore[empty-body]  # a specification has no body
    stack: np.ndarray, ranks: np.ndarray
) -> np.ndarray:
    """The order statistics each field's percentiles are read from (the core interpolates them).

    ``values[f, j]`` is the element ``np.partition(stack[f].ravel(), ranks[j])[ranks[j]]``: the
    ``ranks[j]``-th smallest pixel of field ``f`` (0-based), an element of the field, never a
    computed value, so every backend answers the same numbers (``-0.0`` and ``+0.0`` are equal here,
    and either may be returned for a zero). A field holding NaN has NaN in every entry of its row.

    :param stack: a non-empty C-contiguous ``(F, H, W)`` float32 or float64 stack, ``H * W >= 1``
        (the core casts other dtypes exactly to one of them); never modify it.
    :param ranks: C-contiguous int64 ``(R,)``, strictly increasing, each in ``[0, H * W)``, ``R >= 1``.
    :returns: ``(F, R)`` in the stack's dtype.
    """


@hookspec
def spacr_accel_rescale_fields(  # type: ignore[empty-body]  # a specification has no body
    stack: np.ndarray, scale: np.ndarray, low: np.ndarray, high: np.ndarray
) -> np.ndarray:
    """Each field divided by its scale and clipped between its bounds: the level set of a channel.

    ``out[f] = clip(D(stack[f]) / scale[f], low[f], high[f])`` in ``D = low.dtype``, per pixel:
    ``y = x / scale`` (IEEE, rounded once; a scale of exactly 1 may be skipped, it is exact), then
    NumPy's clip: ``y`` if ``y`` is NaN, else ``y`` if ``y >= low`` else ``low``; then that if it is
    NaN or ``<= high``, else ``high``; a NaN ``low`` or ``high`` makes the whole field NaN.

    :param stack: a non-empty C-contiguous ``(F, H, W)`` float32 or float64 stack; never modify it.
    :param scale: C-contiguous ``(F,)`` in ``D``.
    :param low: C-contiguous ``(F,)``, float32 or float64: ``D``.
    :param high: C-contiguous ``(F,)`` in ``D``.
    :returns: a new ``(F, H, W)`` array in ``D`` (float32 from a float64 stack never: the core
        sends a float64 stack only with ``D`` float64).
    """
