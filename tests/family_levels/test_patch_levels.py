"""spaCR's ``_clipped`` and ``sbs_mean_target``, patched and not: identical bits, the seams really
serving them, and what they leave to spaCR."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("spacr", reason="spaCR is not installed (pip install --no-deps spacr==1.5.1.5)")

from spacr_accel_core import patch
from spacr_accel_core.patch._install import original_of

pytestmark = pytest.mark.usefixtures("compiled_backends")  # while numba compiles, a seam may pass calls to spaCR

CLIPPED = "spacr.ops_cycles._clipped"
TARGET = "spacr.ops_cycles.sbs_mean_target"


def _counts(seam: str) -> tuple[int, int]:
    rows = {row.seam: row for row in patch.report().seams}
    row = rows.get(seam)
    if row is None:
        return 0, 0
    served = sum(calls for _backend, calls, _seconds in row.served)
    passed = sum(calls for _reason, calls, _seconds in row.passed)
    return served, passed


def _same(got: Any, expected: Any) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    bits = np.dtype(f"u{got.dtype.itemsize}")
    same = (got.view(bits) == expected.view(bits)) | (np.isnan(got) & np.isnan(expected))
    assert same.all(), f"{int((~same).sum())} of {same.size} values differ"


def _channels(rng: np.random.Generator, count: int = 4, shape: tuple[int, int] = (300, 257)) -> list[np.ndarray]:
    planes = []
    for _ in range(count):
        plane = (100.0 + 10.0 * rng.standard_normal(shape)).astype(np.float32)
        plane[rng.integers(0, shape[0], 200), rng.integers(0, shape[1], 200)] += np.float32(2000.0)
        plane[:20, :20] = np.float32(4095.0)
        planes.append(plane)
    return planes


def test_clipped_and_the_target_are_spacrs_bits(served_only: None) -> None:
    import spacr.ops_cycles as cycles

    own_clipped, own_target = original_of(cycles._clipped), original_of(cycles.sbs_mean_target)
    assert cycles._clipped is not own_clipped and cycles.sbs_mean_target is not own_target
    rng = np.random.default_rng(11)
    for trial in range(6):
        planes = _channels(rng)
        if trial == 1:
            planes = [np.round(plane) for plane in planes]  # camera integers: ties at every rank
        if trial == 2:
            planes = [plane - np.float32(200.0) for plane in planes]  # a negative percentile: no division
        if trial == 3:
            planes[0][5, 5] = np.nan  # NaN: that plane's _clipped and the target go to spaCR
        for plane in planes:
            _same(cycles._clipped(plane), own_clipped(plane))
        _same(cycles.sbs_mean_target(planes), own_target(planes))
        for keywords in ({"percentile": 90.0}, {"percentile": np.float64(50.0), "cutoff": 0.5}, {"cutoff": 2}):
            _same(cycles.sbs_mean_target(planes, **keywords), own_target(planes, **keywords))
    served_clipped, _ = _counts(CLIPPED)
    served_target, _ = _counts(TARGET)
    assert served_clipped == 23 and served_target >= 20


@pytest.mark.parametrize("channels", [1, 2, 4])
def test_the_target_of_large_channels_is_spacrs(served_only: None, channels: int) -> None:
    """Channels large enough to be maximised in bands of row blocks (541 rows: bands and blocks that
    do not divide them), the brightest pixel of each channel in a different block."""
    import spacr.ops_cycles as cycles

    planes = _channels(np.random.default_rng(12), channels, (541, 530))
    for index, plane in enumerate(planes):
        plane[100 + 130 * index, 7] = np.float32(9000.0 + index)
    own = original_of(cycles.sbs_mean_target)
    for keywords in ({}, {"percentile": 99.9999, "cutoff": 5000.0}):
        _same(cycles.sbs_mean_target(planes, **keywords), own(planes, **keywords))
    assert _counts(TARGET) == (2, 0)


def test_the_channel_alignment_of_a_field_is_spacrs(served_only: None) -> None:
    """align_field end to end (both seams and the registrations between them): the same stack and shifts."""
    import spacr.ops_cycles as cycles

    rng = np.random.default_rng(5)
    base = _channels(rng, 4, (128, 128))
    planes = {cycle: [np.roll(plane, (cycle, -cycle), axis=(0, 1)) for plane in base] for cycle in (1, 2, 3)}
    patched = cycles.align_field(planes, gpu=False)
    patch.uninstall()
    own = cycles.align_field(planes, gpu=False)
    _same(patched.stack, own.stack)
    assert patched.cycle_shifts == own.cycle_shifts and patched.channel_shifts == own.channel_shifts


@pytest.mark.parametrize("planes", [
    [],
    [np.ones((4, 4), np.float32), np.ones((4, 5), np.float32)],
    [np.ones((2, 4, 4), np.float32)],
    [np.ones((0, 4), np.float32)],
])
def test_what_spacr_raises_or_reads_otherwise_is_left_to_it(served_only: None, planes: list[np.ndarray]) -> None:
    import spacr.ops_cycles as cycles

    own = original_of(cycles.sbs_mean_target)
    try:
        expected: Any = own(planes)
    except Exception as exc:  # spaCR's own error, raised by spaCR's own function
        with pytest.raises(type(exc)):
            cycles.sbs_mean_target(planes)
    else:
        _same(cycles.sbs_mean_target(planes), expected)
    assert _counts(TARGET)[0] == 0


def test_a_percentile_spacr_would_refuse_is_left_to_it(served_only: None) -> None:
    import spacr.ops_cycles as cycles

    planes = _channels(np.random.default_rng(2), 2, (16, 16))
    with pytest.raises(ValueError):
        cycles.sbs_mean_target(planes, percentile=120.0)
    assert _counts(TARGET)[0] == 0


def test_clipped_is_spacrs_own_where_only_the_floor_would_serve_it(served_only: None) -> None:
    """The floor's percentiles are np.percentile's own selection: served by it, ``_clipped`` would be
    spaCR's work plus the seam's checks, so it is left to spaCR (and ``sbs_mean_target``, which the
    floor does faster than spaCR, is still served)."""
    import spacr.ops_cycles as cycles

    from spacr_accel_core import config

    planes = _channels(np.random.default_rng(5), count=2, shape=(40, 33))
    with config.override(backends=["numpy"], only=True):
        _same(cycles._clipped(planes[0]), original_of(cycles._clipped)(planes[0]))
        _same(cycles.sbs_mean_target(planes), original_of(cycles.sbs_mean_target)(planes))
    assert _counts(CLIPPED) == (0, 1)
    assert _counts(TARGET) == (1, 0)
    reasons = [reason for row in patch.report().seams if row.seam == CLIPPED for reason, *_ in row.passed]
    assert reasons == ["only the NumPy floor serves percentiles here, and spaCR's own is as fast"]
