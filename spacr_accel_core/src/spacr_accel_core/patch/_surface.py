"""spaCR's correlation surface, in spaCR's own arithmetic, on every core.

WHY NOT THE REGISTRY'S ``phase_correlate``. spaCR's NumPy path computes ``rfft2`` of each field,
the cross-power ``a * conj(b)`` divided by its magnitude as NumPy divides a complex by a real (a
complex division), and ``irfft2``; the registry's transforms and cross-power are its own, so its
peak ratio lands one or two ulp from spaCR's on about a quarter of real pairs. A patched spaCR must
give spaCR's bits, so this module computes the very same NumPy calls, in the same order, on the same
values, and only changes how the work is shared out:

* ``rfft2`` is ``rfft`` over the last axis, then ``fft`` over the first (NumPy's own definition);
  each 1-D transform is independent, so a band of rows (or of columns) transformed alone gives the
  bits the whole array would, and the bands run side by side on the CPU pool (NumPy's loops release
  the GIL).
* the two forward transforms run together, each 1-D transform written straight into its place
  (NumPy 2's ``out=``: the same pocketfft call, one fresh array fewer per transform; memory this
  process has not touched costs a page fault per 4 KiB, and on a virtual machine filling a fresh
  1480 x 741 complex array took as long as the transform). The magnitude, the division and the
  zeroing run band by band in place (NumPy's elementwise loops give every element the bits they
  give it in the whole array).
* the product ``a * np.conj(b)`` alone is computed on the whole array, by the very expression
  spaCR writes, because its bits depend on the array's size: from 256 KiB on, NumPy reuses the
  temporary ``np.conj(b)`` as the output and swaps the operands of the (commutative) product, and
  its complex product, with fused multiply-adds, is not bit-commutative. A band below that size,
  or a platform without the reuse, would round differently; the same expression on the same whole
  array rounds as spaCR's does, wherever it runs (a 300 x 300 pair in eight bands differed).

* the reference's spectrum is kept for the next pair: spaCR registers every cycle against one
  reference target and every channel against its cycle's first channel, so 12 of a field's 43
  pairs bring a new reference and 31 repeat the last one. A repeat is recognised by its bits (the
  whole field compared, a memory pass, against the three transforms it saves a third of), and the
  same bits in give the same spectrum out.

ONLY C-ORDERED, FINITE, BOUNDED FIELDS ARE BANDED. spaCR's arithmetic follows its fields' layout: a
Fortran-ordered field's spectra and surface come out Fortran-ordered, its product's last bits follow
its operands' layouts, and its peak ratio is a mean of the surface's absolute values summed in the
surface's memory order (a Fortran-ordered surface sums to a ratio one ulp away). And spaCR's NumPy
warns once per transform call where a NaN, an infinity or an overflow meets it, where bands would warn
once per band. So the bands run only on two C-ordered fields holding finite values small enough that
no transform or product can overflow (:data:`_BOUND`); any other pair is computed by the same NumPy
calls on the whole arrays as given, in the calling thread, which keeps spaCR's layouts and warnings.

The peak, its height, the mean absolute value, the unwrap and the verdict stay spaCR's own code:
everything after the surface is computed by spaCR itself. The patch adds no name to spaCR's table
of surfaces (a caller would see it: ``backend="spacr_accel"`` answered, where spaCR raises, and
every unknown backend's message listing it). It puts :func:`in_place_of` spaCR's NumPy surface
instead, which computes this surface only inside the seam's own call (:func:`serving`, a context
variable: another thread never sees it), and is spaCR's own function everywhere else; the seam lets
spaCR choose its NumPy path as it always would, so the record's ``backend`` is spaCR's ``"numpy"``.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import numbers
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..kit._tiling import cpu_threads, run_parts
from ._outcome import PassThrough

__all__ = ["in_place", "in_place_of", "serving", "spacr_surface", "spacr_would_raise"]

_SERVING: contextvars.ContextVar[bool] = contextvars.ContextVar("spacr_accel_serving_surface", default=False)
"""True inside the seam's own call to spaCR's ``phase_correlate`` (:func:`serving`), in that call's
context alone: another thread meanwhile sees False."""

_MARK = "__spacr_accel_surface__"
"""The attribute that marks the patch's stand-in for spaCR's NumPy surface."""

_BOUND = 1e150
"""The largest sum of a field's absolute values banded: a spectrum's every value is at most that sum,
so the cross-power stays below 1e300 and no step of the surface can overflow."""

_SPLIT_PIXELS = 512 * 512
"""Below this many pixels a field is transformed in one piece: thread hand-offs cost more than a
small transform saves. Measured on two busy cores, a fresh pair's surface in two bands took 1.13x
the one-piece time on a 154 x 512 strip (a 512 px tile's stitching strip), 1.07x on 384 x 384 and
1.09x on 230 x 768, and 0.92x on 512 x 512; ``benchmarks/bench_strips.py`` times the stitch's
strips."""


def _bands(extent: int, parts: int) -> list[tuple[int, int]]:
    step = -(-extent // parts)
    return [(start, min(extent, start + step)) for start in range(0, extent, step)]


class _LastReference:
    """The last reference field's bits and its spectrum (one entry: spaCR's pairs come grouped by
    reference, so the last one is the one that repeats)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._field: np.ndarray | None = None
        self._spectrum: np.ndarray | None = None

    def get(self, field: np.ndarray) -> np.ndarray | None:
        with self._lock:
            kept, spectrum = self._field, self._spectrum
        if kept is None or kept.shape != field.shape:
            return None
        bits, given = kept.view(np.uint64), field.view(np.uint64)
        # a different field almost always differs in its first row: a stitching run of strips,
        # each new, pays a row's comparison, not the whole field's
        if not (np.array_equal(bits[0], given[0]) and np.array_equal(bits, given)):
            return None
        return spectrum

    def put(self, field: np.ndarray, spectrum: np.ndarray) -> None:
        with self._lock:
            self._field, self._spectrum = field.copy(), spectrum

    def clear(self) -> None:
        with self._lock:
            self._field = self._spectrum = None


