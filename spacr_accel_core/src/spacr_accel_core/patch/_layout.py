"""The memory order of the fields spaCR makes from the fields it is given, for the seams that answer
with fields of their own.

spaCR's NumPy keeps its inputs' order: ``np.asarray(plane, dtype=np.float32)`` of a Fortran-ordered
plane is Fortran-ordered, and ``np.clip``, ``np.zeros_like``, ``np.stack``, a reduction and
``astype`` all give a field made from it (``order="K"``) its columns first. So a Fortran-ordered (or
transposed) plane comes back from ``_clipped``, ``sbs_mean_target`` and ``align_field``
Fortran-ordered, a C-ordered or merely strided one C-ordered, while the registry answers in C order.
The seams read the order off the strides here, and either copy their answer into it or, where spaCR
would mix orders (channels of both kinds), leave the call to spaCR.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["common_order", "field_order", "in_order"]


def field_order(field: np.ndarray) -> str:
    """``"F"`` where NumPy makes a field like this 2-D one column by column, ``"C"`` otherwise.

    NumPy orders the axes of a new field by the given one's strides, largest first (by size, ties in
    axis order); an axis of one pixel has no order to keep.

    :param field: a 2-D array, as spaCR reads it (after its float32 cast).
    """
    rows, columns = field.shape
    if rows > 1 and columns > 1 and abs(field.strides[0]) < abs(field.strides[1]):
        return "F"
    return "C"


def common_order(fields: Iterable[np.ndarray]) -> str | None:
    """The one order every field has (:func:`field_order`), or None where they differ.

    :param fields: 2-D arrays, as spaCR reads them.
    """
    orders = {field_order(field) for field in fields}
    return orders.pop() if len(orders) == 1 else None


def in_order(answer: np.ndarray, order: str) -> np.ndarray:
    """``answer`` (C-ordered) laid out as spaCR's, columns first where ``order`` is ``"F"``.

    :param answer: the registry's 2-D answer.
    :param order: ``"C"`` or ``"F"``, from :func:`field_order`.
    """
    return np.asfortranarray(answer) if order == "F" else answer
