"""spaCR's ``ops_cycles.align_field``, patched and not, on the same fields: the same aligned stack
(bit for bit), shifts, kept, refused and missing cycles, the seam really serving it, and what it
leaves to spaCR."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("spacr", reason="spaCR is not installed (pip install --no-deps spacr==1.5.1.5)")

from spacr_accel_core import patch
from spacr_accel_core.patch import first_difference

pytestmark = pytest.mark.usefixtures("compiled_backends")  # while numba compiles, a seam may pass calls to spaCR

SEAM = "spacr.ops_cycles.align_field"


def _counts() -> tuple[int, list[str]]:
    rows = {row.seam: row for row in patch.report().seams}
    row = rows.get(SEAM)
    if row is None:
        return 0, []
    return sum(calls for _backend, calls, _seconds in row.served), [reason for reason, _calls, _s in row.passed]


def _moved(image: np.ndarray, dy: int, dx: int) -> np.ndarray:
    out = np.zeros_like(image)
    height, width = image.shape
    if abs(dy) < height and abs(dx) < width:
        out[max(dy, 0):height + min(dy, 0), max(dx, 0):width + min(dx, 0)] = \
            image[max(-dy, 0):height + min(-dy, 0), max(-dx, 0):width + min(-dx, 0)]
    return out


def _field(seed: int, cycles: int = 4, channels: int = 3, shape: tuple[int, int] = (120, 132),
           channel_shifts: Any = None, cycle_shifts: Any = None, dtype: Any = np.float32) -> dict[int, list[Any]]:
    """Cycle -> planes: one pattern of spots and cells, each plane moved by its cycle's and its
    channel's shift, with noise of its own (the registrations find the shifts)."""
    rng = np.random.default_rng(seed)
    height, width = shape
    pattern = 100.0 + 5.0 * rng.standard_normal(shape)
    ys, xs = np.mgrid[:height, :width]
    for y, x in zip(rng.integers(0, height, 60), rng.integers(0, width, 60), strict=True):
        pattern += 800.0 * np.exp(-((ys - y) ** 2 + (xs - x) ** 2) / 4.0)
    if channel_shifts is None:
        channel_shifts = rng.integers(-6, 7, size=(cycles, channels, 2))
        channel_shifts[:, 0] = 0
    if cycle_shifts is None:
        cycle_shifts = rng.integers(-9, 10, size=(cycles, 2))
        cycle_shifts[0] = 0
    planes: dict[int, list[Any]] = {}
    for cycle in range(cycles):
        planes[cycle + 1] = []
        for channel in range(channels):
            dy, dx = np.asarray(cycle_shifts[cycle]) + np.asarray(channel_shifts[cycle][channel])
            plane = _moved(pattern, int(dy), int(dx)) + 3.0 * rng.standard_normal(shape)
            planes[cycle + 1].append(np.clip(plane, 0, 65535).astype(dtype))
    return planes


def _spacrs_own(planes: Any, **options: Any) -> Any:
    """spaCR's answer with nothing patched (no seam inside it either)."""
    import spacr.ops_cycles as cycles

    patch.uninstall()
    try:
        return cycles.align_field(planes, **options)
    finally:
        assert patch.install()


def _same_as_spacr(planes: Any, **options: Any) -> Any:
    import spacr.ops_cycles as cycles

    got = cycles.align_field(planes, **options)
    expected = _spacrs_own(planes, **options)
    assert first_difference(got, expected) is None, first_difference(got, expected)
    assert list(got.channel_shifts.items()) == list(expected.channel_shifts.items())  # the order too
    assert list(got.cycle_shifts.items()) == list(expected.cycle_shifts.items())
    assert got.stack.flags.c_contiguous and got.stack.flags.writeable and got.stack.dtype == np.float32
    return got


def test_a_field_with_moved_channels_and_cycles_is_spacrs(served_only: None) -> None:
    got = _same_as_spacr(_field(1))
    assert got.kept == (1, 2, 3, 4) and not got.refused
    assert any(shift != (0, 0) for shift in got.cycle_shifts.values())  # the shifts were really applied
    assert any(shift != (0, 0) for shifts in got.channel_shifts.values() for shift in shifts)
    assert _counts() == (1, [])


