"""The conformance suite every backend passes: ours and third parties', the same way.

WHY IT SHIPS INSIDE THE PACKAGE. A backend tested only against itself is how a fallback quietly
becomes a second implementation nobody compares. So the checks live here, next to the contract,
and compare each backend with a PLAIN reference (a few obvious lines of NumPy, slow and clearly
right) on hypothesis-generated input: random shapes, sizes and dtypes, NaN and infinity, integer
grids full of ties and duplicates, empty sets, non-contiguous views, chunk independence.

Use it from a test module of the backend's own distribution::

    from spacr_accel_core.testing import BackendConformance

    class TestMyBackend(BackendConformance):
        backend = "mybackend"

A backend that cannot run here (its forced call raises :class:`RuntimeError`, e.g. no device)
has its primitive checks skipped with that reason, and instead is checked to decline cleanly:
a forced call raises a ``RuntimeError`` and automatic dispatch still answers.

Needs ``pytest`` and ``hypothesis`` (``pip install spacr-accel-core[testing]``).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .. import last_dispatch, ops

__all__ = [
    "BackendConformance",
    "assert_same_field",
    "reference_matmul",
    "reference_maximum_filter",
    "reference_nearest",
]


def reference_maximum_filter(field: np.ndarray, size: int) -> np.ndarray:
    """The contract's windowed maximum, plainly: edge padding and a max over every window.

    ``ndarray.max`` propagates NaN, which is exactly the NaN rule; adding ``+0.0`` gives the
    contract's sign of zero (a maximum of zero is ``+0.0``).

    :param field: a 2-D array.
    :param size: the window edge (even raised to odd; ``<= 1`` is a copy).
    """
    data = np.asarray(field).astype(np.float32)
    if size % 2 == 0:
        size += 1
    if size <= 1 or data.size == 0:
        return data.copy()
    radius = size // 2
    padded = np.pad(data, radius, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, (size, size))
    return np.asarray(windows.max(axis=(-2, -1)), dtype=np.float32) + np.float32(0.0)


def assert_same_field(got: np.ndarray, expected: np.ndarray) -> None:
    """Bit-identical float32 fields: the same NaN positions and the same bits everywhere else.

    ``np.array_equal`` would call ``-0.0`` and ``+0.0`` equal, which is exactly what a
    bit-identity check must not do; NaN payloads are free to differ.

    :param got: what the backend returned.
    :param expected: the reference.
    """
    assert got.dtype == np.float32 and expected.dtype == np.float32, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan), "NaN positions differ"
    differ = (got.view(np.uint32) != expected.view(np.uint32)) & ~nan
    assert not differ.any(), f"{int(differ.sum())} pixels differ, first at {np.argwhere(differ)[0].tolist()}"


def reference_nearest(source: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The contract's nearest neighbours, plainly: every pair, float64, coordinates in order.

    Deliberately written out here rather than built on :mod:`spacr_accel_core.exact`, which the
    shipped backends use: a reference that shared their code would share their bugs.

    :param source: ``(N, D)`` points (taken as float32, like the ops do).
    :param target: ``(M, D)`` points.
    :returns: int64 indices (first minimum: the lowest index on a tie) and float32 distances.
    """
    s = np.asarray(source).astype(np.float32).astype(np.float64)
    t = np.asarray(target).astype(np.float32).astype(np.float64)
    if t.shape[0] == 0:
        return np.full(s.shape[0], -1, np.int64), np.full(s.shape[0], np.inf, np.float32)
    squared = np.zeros((s.shape[0], t.shape[0]))
    for axis in range(s.shape[1]):
        squared += np.square(s[:, None, axis] - t[None, :, axis])
    index = np.argmin(squared, axis=1).astype(np.int64)
    best = squared[np.arange(s.shape[0]), index]
    return index, np.sqrt(best).astype(np.float32)


