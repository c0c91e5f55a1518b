"""The conformance checks of the levels family: per-field percentiles, and the clip and scale spaCR
sets a channel's levels with, each compared with NumPy's own ``np.percentile`` and ``np.clip`` on
hypothesis input (ties, NaN, signed zeros, infinities, fields of one pixel, stacks, float64).

Every answer is bit for bit: an order statistic is an element of the field, and the interpolation
is the core's (NumPy's arithmetic), so a backend that selects a wrong element is caught at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .. import BackendDeclined, PluginFault, ops, reference
from ..operations._levels import agree_levels

_SETTINGS = settings(max_examples=40, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                            HealthCheck.differing_executors])  # one test, many backend classes


@st.composite
def level_stacks(draw: st.DrawFn) -> np.ndarray:
    """A field or stack of small fields: ties, signed zeros, NaN, infinities, or plain noise."""
    lead = draw(st.sampled_from([(), (1,), (3,), (2, 2)]))
    shape = (*lead, draw(st.integers(1, 9)), draw(st.integers(1, 9)))
    dtype = draw(st.sampled_from([np.float32, np.float32, np.float64]))
    if draw(st.booleans()):
        values = st.sampled_from([-0.0, 0.0, 1.0, 2.0, -1.5, np.inf, -np.inf, 3e38, 1e-45, np.nan])
    else:
        values = st.floats(-1e6, 1e6, width=32)
    stack = draw(hnp.arrays(dtype, shape, elements=values))
    if draw(st.booleans()):  # NaN-free fields are the common case: keep them common
        stack[np.isnan(stack)] = 0.5
    return stack


_PERCENTILES = st.one_of(
    st.sampled_from([0, 100, 50, 70.0, 90.0, 0.0, 99.9]),
    st.floats(0, 100),
    st.lists(st.floats(0, 100), min_size=1, max_size=4),
    st.sampled_from([[0.0, 90.0], [0, 100], np.float64(70.0), np.array([12.5, 50.0]), np.float32(33.3)]),
)


def _same(got: Any, expected: Any) -> None:
    agrees, detail = agree_levels(expected, got)
    assert agrees, detail
    assert type(got) is type(expected) or isinstance(got, np.ndarray) == isinstance(expected, np.ndarray), (
        type(got), type(expected))


class LevelsConformance:
    """Mixed into :class:`~spacr_accel_core.testing.BackendConformance`; uses its ``_forced``."""

    backend: ClassVar[str]
    _forced: Callable[..., Any]
    _require: Callable[..., Any]

    def _composed(self, run: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A composed ``ops`` function (percentiles, then the level set) forced on this backend; where
        it declines one of the two steps (a float64 field), the answer automatic dispatch gives."""
        row = self._require("percentiles")
        self._require("rescale_fields")
        try:
            return run(*args, backend=self.backend, **kwargs)
        except PluginFault:
            raise
        except BackendDeclined:
            return run(*args, **kwargs)
        except RuntimeError as exc:
            if row.status == "ok":
                raise
            pytest.skip(f"backend {self.backend!r} cannot run here ({row.status}): {exc}")

    @_SETTINGS
    @given(stack=level_stacks(), q=_PERCENTILES)
    def test_percentiles_are_numpys_bit_for_bit(self, stack: np.ndarray, q: Any) -> None:
        before = stack.copy()
        got = self._forced("percentiles", ops.percentiles, stack, q)
        _same(got, reference.percentiles(stack, q))
        np.testing.assert_array_equal(stack, before)

    def test_percentiles_of_a_camera_sized_field_with_plateaus(self) -> None:
        """A saturated plateau and a background of few distinct values: ranks deep inside ties."""
        rng = np.random.default_rng(3)
        stack = rng.integers(90, 110, (3, 300, 257)).astype(np.float32)
        stack[:, :40, :40] = 4095.0
        stack[1, 7, 9] = np.nan
        for q in ([0.0, 90.0], 70.0, [0.0, 25.0, 50.0, 99.0, 100.0]):
            _same(self._forced("percentiles", ops.percentiles, stack, q), reference.percentiles(stack, q))

    def test_a_field_split_between_threads_at_odd_lengths(self) -> None:
        """A field large enough that a CPU backend splits its passes, of an odd number of pixels (a
        part's last pixel read alone), with a NaN as its very last pixel in one field: percentiles
        and the clip as NumPy gives them."""
        rng = np.random.default_rng(11)
        stack = rng.gamma(2.0, 200.0, (2, 513, 1023)).astype(np.float32)
        stack[1, -1, -1] = np.nan
        for q in ([0.0, 90.0], [0.0, 50.0, 100.0], 70.0):
            _same(self._forced("percentiles", ops.percentiles, stack, q), reference.percentiles(stack, q))
        got = self._composed(ops.clip_to_percentiles, stack[:1], 0.0, 90.0)
        _same(got, np.clip(stack[:1], *np.percentile(stack[0], [0.0, 90.0])))

    def test_percentiles_of_zeros_of_both_signs(self) -> None:
        """Zeros of both signs at the ranks read: NumPy's own sign, whatever order a backend selects in."""
        rng = np.random.default_rng(5)
        for _ in range(20):
            signs = np.array([-0.0, 0.0, -1.0, 1.0], dtype=np.float32)
            field = rng.choice(signs, size=(4, 5, 7), p=[0.4, 0.4, 0.1, 0.1])
            for q in ([0.0, 37.5, 50.0, 62.5, 100.0], 75.0):
                _same(self._forced("percentiles", ops.percentiles, field, q), reference.percentiles(field, q))

    @_SETTINGS
    @given(stack=level_stacks(), bounds=st.tuples(st.floats(0, 100), st.floats(0, 100)))
    def test_clip_to_percentiles_is_numpys_clip(self, stack: np.ndarray, bounds: tuple[float, float]) -> None:
        got = self._composed(ops.clip_to_percentiles, stack, *bounds)
        expected = np.empty(stack.shape, dtype=np.float64)
        for index in np.ndindex(*stack.shape[:-2]):
            with np.errstate(all="ignore"):
                low, high = np.asarray(np.percentile(stack[index], list(bounds)))
                expected[index] = np.clip(stack[index], low, high)
        _same(got, expected)

    @_SETTINGS
    @given(stack=level_stacks(), q=st.sampled_from([70.0, 0.0, 100, 50.0]),
           cutoff=st.sampled_from([1.0, 0.5, 1e6, np.float64(0.7)]))
    def test_normalise_to_percentile_is_spacrs_expression(self, stack: np.ndarray, q: Any, cutoff: Any) -> None:
        got = self._composed(ops.normalise_to_percentile, stack, q, cutoff=cutoff)
        expected = np.empty(stack.shape, dtype=np.float32)
        for index in np.ndindex(*stack.shape[:-2]):
            with np.errstate(all="ignore"):
                target = stack[index].astype(np.float32)
                scale = float(np.percentile(target, q))
                if scale > 0:
                    target = target / scale
                expected[index] = np.clip(target, 0.0, cutoff).astype(np.float32)
        _same(got, expected)

    @_SETTINGS
    @given(stack=level_stacks(), data=st.data())
    def test_rescale_fields_matches_reference(self, stack: np.ndarray, data: st.DataObject) -> None:
        lead = stack.shape[:-2]
        dtype = data.draw(st.sampled_from([np.float32, np.float64]))
        numbers = st.sampled_from([1.0, 2.0, 0.5, -3.0, 0.0, np.inf, np.nan, -0.0, 7.25])
        scale, low, high = (data.draw(hnp.arrays(dtype, lead, elements=numbers)) for _ in range(3))
        got = self._forced("rescale_fields", ops.rescale_fields, stack, scale, low, high)
        _same(got, reference.rescale_fields(stack, scale, low, high))
