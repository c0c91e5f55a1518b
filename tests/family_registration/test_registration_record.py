"""The ``Registration`` record: spaCR's frozen record (value equality, hashable, ``.shift``) for two
2-D fields, and for a stack of pairs a record that is still a value: compared field by field, its
arrays read-only."""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle
import warnings
from typing import Any

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
        found.dy = 5  # type: ignore[misc]  # the assignment a frozen record must refuse


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


@pytest.mark.parametrize("clone", [lambda record: pickle.loads(pickle.dumps(record)), copy.deepcopy, copy.copy],
                         ids=["pickle", "deepcopy", "copy"])
def test_a_stacks_arrays_stay_read_only_through_pickling_and_copies(clone: Any) -> None:
    """Dask moves records between processes by pickling them: an unpickled (or deep-copied) record
    came back with writable arrays, a frozen record that could be changed under its holder."""
    found = ops.phase_correlate(FIRST, SECOND, backend="numpy")
    again = clone(found)
    assert again == found
    for name in ("dy", "dx", "peak_ratio", "accepted"):
        assert not getattr(again, name).flags.writeable
    single = ops.phase_correlate(FIRST[0, 0], SECOND[0, 0], backend="numpy")
    assert clone(single) == single and hash(clone(single)) == hash(single)


def test_a_record_is_equal_to_itself_even_holding_nan() -> None:
    """spaCR's dataclass record compares its fields as a tuple does (the same object is equal to
    itself), so a record holding NaN is still equal to itself and findable in a set."""
    record = Registration(1, 2, math.nan, False, "mine")
    assert record == record  # noqa: PLR0124  # comparing with itself is the point
    assert record in {record}
    assert record == dataclasses.replace(record, dy=1)  # the same NaN object, carried over
    stack = Registration(np.array([1]), np.array([2]), np.array([math.nan]), np.array([False]), "mine")
    assert stack == stack  # noqa: PLR0124  # comparing with itself is the point


def test_records_of_lazy_arrays_compare_without_a_warning() -> None:
    """A Dask record's fields are dask arrays: ``np.array_equal`` on them warned that Dask does not
    implement it (a FutureWarning: "may stop working"); they are computed and compared as arrays."""
    da = pytest.importorskip("dask.array")
    lazy = Registration(da.from_array(np.array([1, 2])), da.from_array(np.array([3, 4])),
                        da.from_array(np.array([5.0, 6.0])), da.from_array(np.array([True, False])), "dask")
    eager = Registration(np.array([1, 2]), np.array([3, 4]), np.array([5.0, 6.0]), np.array([True, False]), "dask")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lazy == eager
        assert lazy != dataclasses.replace(eager, dx=np.array([3, 5]))