LAST_REFERENCE = _LastReference()
"""The spectrum kept for the next pair with the same reference (:func:`spacr_surface`)."""


def _spectra(fields: list[np.ndarray], out: list[np.ndarray], row_bands: list[tuple[int, int]],
             column_bands: list[tuple[int, int]]) -> None:
    """``numpy.fft.rfft2`` of each field into ``out``, as NumPy computes it (``rfft`` along the rows,
    then ``fft`` along the columns), band by band on the CPU pool."""

    def forward_rows(start: int, stop: int) -> None:
        for field, spectrum in zip(fields, out, strict=True):
            np.fft.rfft(field[start:stop], axis=-1, out=spectrum[start:stop])

    def forward_columns(start: int, stop: int) -> None:
        for spectrum in out:
            np.fft.fft(spectrum[:, start:stop], axis=0, out=spectrum[:, start:stop])

    run_parts(forward_rows, row_bands)
    run_parts(forward_columns, column_bands)


_scratch = threading.local()


def _kept(name: str, shape: tuple[int, int], dtype: type[np.generic]) -> np.ndarray:
    """This thread's working array ``name``, kept from pair to pair (its pages already touched:
    see above); it never leaves :func:`spacr_surface`."""
    kept: np.ndarray | None = getattr(_scratch, name, None)
    if kept is None or kept.shape != shape:
        kept = np.empty(shape, dtype)
        setattr(_scratch, name, kept)
    return kept


