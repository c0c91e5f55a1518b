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

Only the surface is here: spaCR's patch has spaCR's own ``phase_correlate`` compute it in the
seam's own call (``patch/_served_register.py``), and the peak, the ratio, the unwrap and the verdict
after it stay spaCR's code.
"""

from __future__ import annotations

import threading

import numpy as np

from ._tiling import cpu_threads, run_parts

__all__ = ["LAST_REFERENCE", "bands", "spacr_surface"]

_BOUND = 1e150
"""The largest sum of a field's absolute values banded: a spectrum's every value is at most that sum,
so the cross-power stays below 1e300 and no step of the surface can overflow."""

_SPLIT_PIXELS = 512 * 512
"""Below this many pixels a field is transformed in one piece: thread hand-offs cost more than a
small transform saves. Measured on two busy cores, a fresh pair's surface in two bands took 1.13x
the one-piece time on a 154 x 512 strip (a 512 px tile's stitching strip), 1.07x on 384 x 384 and
1.09x on 230 x 768, and 0.92x on 512 x 512; ``benchmarks/bench_strips.py`` times the stitch's
strips."""


def bands(extent: int, parts: int) -> list[tuple[int, int]]:
    """``extent`` rows (or columns) cut into at most ``parts`` consecutive ``(start, stop)`` bands of
    one size, the last one shorter: each is a part for the CPU pool (``run_parts``)."""
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
    row_bands = bands(height, min(parts, height) or 1)
    column_bands = bands(half, min(parts, half) or 1)
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
