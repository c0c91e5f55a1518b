"""``spacr.ops_engine._read_plane`` served: a stack asked for by several calls at once decoded once,
each plane spaCR's own bytes; failures, odd sources and changed files left to spaCR, which records
them as it always did."""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spacr_accel_core import patch
from spacr_accel_core.patch._install import original_of
from spacr_accel_core.patch._served_reading import SHARED

tifffile = pytest.importorskip("tifffile")

SEAM = "spacr.ops_engine._read_plane"


def _counts() -> tuple[int, int]:
    """(served, passed) calls of the reader so far."""
    rows = {row.seam: row for row in patch.report().seams}
    if SEAM not in rows:
        return 0, 0
    row = rows[SEAM]
    return sum(calls for _b, calls, _s in row.served), sum(entry[1] for entry in row.passed)


def _same(got: Any, expected: Any) -> None:
    if expected is None:
        assert got is None
        return
    assert type(got) is type(expected) and got.dtype == expected.dtype and got.shape == expected.shape
    assert got.flags.c_contiguous == expected.flags.c_contiguous
    assert got.tobytes() == expected.tobytes()


def _both(source: Any) -> None:
    """The patched reader and spaCR's own on ``source``: the same plane and the same records."""
    from spacr import ops_engine

    mine: list[Any] = []
    theirs: list[Any] = []
    try:
        expected = original_of(ops_engine._read_plane)(source, theirs)
    except Exception as error:  # spaCR's own error (a plane np.take cannot find), to be raised as it is
        with pytest.raises(type(error)) as raised:
            ops_engine._read_plane(source, mine)
        assert str(raised.value) == str(error)
    else:
        _same(ops_engine._read_plane(source, mine), expected)
    assert mine == theirs


