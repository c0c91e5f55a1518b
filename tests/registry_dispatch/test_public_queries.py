"""The registry's two cheap public questions for a caller with a way of its own: which backends
above the floor would serve an operation here (``backends_above_floor``), and who served the last
call (``last_served``, :func:`last_dispatch`'s backend and waiting list without its record)."""

from __future__ import annotations

import numpy as np

import spacr_accel_core
from spacr_accel_core import backends_above_floor, last_dispatch, last_served, ops, use

FIRST = np.arange(6, dtype=np.float32).reshape(2, 3)
SECOND = np.arange(12, dtype=np.float32).reshape(3, 4) - 5


def test_backends_above_floor_are_those_in_line_for_the_operation_without_the_floor(kit, plug):
    plug(kit.make_plugin("card", priority=5000.0, accelerated=True, matmul=kit.reference_matmul), "card")
    plug(kit.make_plugin("lower", priority=110.0, matmul=kit.reference_matmul), "lower")
    above = backends_above_floor("matmul")
    assert above[0] == "card" and "lower" in above and above.index("card") < above.index("lower")
    assert "numpy" not in above
    assert "card" not in backends_above_floor("maximum_filter")  # it does not implement it
    assert "card" not in backends_above_floor("matmul", gpu=False) and "lower" in backends_above_floor("matmul", False)
    with use("numpy"):
        assert backends_above_floor("matmul") == ()
    with use("lower"):
        assert backends_above_floor("matmul") == ("lower",)
    with spacr_accel_core.config.override(operations={"matmul": ["card"]}):
        assert backends_above_floor("matmul") == ("card",)


def test_last_served_is_the_last_dispatchs_backend_and_waiting_list(kit, plug):
    plug(kit.make_plugin("lower", priority=110.0, matmul=kit.reference_matmul), "lower")
    ops.matmul(FIRST, SECOND)
    record = last_dispatch()
    assert record is not None
    assert last_served() == (record.backend, record.waiting) == ("lower", ())
    ops.matmul(FIRST, SECOND, backend="numpy")
    assert last_served() == ("numpy", ())
    ops.maximum_filter(np.ones((4, 4), np.float32), 1)  # a window of one pixel: the core's own answer
    record = last_dispatch()
    assert record is not None
    assert last_served() == (record.backend, ()) == ("core", ())
