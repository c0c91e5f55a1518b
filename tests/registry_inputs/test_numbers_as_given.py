"""Edges an adversarial review of the inputs found, shared by every operation: 0-d arrays are the
numbers they hold for every option, and an integer too long to print is refused naming its
argument, never a bare error raised while the message was formatted."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from spacr_accel_core import ops

FIELD = np.random.default_rng(3).random((9, 11)).astype(np.float32)
PAIR = np.random.default_rng(5).random((12, 10))
SHIFTED = np.roll(PAIR, (2, -3), axis=(0, 1))


def test_zero_d_arrays_are_numbers_for_every_option() -> None:
    """What ``np.ndim`` calls a scalar: a size of ``np.array(3.0)`` was a TypeError."""
    assert ops.maximum_filter(FIELD, np.array(3.0)).tobytes() == ops.maximum_filter(FIELD, 3).tobytes()
    assert ops.gaussian_filter(FIELD, 1.0, truncate=np.array(2)).tobytes() == ops.gaussian_filter(
        FIELD, 1.0, truncate=2.0).tobytes()
    assert ops.phase_correlate(PAIR, SHIFTED, expected=(np.array(12), 0)).dy == 10
    rng = np.random.default_rng(5)
    cells, others = rng.random((30, 2)), rng.random((40, 2))
    for k, bound in ((np.array(2), np.array(0.2)), (np.array(1), np.array(np.inf))):
        got, want = (ops.nearest_neighbours(cells, others, k=k, max_distance=bound),
                     ops.nearest_neighbours(cells, others, k=int(k), max_distance=float(bound)))
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    assert np.array_equal(ops.local_maxima(FIELD, 3, threshold=np.array(0.5, dtype=np.float32)),
                          ops.local_maxima(FIELD, 3, threshold=np.float32(0.5)))


# ---- integers too long to print ----------------------------------------------------------------

HUGE = 10**5000
"""Past Python's 4300-digit limit on ``str(int)``: a message quoting it with ``!r`` raised "Exceeds
the limit (4300 digits) for integer string conversion" instead of naming the argument."""


@pytest.mark.parametrize(("call", "name"), [
    (lambda: ops.gaussian_filter(FIELD, 1.0, truncate=HUGE), "truncate"),
    (lambda: ops.gaussian_filter(FIELD, -HUGE), "sigma"),
    (lambda: ops.gaussian_filter(FIELD, (1.0, HUGE)), "sigma"),
    (lambda: ops.phase_correlate(PAIR, PAIR, expected=(0, -HUGE)), r"expected\[1\]"),
    (lambda: ops.phase_correlate(PAIR, PAIR, tolerance=-HUGE), "tolerance"),
    (lambda: ops.nearest_neighbours(FIELD[:4, :2], FIELD[:4, :2], k=1, max_distance=-HUGE), "max_distance"),
    (lambda: ops.phase_correlate(PAIR, PAIR, expected=(HUGE,)), "expected"),
    (lambda: ops.phase_correlate(PAIR, PAIR, tolerance=[HUGE]), "tolerance"),
])
def test_an_integer_too_long_to_print_is_named(call: Any, name: str) -> None:
    with pytest.raises(ValueError, match=f"^{name} .*( integer of 16610 bits| too long to print)"):
        call()
