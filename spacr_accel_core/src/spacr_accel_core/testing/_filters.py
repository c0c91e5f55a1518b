"""The conformance checks of the decode chain's filters: the Gaussian, its Laplacian and the
windowed minimum, each compared bit for bit with :mod:`spacr_accel_core.reference` (whose
definitions are SciPy's) on fields full of NaN, infinities, signed zeros and plateaus, down to a
field of one pixel under a kernel many times wider.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .. import ops, reference

_SETTINGS = settings(max_examples=25, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                            HealthCheck.differing_executors])  # one test, many backend classes


@st.composite
def smoothing_fields(draw: st.DrawFn) -> np.ndarray:
    """A field or a stack, 1 x 1 and up, with NaN, infinities, signed zeros and plateaus."""
    shape = draw(st.sampled_from([(1, 1), (2, 1), (1, 2), (2, 2), (5, 7), (12, 9), (2, 6, 8), (3, 1, 10)]))
    values = st.one_of(st.floats(-1e3, 1e3, width=32),
                       st.sampled_from([np.nan, np.inf, -np.inf, -0.0, 0.0, 2.5]))
    return draw(hnp.arrays(np.float32, shape, elements=values))


def assert_same_bits(got: np.ndarray, expected: np.ndarray) -> None:
    """float32 of the same shape, NaN in the same places, the same bits everywhere else."""
    assert got.dtype == np.float32 and got.shape == expected.shape, (got.dtype, got.shape, expected.shape)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan), "NaN in other places than the reference's"
    differ = got.view(np.uint32)[~nan] != expected.view(np.uint32)[~nan]
    assert not differ.any(), f"{int(differ.sum())} pixels differ from the reference"


class FilterConformance:
    """Mixed into :class:`~spacr_accel_core.testing.BackendConformance`; uses its ``_forced``."""

    backend: ClassVar[str]
    _forced: Callable[..., Any]

    @_SETTINGS
    @given(field=smoothing_fields(), sigma=st.sampled_from([0.6, 1.0, 2.0, (1.0, 0.0), (0.5, 1.5)]),
           truncate=st.sampled_from([4.0, 1.5]), mode=st.sampled_from(["reflect", "nearest"]))
    def test_gaussian_filter_matches_reference(self, field: np.ndarray, sigma: Any, truncate: float,
                                               mode: str) -> None:
        got = self._forced("gaussian_filter", ops.gaussian_filter, field, sigma, truncate=truncate, mode=mode)
        assert_same_bits(got, reference.gaussian_filter(field, sigma, truncate, mode))

    @_SETTINGS
    @given(field=smoothing_fields(), sigma=st.sampled_from([0.6, 1.0, 2.0, (0.0, 1.0), (1.5, 0.5)]),
           mode=st.sampled_from(["reflect", "nearest"]))
    def test_gaussian_laplace_matches_reference(self, field: np.ndarray, sigma: Any, mode: str) -> None:
        out = np.full(field.shape, 7.0, np.float32)
        got = self._forced("gaussian_laplace", ops.gaussian_laplace, field, sigma, mode=mode, out=out)
        assert got is out
        assert_same_bits(got, reference.gaussian_laplace(field, sigma, 4.0, mode))

    @_SETTINGS
    @given(field=smoothing_fields(), size=st.integers(2, 7), mode=st.sampled_from(["reflect", "nearest"]))
    def test_minimum_filter_matches_reference(self, field: np.ndarray, size: int, mode: str) -> None:
        window = size + 1 if size % 2 == 0 else size
        whole = window >= 2 * max(field.shape[-2:]) - 1  # a window this wide is the core's to answer
        got = self._forced("minimum_filter", ops.minimum_filter, field, size, mode=mode, core_may_answer=whole)
        assert_same_bits(got, reference.minimum_filter(field, size, mode))
