"""The caller's floating-point error state, read before a seam serves.

WHY. spaCR's NumPy warns (or raises, or calls back) as ``np.errstate`` says, and the seams serve only
inputs on which spaCR's arithmetic sets no flag that NumPy reports by default: no NaN or infinity
met, nothing large enough to overflow (each seam bounds its inputs). Underflow is the one flag such
inputs can still set (a tiny field's transform, a subnormal deviation), and NumPy ignores it unless
asked. So a caller who asked for it (``np.errstate(under="warn")`` or ``all="raise"``) would see
spaCR's NumPy report it where the registry's compiled loops say nothing: those calls are spaCR's own.
"""

from __future__ import annotations

import numpy as np

from ._outcome import PassThrough

__all__ = ["underflow_ignored"]


def underflow_ignored() -> None:
    """Leave the call to spaCR unless NumPy ignores underflow here (its default).

    :raises PassThrough: the caller's ``np.errstate`` reports underflow.
    """
    handling = np.geterr()["under"]
    if handling != "ignore":
        raise PassThrough(f"np.errstate(under={handling!r}) in force (spaCR's NumPy reports underflow)")
