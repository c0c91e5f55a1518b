"""The OpenCV backend example, installed: what it declares, where it declines, and its exactness on
the windows the conformance suite does not reach (up to the largest the core passes)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest
import scipy.ndimage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import spacr_accel_core
from spacr_accel_core import BackendDeclined, BackendInfo, Declaration, last_dispatch, ops
from spacr_accel_core.contract._declaration import validated
from spacr_accel_core.testing import assert_same_field, reference_maximum_filter

pytestmark = pytest.mark.skipif(
    "spacr-accel-opencv" not in {d.metadata["Name"] for d in importlib.metadata.distributions()},
    reason="the example is not installed: pip install -e examples/spacr-accel-opencv",
)


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The example against the floor it outranks: the shipped numba backend (between the two) is
    # blocked, so the floor is next in line whether or not numba is installed.
    monkeypatch.setenv("SPACR_ACCEL_DISABLE", "numba")
    spacr_accel_core.refresh()
    yield
    spacr_accel_core.refresh()


def test_declared_statically_and_described_alike() -> None:
    from spacr_accel_opencv import _plugin

    declared = _plugin.SPACR_ACCEL_PLUGIN
    assert declared == Declaration(name="opencv", priority=150.0, accelerated=False,
                                   field_dtypes=("uint8", "uint16", "int16"))
    assert validated(declared, "opencv") == (declared, None)  # every field as the core accepts it
    info = _plugin.spacr_accel_backend_info()
    assert isinstance(info, BackendInfo) and info.usable and "OpenCV" in info.note
    row = next(r for r in spacr_accel_core.plugins() if r.name == "opencv")
    assert row.status == "ok" and row.distribution == "spacr-accel-opencv"
    assert (row.priority, row.accelerated) == (150.0, False)
    assert row.operations == ("maximum_filter",)


def test_importing_the_plugin_leaves_opencv_unimported() -> None:
    code = "import sys, spacr_accel_opencv._plugin; print('cv2' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out


def test_unusable_with_a_note_where_opencv_does_not_import(monkeypatch: pytest.MonkeyPatch) -> None:
    from spacr_accel_opencv import _plugin

    _plugin._opencv.cache_clear()
    monkeypatch.setitem(sys.modules, "cv2", None)  # the import fails, as with a broken wheel
    try:
        info = _plugin.spacr_accel_backend_info()
        assert not info.usable and "OpenCV does not import" in info.note
        with pytest.raises(spacr_accel_core.BackendUnavailable):
            _plugin.spacr_accel_maximum_filter(np.ones((4, 4), np.float32), 3)
    finally:
        _plugin._opencv.cache_clear()


def test_outranks_the_floor_for_maximum_filter_only(fresh: None) -> None:
    field = np.random.default_rng(1).standard_normal((30, 40)).astype(np.float32)
    assert ops.accelerated_backends(gpu=False)[:2] == ("opencv", "numpy")
    for gpu in (True, False):  # not accelerated: gpu=False keeps it
        assert_same_field(ops.maximum_filter(field, 5, gpu=gpu), reference_maximum_filter(field, 5))
        dispatch = last_dispatch()
        assert dispatch is not None and dispatch.backend == "opencv", dispatch
    ops.matmul(field, field.T)
    dispatch = last_dispatch()
    assert dispatch is not None and dispatch.backend != "opencv"


def test_a_nan_is_declined_and_numpy_answers(fresh: None) -> None:
    field = np.random.default_rng(2).standard_normal((20, 25)).astype(np.float32)
    field[7, 3] = np.nan
    with pytest.raises(BackendDeclined, match="NaN"):
        ops.maximum_filter(field, 3, backend="opencv")
    assert_same_field(ops.maximum_filter(field, 3), reference_maximum_filter(field, 3))
    dispatch = last_dispatch()
    assert dispatch is not None and dispatch.backend == "numpy"
    declined = dict(dispatch.declined)  # every backend ahead of numpy, with why it was passed over
    assert declined["opencv"].startswith("BackendDeclined") and "NaN" in declined["opencv"]
    assert not next(r for r in spacr_accel_core.plugins() if r.name == "opencv").faults


def test_blocked_by_name(fresh: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACR_ACCEL_DISABLE", "opencv,numba")
    spacr_accel_core.refresh()
    ops.maximum_filter(np.ones((5, 5), np.float32), 3)
    dispatch = last_dispatch()
    assert dispatch is not None and dispatch.backend == "numpy"
    assert next(r for r in spacr_accel_core.plugins() if r.name == "opencv").status == "blocked"


def test_read_only_non_contiguous_input_is_left_alone() -> None:
    from spacr_accel_opencv import _plugin

    base = np.random.default_rng(3).standard_normal((40, 30)).astype(np.float32)
    field = base[::-1, ::2]
    field.flags.writeable = False
    before = field.copy()
    got = _plugin.spacr_accel_maximum_filter(field, 7)
    assert_same_field(got + np.float32(0), reference_maximum_filter(before, 7))
    assert np.array_equal(field, before)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_window_up_to_the_largest_the_core_passes(data: st.DataObject) -> None:
    """Every window from 3 up to 2 * max(h, w) - 1 (where the core caps it), long thin fields
    included, finite values and infinities: the dilation is bit-identical to the plain reference,
    and the backend serves it, or declines it (too many taps) to a backend that answers exactly."""
    from spacr_accel_opencv import _plugin

    shape = data.draw(st.tuples(st.integers(1, 40), st.integers(1, 40)) | st.tuples(st.just(1), st.integers(2, 300)))
    elements = st.floats(-(2.0**100), 2.0**100, width=32) | st.sampled_from([np.inf, -np.inf, 0.0, -0.0])
    field = data.draw(hnp.arrays(np.float32, shape, elements=elements))
    largest = 2 * max(shape) - 1
    if largest < 3:
        return
    size = data.draw(st.integers(3, largest))
    want = reference_maximum_filter(field, size)
    assert_same_field(_plugin.dilate(field, size | 1) + np.float32(0), want)  # the core makes it odd
    try:
        got = ops.maximum_filter(field, size, backend="opencv")
    except BackendDeclined:
        got = ops.maximum_filter(field, size)
        dispatch = last_dispatch()
        assert dispatch is not None and dispatch.backend != "opencv", dispatch
    assert_same_field(got, want)


@pytest.mark.parametrize("size", [3, 5, 63, 255, 257, 511, 1001, 1399])
def test_large_fields_and_windows_match_scipy(size: int) -> None:
    """Sizes OpenCV might special-case (tiny, powers of two either side, past the field), on a
    field too large for the brute-force reference: scipy on NaN-free input IS the contract, up to
    the sign of zero (``+0.0`` below)."""
    from spacr_accel_opencv import _plugin

    field = np.random.default_rng(size).standard_normal((600, 700)).astype(np.float32)
    got = _plugin.dilate(field, size | 1) + np.float32(0)  # the core makes it odd
    expected = scipy.ndimage.maximum_filter(field, size, mode="nearest") + np.float32(0)
    assert_same_field(got, expected)


@pytest.mark.parametrize(("shape", "size"), [((2, 70_000), 99_999), ((64, 4096), 1001), ((2, 70_000), 201),
                                             ((512, 512), 301), ((8, 20_000), 5001)])
def test_wide_windows_are_declined_to_a_faster_backend(fresh: None, shape: tuple[int, int], size: int) -> None:
    """cv2.dilate compares every tap of the window (0.43 s for a 2 x 70,000 field with size 99,999,
    against 2 ms on the floor): such windows go to the next backend, which answers exactly."""
    field = np.random.default_rng(size).standard_normal(shape).astype(np.float32)
    with pytest.raises(BackendDeclined, match="taps"):
        ops.maximum_filter(field, size, backend="opencv")
    got = ops.maximum_filter(field, size)
    dispatch = last_dispatch()
    assert dispatch is not None and dispatch.backend == "numpy", dispatch
    assert dict(dispatch.declined)["opencv"].startswith("BackendDeclined")
    assert_same_field(got, scipy.ndimage.maximum_filter(field, size, mode="nearest") + np.float32(0))


@pytest.mark.parametrize(("shape", "size"), [((2, 70_000), 93), ((4096, 64), 45), ((300, 200), 47)])
def test_windows_within_the_budget_are_served(fresh: None, shape: tuple[int, int], size: int) -> None:
    """Up to 96 taps (rows plus columns, each capped by its axis) the dilation is served here."""
    field = np.random.default_rng(size).standard_normal(shape).astype(np.float32)
    got = ops.maximum_filter(field, size)
    dispatch = last_dispatch()
    assert dispatch is not None and dispatch.backend == "opencv", dispatch
    assert_same_field(got, scipy.ndimage.maximum_filter(field, size, mode="nearest") + np.float32(0))
