"""The hook specifications: the public contract third-party plugins build on.

A plugin is any module or object holding functions decorated with
:data:`spacr_accel_core.hookimpl`, advertised under the entry-point group ``spacr_accel``.
It implements whichever hooks it has something to say about.

A primitive hook is called with input the core has ALREADY validated and normalised, so a backend
never re-checks ranks, widths or dtypes; it says "not me, not now" by raising :class:`RuntimeError`
(ideally :class:`~spacr_accel_core.BackendUnavailable`, :class:`~spacr_accel_core.BackendDeclined` or
:class:`~spacr_accel_core.BackendOutOfMemory`), and anything else it raises is a fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

import numpy as np

from ._markers import hookspec
from ._records import Accelerator, BackendInfo


@hookspec(firstresult=True)
def spacr_accel_backend_info() -> BackendInfo:  # type: ignore[empty-body]  # a specification has no body
    """Describe this plugin: name, priority, whether it needs a device, whether it can run now.

    Called once per process at discovery (and again after :func:`spacr_accel_core.refresh`).
    It may import the plugin's library to answer ``usable``; a ``RuntimeError`` here marks the plugin
    unusable with that reason, anything else marks it faulty. It runs while the registry is being
    built, so it must not call the ops or :func:`~spacr_accel_core.accelerator.resolve` (both wait
    for the registry); ask your own library, bounded with
    :func:`~spacr_accel_core.accelerator.call_bounded` if a driver might hang.
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
def spacr_accel_maximum_filter(field: np.ndarray, size: int) -> np.ndarray:  # type: ignore[empty-body]  # a specification has no body
    """The maximum of every ``size`` x ``size`` window, edges repeating the border pixel.

    :param field: a non-empty 2-D float32 array (may be non-contiguous; never modify it). A plugin
        whose module declares ``SPACR_ACCEL_FIELD_DTYPES`` (a tuple of names from ``"uint8"``,
        ``"int8"``, ``"uint16"``, ``"int16"``) also receives fields of those dtypes unconverted, so
        it can filter a camera field in its own type (a half or a quarter of the bytes) and cast
        once; every other field, and every field for a plugin without the declaration, arrives as
        float32. The answer must equal the filter of ``field.astype(float32)`` bit for bit.
    :param size: an odd window edge, at least 3.
    :returns: a new float32 array of ``field.shape`` (whatever the field's dtype); a window
        holding a NaN yields NaN.
    """


@hookspec
def spacr_accel_matmul(first: np.ndarray, second: np.ndarray) -> np.ndarray:  # type: ignore[empty-body]  # a specification has no body
    """``first @ second`` with NumPy's shape rules, as float32.

    :param first: a non-empty real numeric array of at least one dimension.
    :param second: the same; the shapes are already checked to be compatible.
    :returns: the float32 product (a 0-d array for two vectors).
    """


@hookspec
def spacr_accel_nearest_neighbours(  # type: ignore[empty-body]  # a specification has no body
    source: np.ndarray, target: np.ndarray, chunk: int
) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``source`` the nearest row of ``target``, exactly, ties to the lowest index.

    "Nearest" is decided by the float64 sum, over the coordinates in order, of the squared
    differences of the float32 coordinates (:func:`spacr_accel_core.testing.reference_nearest`).

    :param source: ``(N, D)`` float32, C-contiguous, finite, ``N >= 1``, ``D >= 1``.
    :param target: ``(M, D)`` float32, C-contiguous, finite, ``M >= 1``.
    :param chunk: an upper bound on source rows per pass; the answer must not depend on it.
    :returns: int64 indices and float32 distances, each of length ``N``.
    """
