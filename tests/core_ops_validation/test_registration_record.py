"""The ``Registration`` record: spaCR's frozen record (value equality, hashable, ``.shift``) for two
2-D fields, and for a stack of pairs a record that is still a value: compared field by field, its
arrays read-only."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from spacr_accel_core import Registration, ops

RNG = np.random.default_rng(4)
FIRST = RNG.random((2, 3, 8, 6))
SECOND = np.roll(FIRST, (1, -2), axis=(-2, -1))


def test_two_fields_give_spacrs_record() -> None:
    found = ops.phase_correlate(FIRST[0, 0], SECOND[0, 0], backend="numpy")
    again = ops.phase_correlate(FIRST[0, 0], SECOND[0, 0], backend="numpy")
    assert [field.name for field in dataclasses.fields(Registration)] == ["dy", "dx", "peak_ratio", "accepted",
                                                                            "backend"]
    assert found == again and hash(found) == hash(again)
    assert found.shift == (found.dy, found.dx) == (-1, 2)
    assert found != dataclasses.replace(found, dx=3)
    assert found != dataclasses.replace(found, backend="numba")
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.dy = 5  # type: ignore[misc]


def test_two_stacks_compare_by_value() -> None:
    """Two answers for one stack are equal (NumPy's ``==`` of two arrays raised "the truth value of
    an array ... is ambiguous"), and one differing pair makes them unequal."""
    found = ops.phase_correlate(FIRST, SECOND, backend="numpy")
    again = ops.phase_correlate(FIRST, SECOND, backend="numpy")
    assert found == again
    assert (found != again) is False
    moved = dataclasses.replace(found, dx=found.dx + np.array([[0, 0, 0], [0, 1, 0]]))
    assert found != moved
    assert found != dataclasses.replace(found, dx=found.dx[:1])  # another shape is another value
    assert found != ops.phase_correlate(FIRST[0, 0], SECOND[0, 0], backend="numpy")
    assert found.__eq__("not a registration") is NotImplemented


def test_a_stacks_arrays_are_read_only() -> None:
    """A frozen record whose arrays could be written would change under whoever holds it; the
    caller's own arrays stay writable (the record holds read-only views)."""
    found = ops.phase_correlate(FIRST, SECOND, backend="numpy")
    for name in ("dy", "dx", "peak_ratio", "accepted"):
        value = getattr(found, name)
        assert isinstance(value, np.ndarray) and not value.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            value[0, 0] = 0
    mine = np.array([1, 2])
    record = Registration(mine, mine, np.array([1.0, 2.0]), np.array([True, False]), "mine")
    assert mine.flags.writeable and not record.dy.flags.writeable
    mine[0] = 7
    assert record.dy[0] == 7  # a view, not a copy


def test_a_stack_record_is_not_hashable() -> None:
    with pytest.raises(TypeError, match="unhashable"):
        hash(ops.phase_correlate(FIRST, SECOND, backend="numpy"))
