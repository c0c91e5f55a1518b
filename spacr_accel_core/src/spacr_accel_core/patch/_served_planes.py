"""How the patch serves spaCR's two whole-plane steps: ``ops_cycles._translate`` (43 calls a field:
a zeroed copy and a slice copy each) and ``ops_sbs.estimate_read_locations`` (NumPy's float32
``std`` over the cycles and ``mean`` over the channels, with stack-sized temporaries): the same
answers, bit for bit, or the call left to spaCR.

Both names are looked up when spaCR calls them (``_translate`` is a global of ``ops_cycles``, and
``ops_engine._decode_field`` imports ``estimate_read_locations`` inside the function), so the seam is
the module attribute alone.

WHAT IS LEFT TO spaCR. ``_translate`` answers with ``np.zeros_like(image)``, which keeps a subclass
and the input's memory layout: only a plain C-ordered ndarray of real numbers is served (a Fortran
ordered or complex image goes to spaCR). ``estimate_read_locations``' order of sums is NumPy's on a
C-ordered float32 stack, which the registry repeats: a stack whose float32 form is not C-ordered goes
to spaCR, and so does one with no cycles or channels (spaCR's NumPy warns there, and the warnings
are spaCR's to give). So does a stack whose score is not finite everywhere: a NaN, an infinity or a
value whose square overflows float32 always makes its pixel's score NaN or infinite, and there
spaCR's NumPy warns (``inf - inf``, an overflow) and decides which NaN the pixel holds. The score is
made first and looked at (a pass over one plane, not over the stack); the stack is only read.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import ops
from ._errstate import underflow_ignored
from ._floor import AT_FLOOR, FloorRule
from ._outcome import PassThrough, served_by

__all__ = ["estimate_read_locations", "translate"]


def translate(image: Any, dy: Any, dx: Any, *, floor: FloorRule = AT_FLOOR) -> tuple[Any, str]:
    """``spacr.ops_cycles._translate``: the registry's ``translate`` of the image by ``(int(dy),
    int(dx))``, spaCR's own conversion of the shift (a float is truncated there, as here), under
    ``floor``, the seam's rule in the table."""
    if type(image) is not np.ndarray or image.dtype.kind not in "biuf":
        raise PassThrough("not a plain ndarray of real numbers (zeros_like keeps a subclass or a complex dtype)")
    if image.ndim < 2:
        raise PassThrough("an image without two field axes")
    if not image.flags.c_contiguous:
        raise PassThrough("an image not in C order (spaCR's zeros_like keeps its layout)")
    try:
        rows, columns = int(dy), int(dx)
    except (TypeError, ValueError, OverflowError):
        raise PassThrough(f"a shift int() cannot read ({dy!r}, {dx!r})") from None
    with floor.in_force():  # the floor's slice copies are spaCR's own, plus the seam's checks
        return ops.translate(image, (rows, columns)), served_by()


def estimate_read_locations(stack: Any) -> tuple[Any, str]:
    """``spacr.ops_sbs.estimate_read_locations``: the registry's ``spot_score`` of the float32 stack."""
    if isinstance(stack, np.ndarray) and np.iscomplexobj(stack):
        raise PassThrough("a complex stack (spaCR's cast warns that it drops the imaginary part)")
    underflow_ignored()
    try:
        with np.errstate(over="raise", invalid="raise"):  # spaCR's own cast warns (an overflow, a signalling NaN)
            array = np.asarray(stack, dtype=np.float32)
    except FloatingPointError:
        raise PassThrough("a stack whose float32 cast overflows or meets a signalling NaN") from None
    except (TypeError, ValueError):
        raise PassThrough("a stack NumPy cannot read as float32") from None
    if array.ndim != 4:
        raise PassThrough("a stack that is not (cycles, channels, Y, X)")
    if not array.flags.c_contiguous:
        raise PassThrough("a stack not in C order (NumPy may sum its cycles in another order)")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise PassThrough("no cycles or no channels (spaCR's NumPy warns and answers NaN)")
    score = ops.spot_score(array)
    if score.size and not math.isfinite(float(score.max())):  # a deviation is never negative
        raise PassThrough("a NaN, an infinity or an overflow in the score (spaCR's NumPy decides the "
                          "NaN's sign and warns)")
    return score, served_by()
