"""What a phase correlation measured, and how a surface's peak becomes a shift and a verdict.

A backend finds each surface's peak and its height against the surface; everything after that
(folding the wrapped peak to the shift nearest the caller's expectation, accepting or refusing it)
is decided here, once, in integers, so it cannot differ between backends.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Registration"]


@dataclass(frozen=True)
class Registration:
    """What one pair of fields (or each pair of a stack) measured.

    Rolling ``second`` by ``(dy, dx)`` (``np.roll(second, (dy, dx), axis=(-2, -1))``) lands it on
    ``first``. For a stack of pairs every field is an array of the stack's leading shape.

    :param dy: rows to move ``second`` by, the representative of the wrapped peak nearest the
        expected shift (halfway between two, the one spaCR's ``round`` picks: ties to even).
    :param dx: the same across columns.
    :param peak_ratio: the surface's peak against its mean absolute value: the evidence, not the
        shift (0 for a field with no variation).
    :param accepted: whether this is a real overlap: within ``tolerance`` of the expected shift
        when one is given, else a peak ratio of at least ``min_peak_ratio`` away from the origin.
        A field with no variation is never accepted.
    :param backend: the backend that computed the surfaces (``"core"`` for an empty stack).

    A value, as spaCR's record is: two records are equal when every field is (for a stack, every
    pair: NumPy's ``==`` of two arrays would raise "the truth value ... is ambiguous"; a record is
    equal to itself even holding NaN; a Dask record's arrays are computed, together, to be
    compared), and a stack's arrays are read-only views (the record is frozen; the caller's own
    arrays stay writable), also once pickled or copied. A record of two 2-D fields is hashable; a
    stack's, holding arrays, is not.
    """

    dy: Any
    dx: Any
    peak_ratio: Any
    accepted: Any
    backend: str

    def __post_init__(self) -> None:
        for name in _MEASURED:
            value = getattr(self, name)
            if isinstance(value, np.ndarray):
                view = value.view()
                view.flags.writeable = False
                object.__setattr__(self, name, view)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Registration) or other.__class__ is not self.__class__:
            return NotImplemented
        if self is other:
            return True
        if self.backend != other.backend:
            return False
        values = _computed(tuple(getattr(record, name) for record in (self, other) for name in _MEASURED))
        count = len(_MEASURED)
        return all(_same(mine, theirs) for mine, theirs in zip(values[:count], values[count:], strict=True))

    def __hash__(self) -> int:
        return hash((self.dy, self.dx, self.peak_ratio, self.accepted, self.backend))

    def __reduce__(self) -> tuple[type[Registration], tuple[Any, ...]]:
        # Rebuilt through __init__, so an unpickled or deep-copied stack's arrays (Dask pickles
        # records between processes) are read-only views again, not writable copies.
        return self.__class__, tuple(getattr(self, field.name) for field in dataclasses.fields(self))

    @property
    def shift(self) -> tuple[Any, Any]:
        """``(dy, dx)``, for a caller that wants the pair."""
        return self.dy, self.dx


_MEASURED = ("dy", "dx", "peak_ratio", "accepted")
"""The record's fields that are numbers for two 2-D fields and arrays for a stack."""


