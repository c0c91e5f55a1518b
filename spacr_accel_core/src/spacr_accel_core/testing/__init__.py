"""The conformance suite every backend passes: ours and third parties', the same way.

WHY IT SHIPS INSIDE THE PACKAGE. A backend tested only against itself is how a fallback quietly
becomes a second implementation nobody compares. So the checks live here, next to the contract,
and compare each backend with a PLAIN reference (a few obvious lines of NumPy, slow and clearly
right) on hypothesis-generated input: random shapes, sizes and dtypes, NaN and infinity, integer
grids full of ties and duplicates, tight clusters beside far outliers, empty sets, non-contiguous
views, chunk independence.

Use it from a test module of the backend's own distribution::

    from spacr_accel_core.testing import BackendConformance

    class TestMyBackend(BackendConformance):
        backend = "mybackend"

What is checked follows what the registry says about the plugin (its row in
:func:`spacr_accel_core.plugins`), never a trial call:

- Only the primitives it implements (the row's ``operations``); the checks of any other
  primitive are skipped with that reason.
- A plugin whose status is ``ok`` must answer every forced call, except that it may decline one
  input (raise :class:`~spacr_accel_core.BackendDeclined`: a NaN it cannot handle, an input too
  small to pay for a transfer). Such a call is checked per call: automatic dispatch must then
  answer from another backend, exactly as the reference does. Any other exception fails the check.
- A plugin whose status is not ``ok`` (``unusable``: no device; ``faulty``, ``blocked``, ...) is
  checked to stay out of automatic dispatch while dispatch still answers
  (:meth:`BackendConformance.test_declines_cleanly_where_it_cannot_run`). Its primitive checks
  still force it, because an unusable backend may still be forced with ``backend=`` (torch on a
  machine without a GPU runs on the CPU); each check whose forced call raises
  :class:`RuntimeError` is skipped with that reason.

A name that no installed plugin has fails every check: a misspelt ``backend`` must not pass.

Needs ``pytest`` and ``hypothesis`` (``pip install spacr-accel-core[testing]``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .. import BackendDeclined, PluginFault, PluginStatus, last_dispatch, ops, plugins, warm_up
from ..contract._errors import describe
from ..operations._operations import OPERATIONS
from ._decode import DecodeConformance
from ._filters import FilterConformance
from ._levels import LevelsConformance
from ._planes import PlanesConformance
from ._points import PointsConformance
from ._references import assert_same_field, reference_matmul, reference_maximum_filter, reference_nearest
from ._science import ScienceConformance
from ._spacr_field import AnchorField, SbsField, anchor_field, sbs_field
from ._strategies import (
    _CAMERA_DTYPES,
    _clustered_fields,
    _clustered_operands,
    _clustered_point_sets,
    _fields,
    _operands,
    _point_sets,
    filter_stacks,
    landmark_point_sets,
    packed_descriptors,
    tie_heavy_point_sets,
)

__all__ = [
    "AnchorField",
    "BackendConformance",
    "SbsField",
    "anchor_field",
    "assert_same_field",
    "filter_stacks",
    "landmark_point_sets",
    "packed_descriptors",
    "reference_matmul",
    "reference_maximum_filter",
    "reference_nearest",
    "sbs_field",
    "tie_heavy_point_sets",
]



_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
)
_FEWER = settings(_SETTINGS, max_examples=30)
"""For the clustered cases: each example is small, but they add up across every backend."""

_T = TypeVar("_T")


def _small_case(operation: str) -> tuple[tuple[Any, ...], dict[str, Any], Callable[[Any], None]]:
    """The operation's small case from its table entry, and the check of an answer against its
    reference: for a backend that cannot run here. Every operation has one (the table's record
    requires it), so there is no fallback to another operation's."""
    entry = OPERATIONS[operation]
    example = entry.small()
    keywords = dict(example.keywords)
    expected = entry.reference(*example.args, **keywords)

    def check(got: Any) -> None:
        agrees, detail = entry.agree(expected, got)
        assert agrees, f"{operation} on {example.label}: {detail}"

    return example.args, keywords, check