@pytest.fixture
def stacks(tmp_path: Path) -> dict[str, Path]:
    """TIFF files as a plate holds them: a CYX sequencing stack, a ZCYX phenotype stack, a ZYX stack,
    a single plane, a float plane, an empty file and a truncated one."""
    rng = np.random.default_rng(5)
    files = {
        "cyx": (rng.integers(0, 65535, (5, 40, 48), dtype=np.uint16), "CYX"),
        "zcyx": (rng.integers(0, 4000, (3, 2, 32, 30), dtype=np.uint16), "ZCYX"),
        "zyx": (rng.integers(0, 4000, (4, 20, 24), dtype=np.uint16), "ZYX"),
        "yx": (rng.integers(0, 4000, (33, 17), dtype=np.uint16), "YX"),
        "float": (rng.normal(0, 1e6, (16, 18)).astype(np.float64), "YX"),
    }
    paths = {}
    for name, (array, axes) in files.items():
        path = tmp_path / f"{name}.tif"
        tifffile.imwrite(path, array, photometric="minisblack", metadata={"axes": axes})
        paths[name] = path
    (tmp_path / "empty.tif").write_bytes(b"")
    paths["empty"] = tmp_path / "empty.tif"
    whole = paths["cyx"].read_bytes()
    (tmp_path / "short.tif").write_bytes(whole[: len(whole) // 2])
    paths["short"] = tmp_path / "short.tif"
    return paths


def test_every_plane_of_every_kind_of_file_is_spacrs(served_only: None, stacks: dict[str, Path]) -> None:
    for name in ("cyx", "zcyx", "zyx"):
        for plane in (None, 0, 1, 2, 4, 7, -1):
            _both((str(stacks[name]), plane))
            _both((stacks[name], plane))
    for name in ("yx", "float"):
        _both((str(stacks[name]), None))
        _both((str(stacks[name]), 0))
    served, _passed = _counts()
    assert served >= 20  # the planes the files hold were served, not handed over


def test_failures_are_spacrs_to_record(served_only: None, stacks: dict[str, Path], tmp_path: Path) -> None:
    for source in [(str(stacks["empty"]), None), (str(stacks["short"]), 1), (str(tmp_path / "absent.tif"), 0),
                   (str(tmp_path), None), None, (str(stacks["cyx"]), 9), (str(stacks["yx"]), 3)]:
        _both(source)
    before = _counts()[1]
    _both((str(stacks["cyx"]), np.int64(2)))  # a plane spaCR compares its own way
    _both((str(stacks["cyx"]), True))
    assert _counts()[1] == before + 2


def test_calls_at_once_on_one_stack_decode_it_once(served_only: None, stacks: dict[str, Path],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """spaCR's decode reads a field's planes four at a time: the four channels of one stack come
    from one decode, and nothing is held once they have returned."""
    from spacr import ops_engine

    opened: list[str] = []
    real = tifffile.TiffFile
    gate = threading.Barrier(4, timeout=10)

    class Counting(real):  # type: ignore[misc, valid-type]  # tifffile's class, counted
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            opened.append(str(args[0]))
            time.sleep(0.05)  # a real stack's decode takes tens of milliseconds, this one's a few microseconds
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(tifffile, "TiffFile", Counting)
    sources = [(str(stacks["cyx"]), plane) for plane in (1, 2, 3, 4)]

    def read(source: tuple[str, int]) -> Any:
        gate.wait()
        return ops_engine._read_plane(source, [])

    decodes = SHARED.decodes
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(read, sources))
    assert SHARED.decodes - decodes == 1
    assert len(opened) == SHARED.decodes - decodes
    assert SHARED.held() == 0
    monkeypatch.setattr(tifffile, "TiffFile", real)
    for source, plane in zip(sources, got, strict=True):
        _same(plane, original_of(ops_engine._read_plane)(source, []))


def test_a_file_rewritten_between_calls_is_read_again(served_only: None, stacks: dict[str, Path]) -> None:
    from spacr import ops_engine

    path = stacks["cyx"]
    first = ops_engine._read_plane((str(path), 1), [])
    changed = np.full((5, 40, 48), 7, np.uint16)
    tifffile.imwrite(path, changed, photometric="minisblack", metadata={"axes": "CYX"})
    os.utime(path, ns=(1, 1))  # even a file given an old time is a different file: size, inode, time
    again = ops_engine._read_plane((str(path), 1), [])
    assert not np.array_equal(first, again)
    _same(again, original_of(ops_engine._read_plane)((str(path), 1), []))


def test_a_read_tifffile_logs_about_is_spacrs(served_only: None, stacks: dict[str, Path],
                                              monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    """A record tifffile logs while reading is given as often as spaCR's own reads give it."""
    from spacr import ops_engine

    real = tifffile.TiffFile

    class Talking(real):  # type: ignore[misc, valid-type]  # tifffile's class, logging a record
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            logging.getLogger("tifffile").warning("a record about %s", args[0])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(tifffile, "TiffFile", Talking)
    source = (str(stacks["cyx"]), 2)
    with caplog.at_level(logging.WARNING, logger="tifffile"):
        got = ops_engine._read_plane(source, [])
    served_records = len(caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tifffile"):
        expected = original_of(ops_engine._read_plane)(source, [])
    assert served_records == len(caplog.records) == 1
    _same(got, expected)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.tuples(st.integers(1, 4), st.integers(1, 9), st.integers(1, 9)),
       dtype=st.sampled_from([np.uint8, np.uint16, np.int16, np.float32, np.float64]),
       axes=st.sampled_from(["CYX", "ZYX", "QYX", ""]),
       plane=st.one_of(st.none(), st.integers(-2, 5)), seed=st.integers(0, 99))
def test_drawn_stacks(served_only: None, tmp_path_factory: pytest.TempPathFactory, shape: tuple[int, int, int],
                      dtype: type[np.generic], axes: str, plane: int | None, seed: int) -> None:
    rng = np.random.default_rng(seed)
    array = (rng.normal(0, 300, shape) if np.dtype(dtype).kind == "f" else rng.integers(0, 200, shape)).astype(dtype)
    if np.dtype(dtype).kind == "f" and array.size > 2:
        array.flat[:3] = [np.nan, -0.0, np.inf]
    path = tmp_path_factory.mktemp("drawn") / "stack.tif"
    tifffile.imwrite(path, array, photometric="minisblack", **({"metadata": {"axes": axes}} if axes else {}))
    _both((str(path), plane))
