"""A seam's two outcomes, shared by every module that serves one: the registry's answer and the
backend it is counted under, or the reason the call is spaCR's own."""

from __future__ import annotations

import math

import numpy as np

from .. import last_served

__all__ = ["PassThrough", "finite_extent", "served_by"]


class PassThrough(Exception):  # an outcome, read as "spaCR's own function answers this"
    """The call goes to spaCR's own function; the message is the reason the report counts."""


def served_by() -> str:
    """The backend the last registry call on this thread is counted under in the report: its name,
    with the faster backends still compiling when one was (the report counts those calls apart),
    or ``"core"`` for an answer the core gave itself."""
    backend, waiting = last_served()
    served = backend or "core"
    return f"{served} ({', '.join(waiting)} still compiling)" if waiting else served


def finite_extent(array: np.ndarray, what: str, largest: float = math.inf, why: str = "") -> float:
    """The largest absolute value in ``array``, or a pass-through where a NaN or an infinity is in it
    (spaCR's NumPy decides a NaN's bits and its warnings) or a value lies beyond ``largest``
    (spaCR's arithmetic may overflow there). One pass of ``min`` and ``max``; an empty array is 0.

    :param array: a real array, already read as the seam reads it.
    :param what: the argument, as the reason names it (``"the field"``, ``"source"``).
    :param largest: the greatest magnitude served.
    :param why: words appended to the NaN reason, in parentheses.
    """
    if not array.size:
        return 0.0
    lowest, highest = float(array.min()), float(array.max())
    if not (math.isfinite(lowest) and math.isfinite(highest)):
        raise PassThrough(f"a NaN or infinity in {what}" + (f" ({why})" if why else ""))
    extent = max(-lowest, highest)
    if extent > largest:
        raise PassThrough(f"a coordinate of {what} beyond {largest:g} (spaCR's arithmetic may overflow)")
    return extent
