"""Whether two answers are the same, bit for bit: the check a benchmark's row is conditioned on.

A benchmark that times the registry (or the patch) against spaCR's, NumPy's or scikit-image's own
code reports a time only for an answer identical to theirs: a faster wrong answer is an error, not a
row. The comparison is the patch's own (``spacr_accel_core.patch.first_difference``, which its
``check`` mode compares by): the same bits, not the same values, so ``-0.0`` and ``+0.0`` differ, two
NaNs of the same bits do not, and an array's dtype and shape count. Here the message names the other
side "the reference's", since not every benchmark compares with spaCR.

The benchmarks import this module by name, beside them, as they import :mod:`_timing`.
"""

from __future__ import annotations

from typing import Any


def first_difference(got: Any, expected: Any, where: str = "") -> str | None:
    """Where ``got`` first differs from ``expected`` (dtype, shape, an element's bits, a record's
    field, a key), in words, or ``None`` when they are the same.

    :param got: the answer under test (the registry's, the patch's).
    :param expected: the answer it must equal (spaCR's own, NumPy's).
    :param where: the path to this part of the answer, for the message.
    """
    # imported at the first comparison: a benchmark's timed child that never compares stays as light
    # as it was, and a spaCR-side child never imports the patch
    from spacr_accel_core.patch import first_difference as compared

    return compared(got, expected, where, against="the reference's")
