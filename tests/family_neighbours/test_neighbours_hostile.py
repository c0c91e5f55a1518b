"""An edge an adversarial review of the inputs found: a ``max_distance`` beyond float64's range,
even one too long to print, is no bound."""

from __future__ import annotations

import numpy as np

from spacr_accel_core import ops

FIELD = np.random.default_rng(3).random((9, 11)).astype(np.float32)


# ---- integers too long to print ----------------------------------------------------------------

HUGE = 10**5000
"""Past Python's 4300-digit limit on ``str(int)``: a message quoting it with ``!r`` raised "Exceeds
the limit (4300 digits) for integer string conversion" instead of naming the argument."""


def test_a_max_distance_too_long_to_print_is_no_bound() -> None:
    """``max_distance`` beyond float64's range is no bound; one past 4300 digits raised while the
    refusal message for NaN was formatted, before the value was even read."""
    points = FIELD[:5, :2]
    want = ops.nearest_neighbours(points, points, k=2)
    found = ops.nearest_neighbours(points, points, k=2, max_distance=HUGE)
    np.testing.assert_array_equal(found[0], want[0])
    np.testing.assert_array_equal(found[1], want[1])