def _real_pair(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and len(value) == 2 and all(
        isinstance(item, numbers.Real) for item in value)


def spacr_would_raise(first: Any, second: Any, options: dict[str, Any]) -> None:
    """Leave the call to spaCR where its ``phase_correlate`` would raise after reading the fields
    (its float64 cast warns of a signalling NaN) or after computing a surface (whose transforms warn
    of a NaN): served, that call would raise, and its warnings would be given twice, once by the
    served call and once by spaCR's own. spaCR wants two 2-D fields of one shape, reads ``expected``
    as two numbers ``int()`` takes, ``tolerance`` as None, a Python number or a pair of numbers, and
    compares the ratio with ``min_peak_ratio``.

    :param first: the call's first field.
    :param second: its second.
    :param options: its keywords.
    :raises PassThrough: an argument spaCR would fail on after reading the fields.
    """
    try:
        shapes = np.shape(first), np.shape(second)
    except ValueError:  # a ragged nesting of lists: spaCR's own cast raises
        raise PassThrough("fields NumPy cannot read") from None
    if len(shapes[0]) != 2 or shapes[0] != shapes[1]:
        raise PassThrough("fields that are not two 2-D fields of one shape (spaCR raises)")
    expected = options.get("expected", (0, 0))
    if not (_real_pair(expected) and all(math.isfinite(float(item)) for item in expected)):
        raise PassThrough(f"expected={expected!r} (spaCR reads two finite numbers after its surface)")
    tolerance = options.get("tolerance")
    if not (tolerance is None or isinstance(tolerance, (int, float)) or _real_pair(tolerance)):
        raise PassThrough(f"tolerance={tolerance!r} (spaCR reads a number or a pair of numbers after its surface)")
    if tolerance is None and not isinstance(options.get("min_peak_ratio", 0.0), numbers.Real):
        raise PassThrough("a min_peak_ratio that is not a number (spaCR compares it after its surface)")


def _bandable(field: np.ndarray) -> bool:
    """Whether ``field`` is C-ordered, not empty, and finite within :data:`_BOUND` (one pass each for
    its minimum and maximum, which a NaN makes NaN)."""
    if not field.flags.c_contiguous or field.size == 0:
        return False
    with np.errstate(invalid="ignore"):
        lowest, highest = float(field.min()), float(field.max())
    largest = max(abs(lowest), abs(highest))  # NaN where either is NaN
    return largest * field.size <= _BOUND


def _whole(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The surface by NumPy's calls on the whole fields as given, in spaCR's order and in the calling
    thread: each transform, product and magnitude keeps the layout NumPy gives spaCR's, and warns
    once, as spaCR's does (the division is made in place, elementwise, as spaCR's
    ``np.where(magnitude > 0, product / magnitude, 0)`` makes it, under the same error state)."""
    spectra = np.fft.rfft2(first), np.fft.rfft2(second)
    product = spectra[0] * np.conj(spectra[1])  # spaCR's own expression: see above
    magnitude = np.abs(product)
    with np.errstate(invalid="ignore", divide="ignore"):
        np.divide(product, magnitude, out=product)
        np.copyto(product, 0, where=~(magnitude > 0))
    product[0, 0] = 0
    return np.fft.irfft2(product, s=first.shape)


def spacr_surface(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The inverse transform of the normalised cross-power spectrum of two float64 fields: spaCR
    1.5's ``ops_register._surface_numpy`` bit for bit (the tests compare the two on drawn fields).

    :param first: the reference field, 2-D float64 (spaCR converts before it calls a surface).
    :param second: the field placed against it, the same shape.
    :returns: the float64 surface, ``first.shape``.
    """
    if not (first.flags.c_contiguous and _bandable(second)):
        return _whole(first, second)
    reference = LAST_REFERENCE.get(first)  # only a field found bandable is kept
    if reference is None and not _bandable(first):
        return _whole(first, second)
    height, width = first.shape
    parts = cpu_threads() if height * width >= _SPLIT_PIXELS else 1
    half = width // 2 + 1
    row_bands = _bands(height, min(parts, height) or 1)
    column_bands = _bands(half, min(parts, half) or 1)
    moving = _kept("moving", (height, half), np.complex128)
    if reference is None:
        reference = np.empty((height, half), np.complex128)
        _spectra([first, second], [reference, moving], row_bands, column_bands)
        LAST_REFERENCE.put(first, reference)
    else:
        _spectra([second], [moving], row_bands, column_bands)

    product = reference * np.conj(moving)  # spaCR's own expression on the whole array: see above
    magnitude = _kept("magnitude", (height, half), np.float64)

    def normalise(start: int, stop: int) -> None:
        band, size = product[start:stop], magnitude[start:stop]
        np.abs(band, out=size)
        with np.errstate(invalid="ignore", divide="ignore"):
            np.divide(band, size, out=band)
        np.copyto(band, 0, where=~(size > 0))  # spaCR's np.where(magnitude > 0, ..., 0), NaN included

    def inverse_columns(start: int, stop: int) -> None:
        np.fft.ifft(product[:, start:stop], axis=0, out=product[:, start:stop])

    surface = np.empty((height, width), np.float64)

    def inverse_rows(start: int, stop: int) -> None:
        np.fft.irfft(product[start:stop], n=width, axis=-1, out=surface[start:stop])

    run_parts(normalise, row_bands)
    product[0, 0] = 0
    run_parts(inverse_columns, column_bands)
    run_parts(inverse_rows, row_bands)
    return surface


@contextlib.contextmanager
def serving() -> Iterator[None]:
    """The seam's own call: inside it, the stand-in :func:`in_place_of` puts in spaCR's table
    computes :func:`spacr_surface`."""
    token = _SERVING.set(True)
    try:
        yield
    finally:
        _SERVING.reset(token)


def in_place_of(spacrs: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[np.ndarray, np.ndarray],
                                                                                    np.ndarray]:
    """The stand-in for spaCR's NumPy surface in spaCR's table while the patch is installed.

    :param spacrs: spaCR's own NumPy surface, which the stand-in is everywhere but in the seam's
        own call (a caller who reaches the table directly, spaCR's own function beside a served
        call in the check mode, a call the seam left to spaCR).
    """

    def numpy_surface(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        if _SERVING.get():
            return spacr_surface(first, second)
        return spacrs(first, second)

    functools.update_wrapper(numpy_surface, spacrs)
    setattr(numpy_surface, _MARK, True)
    return numpy_surface


def in_place(register: Any) -> bool:
    """Whether spaCR's table of surfaces in ``register`` (``spacr.ops_register``) holds the
    patch's stand-in for its NumPy surface: a caller may have put a function of their own there.

    :param register: spaCR's ``ops_register`` module.
    """
    surfaces = getattr(register, "_SURFACES", None)
    return isinstance(surfaces, dict) and getattr(surfaces.get("numpy"), _MARK, False) is True
