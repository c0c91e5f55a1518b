"""How the patch serves ``spacr.ops_register.phase_correlate`` (and the name ``spacr.ops_cycles``
bound at import): spaCR's own function, its NumPy surface computed by the kit's
:func:`~spacr_accel_core.kit._surface.spacr_surface` (spaCR's arithmetic on every core) inside the
seam's own call, or the call left to spaCR.

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
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..kit._surface import spacr_surface
from ._errstate import underflow_ignored
from ._outcome import PassThrough
from ._served import _none, _spacrs_order

__all__ = ["NUMPY", "SURFACES", "in_place", "in_place_of", "phase_correlate", "serving", "spacr_would_raise"]

SURFACES = "_SURFACES"
"""The name of spaCR's table of correlation surfaces in ``ops_register`` (backend name -> surface)."""

NUMPY = "numpy"
"""The entry of that table the patch stands in for: spaCR's NumPy surface."""

_SERVING: contextvars.ContextVar[bool] = contextvars.ContextVar("spacr_accel_serving_surface", default=False)
"""True inside the seam's own call to spaCR's ``phase_correlate`` (:func:`serving`), in that call's
context alone: another thread meanwhile sees False."""

_MARK = "__spacr_accel_surface__"
"""The attribute that marks the patch's stand-in for spaCR's NumPy surface."""


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


def phase_correlate(first: Any, second: Any, *, register: Any, original: Callable[..., Any],
                    **options: Any) -> tuple[Any, str]:
    """``spacr.ops_register.phase_correlate`` (and the name ``spacr.ops_cycles`` bound at import):
    spaCR's own function, given spaCR's own surface arithmetic shared between the cores
    (:mod:`spacr_accel_core.kit._surface`), so that the peak, ratio, unwrap and verdict are spaCR's code on spaCR's
    bits (spaCR chooses its NumPy path, whose surface is the patch's inside this call alone). Where
    spaCR itself would register on a card, the card's answer is spaCR's: it is left to spaCR."""
    _none(backend=options.get("backend"))
    underflow_ignored()  # a tiny field's transform underflows: reported as spaCR's NumPy reports it
    spacr_would_raise(first, second, options)
    gpu = options.get("gpu", True)
    order = _spacrs_order(register, "available_backends", gpu)
    if order[0] != "numpy":
        raise PassThrough(f"spaCR registers on its own {order[0]} here")
    if not in_place(register):
        raise PassThrough("spaCR's NumPy surface is not the one the patch put in its table")
    with serving():
        return original(first, second, **options), "numpy"


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
    surfaces = getattr(register, SURFACES, None)
    return isinstance(surfaces, dict) and getattr(surfaces.get(NUMPY), _MARK, False) is True
