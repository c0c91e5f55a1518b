"""Edges an adversarial review of the Gaussians' inputs found: kernels no array can hold, numbers
beyond float64's range, 0-d arrays given as numbers, a sigma of any numeric type. Each is checked
on the backends forced by name and on automatic dispatch, so the rule is the core's, not one
backend's luck."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi

from spacr_accel_core import last_dispatch, ops
from spacr_accel_core.testing import assert_same_field

BACKENDS = ["numpy", "numba", None]
FIELD = np.random.default_rng(3).random((9, 11)).astype(np.float32)


# ---- the Gaussians' kernel ---------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("operation", ["gaussian_filter", "gaussian_laplace"])
@pytest.mark.parametrize(("sigma", "truncate"), [(1e300, 4.0), (1e18, 4.0), (1.0, 1e300), (1e200, 1e200)])
def test_a_kernel_no_array_can_hold_is_refused_before_any_backend(backend: str | None, operation: str,
                                                                  sigma: float, truncate: float) -> None:
    """A radius of 4e18 pixels is no kernel NumPy can allocate: a backend handed it raised
    ``ValueError: Maximum allowed size exceeded`` (or OverflowError for an infinite radius) and was
    quarantined as faulty for the rest of the process, for the caller's typo."""
    call = getattr(ops, operation)
    with pytest.raises(ValueError, match=r"sigma and truncate give a kernel radius of .* pixels") as raised:
        call(FIELD, sigma, truncate=truncate, backend=backend)
    assert "at most" in str(raised.value)
    # The backend was never asked, so it still serves the next call.
    assert_same_field(call(FIELD, 1.0, backend=backend),
                      getattr(ndi, operation)(FIELD, 1.0, axes=(-2, -1)))
    if backend is not None:
        assert last_dispatch().backend == backend  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record


def test_the_largest_radius_is_an_allocation_not_an_input_error() -> None:
    """Below the limit a kernel is the caller's to ask for (SciPy computes one wider than the field):
    the check refuses only what no array can hold."""
    from spacr_accel_core.operations._checks import kernel_radii

    assert kernel_radii((2.0**56, 0.0), 4.0) == (2**58, 0)
    with pytest.raises(ValueError, match="at most"):
        kernel_radii((2.0**57, 0.0), 4.0)


@pytest.mark.parametrize(("keywords", "name"), [({"sigma": 10**400}, "sigma"), ({"sigma": (1, -(10**400))}, "sigma"),
                                                ({"sigma": 1.0, "truncate": 10**400}, "truncate")])
def test_numbers_beyond_float64_are_named(keywords: dict[str, object], name: str) -> None:
    """``float(10**400)`` raised a bare OverflowError that named nothing."""
    with pytest.raises(ValueError, match=f"{name} must be finite"):
        ops.gaussian_filter(FIELD, **keywords)  # type: ignore[arg-type]  # keywords of odd types on purpose: how they are read is the test


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_zero_d_array_sigma_is_the_number_it_holds(backend: str | None) -> None:
    """``np.array(1.5)`` is a number to SciPy; it was refused as "a pair ... got 1 values"."""
    for operation in ("gaussian_filter", "gaussian_laplace"):
        want = getattr(ndi, operation)(FIELD, np.array(1.5), axes=(-2, -1))
        assert_same_field(getattr(ops, operation)(FIELD, np.array(1.5), backend=backend), want)
    with pytest.raises(ValueError, match="sigma must be a number or a pair"):
        ops.gaussian_filter(FIELD, np.array([1.5]))


def test_a_sigma_is_read_as_its_value_whatever_its_type() -> None:
    """A decision pinned: SciPy computes its kernel's exponent in the sigma's own type (float32 for
    ``np.float32(1.3)``), so its answer depends on the type; here a sigma is its float64 value, and
    the answer is SciPy's for ``float(sigma)``."""
    for sigma in (np.float32(1.3), np.float16(0.7), np.int8(2)):
        for operation in ("gaussian_filter", "gaussian_laplace"):
            want = getattr(ndi, operation)(FIELD, float(sigma), axes=(-2, -1))
            assert_same_field(getattr(ops, operation)(FIELD, sigma), want)