def _core_filters(shape: tuple[int, ...], size: int) -> bool:
    """Whether the core answers this window itself: a copy (``size <= 1``), an empty field, or a
    window that covers the whole field from every pixel (a reduction, ``>= 2 * max(h, w) - 1``)."""
    window = size + 1 if size % 2 == 0 else size
    return window <= 1 or 0 in shape or window >= 2 * max(shape) - 1



class BackendConformance(ScienceConformance, FilterConformance, DecodeConformance, PointsConformance,
                         PlanesConformance, LevelsConformance):
    """Subclass as ``Test<Name>`` with ``backend = "<plugin name>"``; pytest runs the rest.

    Every check forces the backend with ``backend=`` so a silent fall-through to NumPy cannot
    make a broken backend look conformant, and confirms with :func:`last_dispatch` that the
    backend itself answered; where the backend declines the input instead, the same check is
    made of the answer automatic dispatch gives.
    """

    backend: ClassVar[str]
    """The plugin name to force."""

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _warmed_up(cls) -> None:
        """A backend that builds its kernels lazily declines until they are ready, which would test
        the next backend instead: it is asked to get ready first (``spacr_accel_warm_up``)."""
        warm_up(cls.backend)

    # ---- what the registry says about the plugin ----------------------------------------------

    def _row(self) -> PluginStatus:
        """This plugin's row in :func:`plugins`; a name nobody installed fails the check."""
        rows = plugins()
        for row in rows:
            if row.name == self.backend:
                return row
        pytest.fail(f"no spacr_accel plugin named {self.backend!r} is installed (installed: "
                    f"{', '.join(r.name for r in rows) or 'none'}); the entry point's name is the plugin's name")

    def _require(self, operation: str) -> PluginStatus:
        """The row, or a skip when the plugin does not implement ``operation``."""
        row = self._row()
        if operation not in row.operations:
            why = (f"it does not implement {operation}" if row.status == "ok" or row.operations
                   else f"it is {row.status}: {row.reason}")
            pytest.skip(f"backend {self.backend!r}: {why}")
        return row

    def _forced(self, operation: str, run: Callable[..., _T], *args: Any, core_may_answer: bool = False,
                recorded: str | None = None, **kwargs: Any) -> _T:
        """``run(*args, backend=<this backend>, **kwargs)``, checked to have been served by it.

        Where the backend declines this input (:class:`BackendDeclined`), the answer of automatic
        dispatch instead, checked to come from another backend that was tried after it: the
        caller compares either answer with the reference.

        :param operation: the primitive ``run`` dispatches (for the row's ``operations``).
        :param run: one of the :mod:`~spacr_accel_core.ops` functions.
        :param core_may_answer: the input is one the core answers itself (a window of one pixel,
            an empty set), so ``"core"`` serving it is right.
        :param recorded: the operation :func:`last_dispatch` names, where ``run`` is composed of
            ``operation``'s dispatches (``mutual_nearest_neighbours``).
        """
        row = self._require(operation)
        try:
            result = run(*args, backend=self.backend, **kwargs)
        except PluginFault:
            raise  # a broken contract is never a decline
        except BackendDeclined as exc:
            answer = run(*args, **kwargs)
            self._check_fell_through(recorded or operation, describe(exc))
            return answer
        except RuntimeError as exc:
            if row.status == "ok":
                pytest.fail(f"backend {self.backend!r} is usable (status ok) but its forced {operation} raised "
                            f"{describe(exc)}; a usable backend declines one input with BackendDeclined")
            pytest.skip(f"backend {self.backend!r} cannot run {operation} here "
                        f"({row.status}: {row.reason}): {describe(exc)}")
        dispatch = last_dispatch()
        served = {self.backend, "core"} if core_may_answer else {self.backend}
        assert dispatch is not None and dispatch.backend in served, dispatch
        return result

    def _check_fell_through(self, operation: str, reason: str) -> None:
        """After a decline: another backend answered, ours was passed over, and not as a fault."""
        dispatch = last_dispatch()
        assert dispatch is not None and dispatch.operation == operation, dispatch
        assert dispatch.backend != self.backend, f"{self.backend!r} declined ({reason}) yet served the call"
        order = list(ops.accelerated_backends())
        if self.backend in order and dispatch.backend in order and \
                order.index(self.backend) < order.index(dispatch.backend):
            assert self.backend in {name for name, _ in dispatch.declined}, (
                f"{self.backend!r} ranks above {dispatch.backend!r} but is not among those that declined: {dispatch}")
        faults = dict(self._row().faults)
        assert operation not in faults, f"declining was recorded as a fault: {faults[operation]}"

    def test_declines_cleanly_where_it_cannot_run(self) -> None:
        """A plugin that is not usable here stays out of automatic dispatch, which still answers;
        forcing it raises a clean ``RuntimeError`` (or, where it can run when forced, answers right)."""
        row = self._row()
        if row.status == "ok":
            pytest.skip(f"backend {self.backend!r} is usable here; each check tests its declines per call")
        assert self.backend not in ops.accelerated_backends()
        for operation in row.operations or ("nearest_neighbours",):
            args, keywords, check = _small_case(operation)
            run = OPERATIONS[operation].function
            check(run(*args, **keywords))
            dispatch = last_dispatch()
            assert dispatch is not None and dispatch.backend != self.backend, dispatch
            try:
                forced = run(*args, backend=self.backend, **keywords)
            except PluginFault:
                raise
            except RuntimeError:
                continue  # the clean "not here"
            check(forced)  # an unusable backend may still be forced (torch on the CPU): then it is right
        assert self._row().faults == row.faults, "declining was recorded as a fault"

    def test_each_operation_answers_its_small_case_as_its_reference(self) -> None:
        """Every operation this backend implements, forced on its table entry's small case: the
        reference's answer, or a clean decline (a new operation is checked here with no new code)."""
        row = self._row()
        if row.status != "ok":
            pytest.skip(f"backend {self.backend!r} is not usable here ({row.reason})")
        for operation in row.operations:
            args, keywords, check = _small_case(operation)
            try:
                got = OPERATIONS[operation].function(*args, backend=self.backend, **keywords)
            except PluginFault:
                raise
            except RuntimeError:
                continue
            check(got)

    # ---- maximum_filter ----------------------------------------------------------------------

    @_SETTINGS
    @given(field=_fields(), size=st.integers(0, 12))
    def test_maximum_filter_matches_reference(self, field: np.ndarray, size: int) -> None:
        before = field.copy()
        got = self._forced("maximum_filter", ops.maximum_filter, field, size, core_may_answer=True)
        assert_same_field(got, reference_maximum_filter(field, size))
        assert np.array_equal(field, before, equal_nan=True), "the input was modified"

    @_SETTINGS
    @given(field=_fields(special=False), size=st.integers(2, 9))
    def test_maximum_filter_nan_window_is_nan(self, field: np.ndarray, size: int) -> None:
        data = np.array(field, dtype=np.float32)
        data[data.shape[0] // 2, data.shape[1] // 3] = np.nan
        # A window covering the whole field is a reduction: the core answers that itself.
        got = self._forced("maximum_filter", ops.maximum_filter, data, size,
                           core_may_answer=_core_filters(data.shape, size))
        assert_same_field(got, reference_maximum_filter(data, size))

    @_FEWER
    @given(field=_clustered_fields(), size=st.integers(2, 9))
    def test_maximum_filter_ties_clusters_and_outliers(self, field: np.ndarray, size: int) -> None:
        """Plateaus of neighbouring floats beside the extremes of float32: the exact maximum."""
        got = self._forced("maximum_filter", ops.maximum_filter, field, size,
                           core_may_answer=_core_filters(field.shape, size))
        assert_same_field(got, reference_maximum_filter(field, size))

    def test_maximum_filter_large_windows_and_fields(self) -> None:
        rng = np.random.default_rng(7)
        for shape, size in (((301, 257), 15), ((64, 700), 31), ((5, 3), 41), ((5, 300), 41), ((1, 1000), 9)):
            field = rng.standard_normal(shape).astype(np.float32)
            got = self._forced("maximum_filter", ops.maximum_filter, field, size,
                               core_may_answer=_core_filters(shape, size))
            assert_same_field(got, reference_maximum_filter(field, size))

    def test_maximum_filter_camera_dtypes_bit_identical(self) -> None:
        """Every camera dtype across its whole range, extremes at the edges and in plateaus: the
        float32 filter of the cast, bit for bit, whether the plugin took the field as it is
        (``Declaration.field_dtypes``) or the core cast it first. The input is left untouched."""
        rng = np.random.default_rng(17)
        for dtype in _CAMERA_DTYPES:
            info = np.iinfo(dtype)
            for shape, size in (((37, 53), 3), ((64, 48), 7), ((3, 200), 9), ((120, 2), 5)):
                field = rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)
                field[0, :] = info.max
                field[-1, -1] = info.min
                field[shape[0] // 2, :] = info.min  # a row of the minimum: plateaus of ties
                for view in (field, field[::-1].T):  # contiguous, and a non-contiguous view
                    before = view.copy()
                    got = self._forced("maximum_filter", ops.maximum_filter, view, size,
                                       core_may_answer=_core_filters(view.shape, size))
                    assert_same_field(got, reference_maximum_filter(view.astype(np.float32), size))
                    assert np.array_equal(view, before), f"the {dtype.__name__} input was modified"

    def test_maximum_filter_sign_of_zero(self) -> None:
        """Windows whose maximum is zero, met as -0.0 and +0.0 in every order: always +0.0."""
        rng = np.random.default_rng(9)
        field = -np.abs(rng.standard_normal((40, 50))).astype(np.float32)
        field[rng.random(field.shape) < 0.3] = -0.0
        field[rng.random(field.shape) < 0.2] = 0.0
        for size in (3, 5, 9):
            got = self._forced("maximum_filter", ops.maximum_filter, field, size)
            assert_same_field(got, reference_maximum_filter(field, size))
            assert not np.signbit(got[got == 0]).any()

    # ---- matmul ------------------------------------------------------------------------------

    @staticmethod
    def _assert_product(got: np.ndarray, first: np.ndarray, second: np.ndarray) -> None:
        expected, tolerance = reference_matmul(first, second)
        assert isinstance(got, np.ndarray) and got.dtype == np.float32
        assert got.shape == expected.shape
        assert np.all(np.abs(got.astype(np.float64) - expected) <= tolerance)

    @_SETTINGS
    @given(operands=_operands())
    def test_matmul_matches_reference(self, operands: tuple[np.ndarray, np.ndarray]) -> None:
        first, second = operands
        self._assert_product(self._forced("matmul", ops.matmul, first, second), first, second)

    @_FEWER
    @given(operands=_clustered_operands())
    def test_matmul_clusters_beside_outliers(self, operands: tuple[np.ndarray, np.ndarray]) -> None:
        """Near-equal entries beside ones a million times larger: within float32's rounding bound."""
        first, second = operands
        self._assert_product(self._forced("matmul", ops.matmul, first, second), first, second)

    def test_matmul_tall_by_tiny(self) -> None:
        rng = np.random.default_rng(3)
        first = rng.standard_normal((50_000, 4)).astype(np.float32)
        second = rng.standard_normal((4, 4)).astype(np.float32)
        self._assert_product(self._forced("matmul", ops.matmul, first, second), first, second)

    # ---- nearest_neighbours ------------------------------------------------------------------

    def _assert_nearest(self, source: np.ndarray, target: np.ndarray, **kwargs: Any) -> None:
        index, distance = self._forced("nearest_neighbours", ops.nearest_neighbours, source, target, **kwargs)
        expected_index, expected_distance = reference_nearest(source, target)
        assert index.dtype == np.int64 and distance.dtype == np.float32
        assert np.array_equal(index, expected_index), kwargs
        assert np.array_equal(distance, expected_distance), kwargs

    @_SETTINGS
    @given(points=_point_sets(), chunk=st.integers(1, 50))
    def test_nearest_matches_reference_exactly(self, points: tuple[np.ndarray, np.ndarray], chunk: int) -> None:
        self._assert_nearest(*points, chunk=chunk)

    @_FEWER
    @given(points=_clustered_point_sets(), chunk=st.integers(1, 30))
    def test_nearest_tight_clusters_beside_far_outliers(self, points: tuple[np.ndarray, np.ndarray],
                                                        chunk: int) -> None:
        """Duplicates and exact ties in a cluster far from the origin, with targets far away."""
        self._assert_nearest(*points, chunk=chunk)

    def test_nearest_ties_go_to_the_lowest_index(self) -> None:
        target = np.array([[1, 0], [0, 1], [-1, 0], [0, -1], [1, 0], [0, 0]], np.float32)
        source = np.array([[0, 0], [0.5, 0.5], [5, 0], [0, 0.5]], np.float32)
        index, _ = self._forced("nearest_neighbours", ops.nearest_neighbours, source, target[:5])
        assert index.tolist() == [0, 0, 0, 1]
        index, distance = self._forced("nearest_neighbours", ops.nearest_neighbours, source, target)
        assert index.tolist() == [5, 0, 0, 1]
        assert distance.tolist() == [0.0, np.float32(np.sqrt(0.5)), 4.0, 0.5]

    def test_nearest_duplicate_targets_go_to_the_first_copy(self) -> None:
        """Every target repeated, in shuffled order: the lowest index of the nearest copy."""
        rng = np.random.default_rng(13)
        points = rng.integers(-50, 50, (40, 3)).astype(np.float32)
        target = np.concatenate([points, points[::-1], points])[rng.permutation(120)]
        source = np.concatenate([points, points + 0.5])
        self._assert_nearest(source, target)

    def test_nearest_empty_target_and_source(self) -> None:
        index, distance = self._forced("nearest_neighbours", ops.nearest_neighbours, np.ones((3, 2)),
                                       np.empty((0, 2)), core_may_answer=True)
        assert index.tolist() == [-1, -1, -1] and np.all(np.isinf(distance))
        index, distance = self._forced("nearest_neighbours", ops.nearest_neighbours, np.empty((0, 2)),
                                       np.ones((3, 2)), core_may_answer=True)
        assert index.shape == (0,) and distance.shape == (0,)

    def test_nearest_distance_beyond_float32_is_inf_without_a_warning(self) -> None:
        """A valid input whose distance overflows float32 answers ``inf``, even where the caller turns
        warnings into errors (``warnings.simplefilter("error")``): a warning there would be a fault."""
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            index, distance = self._forced("nearest_neighbours", ops.nearest_neighbours,
                                           np.array([[-3e38]]), np.array([[3e38], [2e38]]))
        assert index.tolist() == [1] and distance.tolist() == [np.inf]

    def test_nearest_is_independent_of_chunk_on_larger_sets(self) -> None:
        rng = np.random.default_rng(11)
        for width in (2, 3, 24):
            # Rounded coordinates make exact ties; a far offset stresses float32 expansions.
            source = np.round(rng.uniform(0, 40, (1500, width))).astype(np.float32) + 1000
            target = np.round(rng.uniform(0, 40, (1200, width))).astype(np.float32) + 1000
            for chunk in (1, 97, 4096):
                self._assert_nearest(source, target, chunk=chunk)

    def test_nearest_wide_continuous_points(self) -> None:
        rng = np.random.default_rng(5)
        source = rng.standard_normal((800, 64)).astype(np.float32)
        target = rng.standard_normal((900, 64)).astype(np.float32)
        self._assert_nearest(source, target)