def reference_matmul(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact product in float64 and a bound on float32 rounding for each entry.

    :returns: ``(product, tolerance)``: a float32 backend must land within ``tolerance``.
    """
    a = np.asarray(first).astype(np.float64)
    b = np.asarray(second).astype(np.float64)
    inner = a.shape[-1]
    bound = np.matmul(np.abs(a), np.abs(b))
    # float32 accumulation over `inner` terms plus the rounding of inputs and the result.
    tolerance = (2 * inner + 4) * float(np.finfo(np.float32).eps) * bound + 1e-30
    return np.matmul(a, b), tolerance


# ---- strategies ------------------------------------------------------------------------------

_FIELD_DTYPES = st.sampled_from([np.float32, np.float64, np.int16, np.uint8, np.bool_])


@st.composite
def _fields(draw: st.DrawFn, *, special: bool = True) -> np.ndarray:
    dtype = np.dtype(draw(_FIELD_DTYPES))
    shape = draw(st.tuples(st.integers(1, 24), st.integers(1, 24)))
    if dtype.kind == "f":
        elements = st.floats(-1e6, 1e6, allow_nan=False, width=32)
        if special and draw(st.booleans()):
            elements = st.one_of(elements, st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0]))
        data = draw(hnp.arrays(dtype, shape, elements=elements))
    else:
        data = draw(hnp.arrays(dtype, shape))
    if draw(st.booleans()) and data.shape[0] > 1:
        data = data[::-1].T  # a non-contiguous view
    return data


@st.composite
def _point_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    width = draw(st.sampled_from([1, 2, 3, 5, 17]))
    n = draw(st.integers(1, 40))
    m = draw(st.integers(1, 40))
    if draw(st.booleans()):
        # A small integer grid: full of exact ties and duplicate targets.
        grid = st.integers(-3, 3)
        source = draw(hnp.arrays(np.int32, (n, width), elements=grid))
        target = draw(hnp.arrays(np.int32, (m, width), elements=grid))
        return source.astype(draw(st.sampled_from([np.float32, np.float64, np.int64]))), target
    coordinates = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False, width=32)
    source = draw(hnp.arrays(np.float32, (n, width), elements=coordinates))
    target = draw(hnp.arrays(np.float32, (m, width), elements=coordinates))
    return source, target


@st.composite
def _operands(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.float64, np.int32, np.uint8, np.float16])))
    inner = draw(st.integers(1, 16))
    rows = draw(st.integers(1, 12))
    cols = draw(st.integers(1, 12))
    form = draw(st.sampled_from(["matrix", "vector-left", "vector-right", "batch"]))
    shapes = {
        "matrix": ((rows, inner), (inner, cols)),
        "vector-left": ((inner,), (inner, cols)),
        "vector-right": ((rows, inner), (inner,)),
        "batch": ((2, rows, inner), (inner, cols)),
    }[form]
    elements = (st.floats(-100, 100, allow_nan=False, width=16 if dtype == np.float16 else 32)
                if dtype.kind == "f" else None)
    first = draw(hnp.arrays(dtype, shapes[0], elements=elements))
    second = draw(hnp.arrays(dtype, shapes[1], elements=elements))
    return first, second


# differing_executors: the same @given method runs once per backend subclass, by design.
_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
)


class BackendConformance:
    """Subclass as ``Test<Name>`` with ``backend = "<plugin name>"``; pytest runs the rest.

    Every check forces the backend with ``backend=`` so a silent fall-through to NumPy cannot
    make a broken backend look conformant, and confirms with :func:`last_dispatch` that the
    backend itself answered.
    """

    backend: ClassVar[str]
    """The plugin name to force."""

    _decline: ClassVar[str | None]

    # ---- availability ------------------------------------------------------------------------

    def _runs_here(self) -> str | None:
        """``None`` when a forced call works here, else the ``RuntimeError`` that stopped it."""
        cls = type(self)
        if "_decline" not in cls.__dict__:
            try:
                ops.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), backend=self.backend)
                cls._decline = None
            except RuntimeError as exc:
                cls._decline = f"{type(exc).__name__}: {exc}"
        return cls.__dict__["_decline"]  # type: ignore[no-any-return]  # set just above

    def _require(self) -> None:
        reason = self._runs_here()
        if reason is not None:
            pytest.skip(f"backend {self.backend!r} cannot run here: {reason}")

    def _served(self) -> None:
        dispatch = last_dispatch()
        assert dispatch is not None and dispatch.backend == self.backend, dispatch

    def test_declines_cleanly_where_it_cannot_run(self) -> None:
        reason = self._runs_here()
        if reason is None:
            pytest.skip(f"backend {self.backend!r} runs here")
        with pytest.raises(RuntimeError):
            ops.nearest_neighbours(np.zeros((3, 2)), np.ones((4, 2)), backend=self.backend)
        index, distance = ops.nearest_neighbours(np.zeros((3, 2)), np.ones((4, 2)))
        assert index.tolist() == [0, 0, 0]
        assert np.allclose(distance, np.sqrt(2))
        dispatch = last_dispatch()
        assert dispatch is not None and dispatch.backend != self.backend
        assert self.backend not in ops.accelerated_backends()

    # ---- maximum_filter ----------------------------------------------------------------------

    @_SETTINGS
    @given(field=_fields(), size=st.integers(0, 12))
    def test_maximum_filter_matches_reference(self, field: np.ndarray, size: int) -> None:
        self._require()
        before = field.copy()
        got = ops.maximum_filter(field, size, backend=self.backend)
        assert_same_field(got, reference_maximum_filter(field, size))
        assert np.array_equal(field, before, equal_nan=True), "the input was modified"

    @_SETTINGS
    @given(field=_fields(special=False), size=st.integers(2, 9))
    def test_maximum_filter_nan_window_is_nan(self, field: np.ndarray, size: int) -> None:
        self._require()
        data = np.array(field, dtype=np.float32)
        data[data.shape[0] // 2, data.shape[1] // 3] = np.nan
        got = ops.maximum_filter(data, size, backend=self.backend)
        if data.size > 1:  # a single pixel is its own maximum: the core answers that itself
            self._served()
        assert_same_field(got, reference_maximum_filter(data, size))

    def test_maximum_filter_large_windows_and_fields(self) -> None:
        self._require()
        rng = np.random.default_rng(7)
        for shape, size in (((301, 257), 15), ((64, 700), 31), ((5, 3), 41), ((1, 1000), 9)):
            field = rng.standard_normal(shape).astype(np.float32)
            got = ops.maximum_filter(field, size, backend=self.backend)
            self._served()
            assert_same_field(got, reference_maximum_filter(field, size))

    def test_maximum_filter_sign_of_zero(self) -> None:
        """Windows whose maximum is zero, met as -0.0 and +0.0 in every order: always +0.0."""
        self._require()
        rng = np.random.default_rng(9)
        field = -np.abs(rng.standard_normal((40, 50))).astype(np.float32)
        field[rng.random(field.shape) < 0.3] = -0.0
        field[rng.random(field.shape) < 0.2] = 0.0
        for size in (3, 5, 9):
            got = ops.maximum_filter(field, size, backend=self.backend)
            self._served()
            assert_same_field(got, reference_maximum_filter(field, size))
            assert not np.signbit(got[got == 0]).any()

    # ---- matmul ------------------------------------------------------------------------------

    @_SETTINGS
    @given(operands=_operands())
    def test_matmul_matches_reference(self, operands: tuple[np.ndarray, np.ndarray]) -> None:
        self._require()
        first, second = operands
        got = ops.matmul(first, second, backend=self.backend)
        self._served()
        expected, tolerance = reference_matmul(first, second)
        assert isinstance(got, np.ndarray) and got.dtype == np.float32
        assert got.shape == expected.shape
        assert np.all(np.abs(got.astype(np.float64) - expected) <= tolerance)

    def test_matmul_tall_by_tiny(self) -> None:
        self._require()
        rng = np.random.default_rng(3)
        first = rng.standard_normal((50_000, 4)).astype(np.float32)
        second = rng.standard_normal((4, 4)).astype(np.float32)
        got = ops.matmul(first, second, backend=self.backend)
        expected, tolerance = reference_matmul(first, second)
        assert np.all(np.abs(got - expected) <= tolerance)

    # ---- nearest_neighbours ------------------------------------------------------------------

    @_SETTINGS
    @given(points=_point_sets(), chunk=st.integers(1, 50))
    def test_nearest_matches_reference_exactly(self, points: tuple[np.ndarray, np.ndarray], chunk: int) -> None:
        self._require()
        source, target = points
        index, distance = ops.nearest_neighbours(source, target, backend=self.backend, chunk=chunk)
        self._served()
        expected_index, expected_distance = reference_nearest(source, target)
        assert index.dtype == np.int64 and distance.dtype == np.float32
        assert np.array_equal(index, expected_index)
        assert np.array_equal(distance, expected_distance)

    def test_nearest_ties_go_to_the_lowest_index(self) -> None:
        self._require()
        target = np.array([[1, 0], [0, 1], [-1, 0], [0, -1], [1, 0], [0, 0]], np.float32)
        source = np.array([[0, 0], [0.5, 0.5], [5, 0], [0, 0.5]], np.float32)
        index, _ = ops.nearest_neighbours(source, target[:5], backend=self.backend)
        assert index.tolist() == [0, 0, 0, 1]
        index, distance = ops.nearest_neighbours(source, target, backend=self.backend)
        assert index.tolist() == [5, 0, 0, 1]
        assert distance.tolist() == [0.0, np.float32(np.sqrt(0.5)), 4.0, 0.5]

    def test_nearest_empty_target_and_source(self) -> None:
        index, distance = ops.nearest_neighbours(np.ones((3, 2)), np.empty((0, 2)), backend=self.backend)
        assert index.tolist() == [-1, -1, -1] and np.all(np.isinf(distance))
        index, distance = ops.nearest_neighbours(np.empty((0, 2)), np.ones((3, 2)), backend=self.backend)
        assert index.shape == (0,) and distance.shape == (0,)

    def test_nearest_is_independent_of_chunk_on_larger_sets(self) -> None:
        self._require()
        rng = np.random.default_rng(11)
        for width in (2, 3, 24):
            # Rounded coordinates make exact ties; a far offset stresses float32 expansions.
            source = np.round(rng.uniform(0, 40, (1500, width))).astype(np.float32) + 1000
            target = np.round(rng.uniform(0, 40, (1200, width))).astype(np.float32) + 1000
            expected = reference_nearest(source, target)
            for chunk in (1, 97, 4096):
                index, distance = ops.nearest_neighbours(source, target, backend=self.backend, chunk=chunk)
                self._served()
                assert np.array_equal(index, expected[0]), (width, chunk)
                assert np.array_equal(distance, expected[1]), (width, chunk)

    def test_nearest_wide_continuous_points(self) -> None:
        self._require()
        rng = np.random.default_rng(5)
        source = rng.standard_normal((800, 64)).astype(np.float32)
        target = rng.standard_normal((900, 64)).astype(np.float32)
        index, distance = ops.nearest_neighbours(source, target, backend=self.backend)
        expected = reference_nearest(source, target)
        assert np.array_equal(index, expected[0])
        assert np.array_equal(distance, expected[1])