def test_the_check_mode_finds_no_difference(patched: None) -> None:
    """The check mode runs spaCR's own beside the seam and raises on any difference."""
    import spacr.ops_cycles as cycles

    cycles.align_field(_field(2, cycles=3, channels=4), reference=2)
    assert _counts() == (1, [])


def test_refused_cycles_and_channels_missing_cycles_and_a_numpy_reference(served_only: None) -> None:
    cycle_shifts = np.array([[0, 0], [3, -4], [40, 2], [-2, 5], [1, 1]])
    channel_shifts = np.zeros((5, 3, 2), int)
    channel_shifts[1, 2] = (30, 0)  # past the channels' tolerance: refused, left where it was
    channel_shifts[3, 1] = (-5, 7)
    planes: dict[Any, Any] = _field(3, cycles=5, channel_shifts=channel_shifts, cycle_shifts=cycle_shifts)
    planes[6] = None
    planes[7] = []
    planes[8] = [planes[1][0], None, planes[1][2]]
    got = _same_as_spacr(planes, tolerance=10, reference=np.int64(1))
    assert got.refused == (3,) and got.missing == (6, 7, 8) and (2, 2) in got.refused_channels
    assert got.kept == (1, 2, 4, 5) and type(got.kept[0]) is np.int64  # the reference as given, as spaCR keeps it
    assert _counts()[0] == 1


@pytest.mark.parametrize("dtype", [np.uint16, np.float64, np.int32])
def test_planes_of_other_dtypes_are_cast_as_spacr_casts(served_only: None, dtype: Any) -> None:
    _same_as_spacr(_field(4, cycles=3, channels=2, dtype=dtype))
    assert _counts() == (1, [])


def test_one_channel_one_cycle_and_a_tolerance_wider_than_the_field(served_only: None) -> None:
    _same_as_spacr(_field(5, cycles=1, channels=1))
    planes = _field(6, cycles=3, channels=2, shape=(64, 70))
    _same_as_spacr(planes, tolerance=200)  # whatever the cycles land on, spaCR's verdict
    assert _counts() == (2, [])


def test_what_spacr_would_read_otherwise_is_spacrs_own(served_only: None) -> None:
    import spacr.ops_cycles as cycles

    planes = _field(7, cycles=3, channels=2)
    with pytest.raises(ValueError, match="no cycle of this field has planes"):
        cycles.align_field({1: None, 2: []})
    with pytest.raises(ValueError, match="the reference cycle 9 has no planes"):
        cycles.align_field(planes, reference=9)
    uneven = {**planes, 3: [planes[3][0]]}  # one cycle with fewer channels: spaCR's np.stack raises
    with pytest.raises(ValueError):
        cycles.align_field(uneven)
    listed = {cycle: [plane.tolist() for plane in offered] for cycle, offered in planes.items()}
    assert first_difference(cycles.align_field(listed), _spacrs_own(listed)) is None
    named = {str(cycle): offered for cycle, offered in planes.items()}
    with pytest.raises(TypeError):  # spaCR's int() of a cycle name it cannot read, or its sort
        cycles.align_field({**named, 1: planes[1]})
    served, passed = _counts()
    assert served == 0 and sorted(passed) == sorted([
        "no cycle has planes (spaCR raises)", "the reference cycle has no planes (spaCR raises)",
        "cycles or planes of different shapes (spaCR's np.stack raises)",
        "a plane that is not a plain 2-D ndarray of real numbers", "a cycle that is not an integer"])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), cycles=st.integers(1, 4), channels=st.integers(1, 3),
       height=st.integers(24, 80), width=st.integers(24, 80), tolerance=st.sampled_from([2, 8, 64]),
       far=st.integers(-90, 90))
def test_drawn_fields_are_spacrs(served_only: None, seed: int, cycles: int, channels: int, height: int,
                                 width: int, tolerance: int, far: int) -> None:
    rng = np.random.default_rng(seed)
    channel_shifts = rng.integers(-20, 21, size=(cycles, channels, 2))
    cycle_shifts = rng.integers(-12, 13, size=(cycles, 2))
    cycle_shifts[-1, 0] = far  # anywhere, even past the field
    _same_as_spacr(_field(seed, cycles, channels, (height, width), channel_shifts, cycle_shifts),
                   tolerance=tolerance)
