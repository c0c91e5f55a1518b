"""The exact nearest-neighbour arithmetic every backend shares: the public face, for third-party
backend authors, of the kit's module that defines it (``spacr_accel_core.kit._exact``).

A backend's verdict on "nearest" must be the contract's: the float64 sum, coordinate by coordinate
in order, of the squared differences of the float32 coordinates (:func:`exact_squared`), the lowest
index among equal sums (:func:`pick_lowest`, :func:`pick_lowest_dense`). A fast, rounded search may
only nominate candidates for that verdict; :func:`expansion_plan` prepares the most useful one with
its proven bound. :func:`distinct_rows` and :func:`integer_matmul` are the duplicate targets searched
once and the exact integer product. The same names are in :mod:`spacr_accel_core.toolkit`, the
backend author's one door; this module needs only NumPy and is cheap to import.
"""

from __future__ import annotations

from .kit._exact import (
    EXACT_IN_FLOAT32,
    ExpansionPlan,
    distances,
    distinct_rows,
    exact_squared,
    expansion_plan,
    integer_matmul,
    pick_lowest,
    pick_lowest_dense,
)

__all__ = ["EXACT_IN_FLOAT32", "ExpansionPlan", "distances", "distinct_rows", "exact_squared", "expansion_plan",
           "integer_matmul", "pick_lowest", "pick_lowest_dense"]
