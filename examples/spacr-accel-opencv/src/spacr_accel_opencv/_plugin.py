"""The OpenCV backend's hookimpls: ``maximum_filter`` as a greyscale dilation, and nothing else.

A windowed maximum over a ``size`` x ``size`` square with the border pixel repeated IS OpenCV's
dilation by a square of ones with ``BORDER_REPLICATE``. On float32 input it is exact (a maximum
is one of its inputs, so there is no rounding to differ in), and it is bit-identical to the
contract on every finite field, infinities included (checked against
:func:`spacr_accel_core.testing.reference_maximum_filter` with hypothesis, and through
:func:`dilate` on windows up to the largest the core passes). The sign of zero is the core's to
settle: it adds ``+0.0``.

NaN is where OpenCV differs: its comparisons drop a NaN or keep it depending on where it sits in
the window, while the contract says a window holding a NaN yields NaN. Rather than half-fix that,
the backend declines such a field (:class:`~spacr_accel_core.BackendDeclined`) and the core hands
it to the next backend.

WIDE WINDOWS are declined too: OpenCV's time grows with the window and the floor's does not, so
past :data:`WIDEST` taps the next backend answers (a 2 x 70,000 field with size 99,999 took 0.43 s
here against the floor's 2 ms).

WHAT IT IS, WITHOUT IMPORTING OPENCV. :data:`SPACR_ACCEL_PLUGIN` declares name, priority and
``accelerated`` as a plain attribute, read when the plugin is loaded; whether OpenCV imports here is
asked lazily through :func:`spacr_accel_backend_info`, and ``cv2`` itself is imported only there
and in the primitive.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Final

import numpy as np

from spacr_accel_core import BackendDeclined, BackendInfo, BackendUnavailable, Declaration, hookimpl
from spacr_accel_core.toolkit import call_bounded

NAME: Final = "opencv"
PRIORITY: Final = 150.0
"""Above the NumPy floor (100), below every accelerated backend (CuPy 200, torch 300): a GPU that
is usable still wins, and on the CPU this is the faster exact filter (see the README's benchmark)."""

SPACR_ACCEL_PLUGIN: Final = Declaration(
    name=NAME, priority=PRIORITY, accelerated=False,
    # Camera fields ``cv2.dilate`` filters in their own type (OpenCV's 8U, 16U and 16S images), so
    # the core passes them unconverted and the result is cast to float32 once. ``int8`` is absent
    # because ``cv2.dilate`` refuses 8S images: the core casts such a field to float32 for us.
    field_dtypes=("uint8", "uint16", "int16"),
)
"""What this plugin is, declared statically so the registry ranks it without importing OpenCV."""


@functools.cache
def _opencv() -> ModuleType:
    """``cv2``, imported on first use (about 60 ms once NumPy is loaded), then kept; a failed
    import is not cached, so it is tried again next time."""
    import cv2

    return cv2


@hookimpl
def spacr_accel_backend_info() -> BackendInfo:
    """Usable where ``cv2`` imports (bounded: a broken OpenCV install must not hang discovery)."""
    try:
        cv2 = call_bounded(_opencv, "import cv2")
    except RuntimeError as exc:
        return BackendInfo(usable=False,
                           note=f"OpenCV does not import here ({exc}); `pip install opencv-python-headless`")
    return BackendInfo(usable=True, note=f"cv2.dilate on the CPU (OpenCV {cv2.__version__})")


@functools.lru_cache(maxsize=16)
def _kernel(rows: int, cols: int) -> np.ndarray:
    """A ``rows`` x ``cols`` block of ones: OpenCV recognises it as a rectangle and runs the
    separable row-then-column maximum, each pass comparing every tap of its axis (so its time
    grows with the window: see :data:`WIDEST`)."""
    kernel = np.ones((rows, cols), np.uint8)
    kernel.flags.writeable = False  # shared between calls
    return kernel


WIDEST: Final = 96
"""The most taps (the kernel's rows plus its columns, each capped at ``2n - 1`` along its axis) this
backend serves; a wider window is declined to the next backend.

``cv2.dilate`` runs a rectangle as a row pass and a column pass that each compare every tap, so its
time grows with the window, while the floor's (van Herk/Gil-Werman) does not. Measured side by side
on two cores (best of 5, OpenCV 5.0 on one thread and on two), OpenCV's time over the NumPy
floor's: a 2 x 70,000 float32 field 0.9 at 34 taps, 1.2 at 66, 1.5 at 100, 1.8 at 130, 2.5 at 204
and 1,000 times slower at 99,999 columns (0.43 s against 2 ms); squares from 512^2 to 4096^2 cross
1.0 between 130 and 250 taps and reach 2-11x by 600-2,000. A long thin field is the worst case (the
floor's pass per pixel is cheapest there), so the budget is set where it stays within 1.5x of the
floor: every shape served here is then within 2x of what the registry would pick without it.
"""


def dilate(field: np.ndarray, size: int) -> np.ndarray:
    """``cv2.dilate`` of ``field`` by a ``size`` x ``size`` square, border repeated: the windowed
    maximum on any finite field and window (``-0.0`` where the core adds ``+0.0``).

    :param field: 2-D float32, or uint8/uint16/int16; never written.
    :param size: the odd window edge, at least 3; any width, even past the field.
    """
    cv2 = _opencv()
    narrow = field.dtype != np.float32
    result: np.ndarray = cv2.dilate(np.ascontiguousarray(field), _kernel(*_taps(field.shape, size)),
                                    borderType=cv2.BORDER_REPLICATE)
    # The maximum commutes with the exact, order-preserving cast: dilate in the camera's type, cast once.
    return result.astype(np.float32) if narrow else result


def _taps(shape: tuple[int, ...], size: int) -> tuple[int, int]:
    """The kernel's rows and columns: past ``2n - 1`` along an axis the window already covers every
    pixel from anywhere, border repeated, so each axis is capped separately (a long thin field keeps
    a kernel of few rows)."""
    rows, cols = shape
    return min(size, 2 * rows - 1), min(size, 2 * cols - 1)


@hookimpl
def spacr_accel_maximum_filter(field: np.ndarray, size: int) -> np.ndarray:
    """The windowed maximum by ``cv2.dilate``; declines a field holding a NaN, and a window wider
    than :data:`WIDEST` taps (where the next backend is faster).

    :param field: non-empty 2-D float32, or uint8/uint16/int16 as declared in
        the declaration's ``field_dtypes``; possibly non-contiguous and read-only (never written).
    :param size: the odd window edge, at least 3.
    """
    taps = sum(_taps(field.shape, size))
    if taps > WIDEST:
        raise BackendDeclined(f"a {size} x {size} window on a {field.shape[0]} x {field.shape[1]} field is "
                              f"{taps} taps for cv2.dilate, past its {WIDEST}: the next backend's time "
                              "does not grow with the window")
    narrow = field.dtype != np.float32  # an integer camera field: it holds no NaN
    if not narrow and np.isnan(field.max()):  # max propagates NaN: one pass, no temporary mask
        raise BackendDeclined("the field holds a NaN, and cv2.dilate's NaN handling is not the contract's")
    try:
        return dilate(field, size)
    except ImportError as exc:
        raise BackendUnavailable(f"OpenCV does not import here: {exc}") from exc