def _computed(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """``values`` with Dask's lazy arrays computed together, in one pass over their graphs: computed
    one by one, each field of a Dask record would run its whole registration again."""
    if not any(hasattr(value, "__dask_graph__") for value in values):
        return values
    from dask.base import compute  # already imported: the values are its collections

    return tuple(compute(*values))  # type: ignore[no-untyped-call]  # dask.base.compute has no annotations


def _same(mine: Any, theirs: Any) -> bool:
    """Whether two fields of two records hold the same value: numbers compared as a tuple compares
    them (the same object, or equal: spaCR's dataclass record), arrays (or a number beside an array)
    by shape and every element."""
    if mine is theirs:
        return True
    if isinstance(mine, (int, float)) and isinstance(theirs, (int, float)):
        return bool(mine == theirs)
    return bool(np.array_equal(np.asarray(mine), np.asarray(theirs)))


def nearest_representative(value: np.ndarray, extent: int, about: int) -> np.ndarray:
    """The representative of ``value`` modulo ``extent`` nearest ``about``.

    A shift of -213 rows of a 1480-row field comes back from the transform as +1267; the caller's
    expectation decides which of the two it is. Halfway between two representatives, the one an
    even number of extents from ``value`` wins (round half to even), computed in integers.

    :param value: int64 peak coordinates in ``[0, extent)``.
    :param extent: the axis length, at least 1.
    :param about: the expected shift along the axis.
    :returns: int64 shifts.
    """
    turns, rest = np.divmod(np.int64(about) - value, np.int64(extent))
    twice = 2 * rest
    up = (twice > extent) | ((twice == extent) & (turns % 2 == 1))
    result: np.ndarray = value + extent * (turns + up)
    return result


def judge(peaks: np.ndarray, ratios: np.ndarray, varies: np.ndarray, shape: tuple[int, ...],
          expected: tuple[int, int], tolerance: tuple[float, float] | None, min_peak_ratio: float,
          backend: str) -> Registration:
    """The registration of each pair from its surface's peak.

    :param peaks: int64 flat row-major index of each surface's first maximum, ``(B,)``.
    :param ratios: float64 peak over mean absolute surface, ``(B,)``.
    :param varies: whether both fields of each pair hold more than one value, ``(B,)``.
    :param shape: the inputs' shape ``(..., H, W)``: the leading axes shape the answer.
    :param expected: the shift the caller expects, ``(rows, columns)``.
    :param tolerance: how far from ``expected`` a shift may land and be accepted, or ``None``.
    :param min_peak_ratio: without a tolerance, the least ratio a pair is accepted at.
    :param backend: who computed the surfaces.
    :returns: scalars for one pair of 2-D fields, arrays of ``shape[:-2]`` for a stack.
    """
    height, width = shape[-2:]
    peaks = np.where(varies, peaks, 0)  # a field without variation has an all-zero surface
    ratios = np.where(varies, ratios, 0.0)
    rows, columns = np.divmod(peaks, np.int64(width))
    dy = nearest_representative(rows, height, expected[0])
    dx = nearest_representative(columns, width, expected[1])
    if tolerance is not None:
        accepted = (np.abs(dy - expected[0]) <= tolerance[0]) & (np.abs(dx - expected[1]) <= tolerance[1])
    else:
        accepted = (ratios >= min_peak_ratio) & (peaks != 0)
    accepted &= varies
    lead = shape[:-2]
    if not lead:
        return Registration(int(dy[0]), int(dx[0]), float(ratios[0]), bool(accepted[0]), backend)
    return Registration(dy.reshape(lead), dx.reshape(lead), ratios.reshape(lead), accepted.reshape(lead), backend)


def repeats_read_once(array: np.ndarray) -> np.ndarray:
    """The stack with each leading axis of stride 0 (``np.broadcast_to``) read at its first index
    only, as a length-1 axis that broadcasts back: each distinct field once."""
    return array[tuple(slice(0, 1) if array.strides[i] == 0 else slice(None) for i in range(array.ndim - 2))]


def cast_keeping_broadcast(array: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """``array`` in ``dtype``; a broadcast stays a broadcast (its distinct fields cast, not its
    copies), so a reference cycle given as a view of one cycle is still one cycle to the backend."""
    if array.dtype == dtype:
        return array
    return np.broadcast_to(repeats_read_once(array).astype(dtype), array.shape)


def reference_fields(first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct fields of ``first`` (a stack ``(..., H, W)`` of references) and, for each pair,
    the index of the one it is registered against: what a backend transforms once and reuses.

    WHY. spaCR registers every cycle to the reference cycle: 44 pairs, 4 distinct reference fields,
    passed as ``np.broadcast_to(reference, stack.shape)``. Made contiguous, that view becomes 385 MB
    of copies (a second's page faults on a fresh process) of fields whose transforms are then
    computed again and again. A leading axis with stride 0 is read at its first index only, and
    fields equal in value (a reference repeated with ``np.repeat``) share the first one's index:
    found by a key of sampled pixels, confirmed by comparing the whole field. A field is compared
    whole with at most :data:`_COMPARED` earlier fields of its key, so a stack of fields that agree
    on every sampled pixel (masks, zero-padded tiles) costs a bounded number of comparisons each,
    not one per earlier field; past that a repeat is merely transformed again.

    :param first: the caller's reference stack (finite, already checked).
    :returns: C-contiguous ``(K, H, W)`` fields and int64 ``(B,)`` indices into them, ``B`` the
        number of pairs; a field equal to an earlier one is left in place and never pointed at.
    """
    lead, plane = first.shape[:-2], first.shape[-2:]
    seen = repeats_read_once(first)
    fields = np.ascontiguousarray(seen).reshape(-1, *plane)
    count = fields.shape[0]
    same = np.arange(count, dtype=np.int64)
    flat = fields.reshape(count, -1)
    step = max(1, flat.shape[1] // 1024)
    firsts: dict[int, list[int]] = {}
    for index in range(count):
        key = hash(flat[index, ::step].tobytes() + flat[index, -plane[1]:].tobytes())
        candidates = firsts.setdefault(key, [])
        match = next((known for known in candidates[:_COMPARED]
                      if np.array_equal(flat[known], flat[index])), None)
        if match is None:
            candidates.append(index)
        else:
            same[index] = match
    pairing = np.broadcast_to(same.reshape(seen.shape[:-2]), lead).reshape(-1)
    return fields, np.ascontiguousarray(pairing)


_COMPARED = 4
"""Earlier fields sharing a field's sampled key that it is compared with whole, at most."""
