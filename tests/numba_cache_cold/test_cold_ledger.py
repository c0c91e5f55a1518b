"""The compiler's ledger, cache folder and settings, read in this process (no compile)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from spacr_accel_numba import _compiler
from spacr_accel_numba._compiler import LEDGER, Entry, read_ledger, write_ledger


def test_the_ledger_reads_back_what_was_written_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    kernels = {"filter:float32": Entry(2.5, 3), "nearest": Entry(0.25, 0, "TypingError: no")}
    write_ledger(tmp_path, kernels, "/somewhere")
    assert read_ledger(tmp_path) == kernels
    assert sorted(path.name for path in tmp_path.iterdir()) == [LEDGER]
    record = json.loads((tmp_path / LEDGER).read_text())
    assert record["fingerprint"] == _compiler.fingerprint() and record["numba_folder"] == "/somewhere"


@pytest.mark.parametrize("damage", ["stale", "truncated", "garbage", "missing", "not a mapping", "wrong rows"])
def test_a_damaged_stale_or_missing_ledger_reads_as_empty(tmp_path: Path, damage: str) -> None:
    write_ledger(tmp_path, {"filter:float32": Entry(1.0, 2)}, "")
    path = tmp_path / LEDGER
    text = path.read_text()
    if damage == "stale":
        path.write_text(text.replace(_compiler.fingerprint(), "0" * 24))
    elif damage == "truncated":
        path.write_text(text[: len(text) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x00\xff{not json")
    elif damage == "missing":
        path.unlink()
    elif damage == "not a mapping":
        path.write_text("[1, 2, 3]")
    else:
        path.write_text(json.dumps({"fingerprint": _compiler.fingerprint(), "kernels": {"a": {"seconds": "x"}}}))
    assert read_ledger(tmp_path) == {}


def test_a_ledger_that_cannot_be_written_leaves_no_temporary_file(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(source: str, target: object) -> None:
        raise PermissionError("read-only")

    monkeypatch.setattr(_compiler.os, "replace", refuse)
    with pytest.raises(PermissionError):
        write_ledger(tmp_path, {"filter:float32": Entry(1.0, 2)}, "")
    assert list(tmp_path.iterdir()) == []


def test_the_cache_folder_is_numbas_own_under_numba_cache_dir(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("NUMBA_CACHE_LOCATOR_CLASSES", raising=False)
    folder = _compiler.cache_folder()
    assert folder is not None and folder.parent == tmp_path and folder.is_dir()
    numba_caching = pytest.importorskip("numba.core.caching")
    from numba import config as numba_config

    monkeypatch.setattr(numba_config, "CACHE_DIR", str(tmp_path))  # numba read the variable at its import
    locator = numba_caching.UserProvidedCacheLocator.from_function(_compiler.mode, _compiler.__file__)
    assert locator is not None and Path(locator.get_cache_path()) == folder


def test_no_cache_folder_where_numba_is_told_to_use_other_locators(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NUMBA_CACHE_LOCATOR_CLASSES", "some.Locator")
    assert _compiler.cache_folder() is None


def test_mode_reads_the_setting_and_warns_about_an_unknown_word(monkeypatch: pytest.MonkeyPatch,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("SPACR_ACCEL_NUMBA_COMPILE", raising=False)
    assert _compiler.mode() == "detached"
    monkeypatch.setenv("SPACR_ACCEL_NUMBA_COMPILE", " HERE ")
    assert _compiler.mode() == "here"
    monkeypatch.setenv("SPACR_ACCEL_NUMBA_COMPILE", "elsewhere")
    with caplog.at_level(logging.WARNING, logger=_compiler.__name__):
        assert _compiler.mode() == "detached"
    assert "SPACR_ACCEL_NUMBA_COMPILE='elsewhere'" in caplog.text


def test_restricted_keeps_the_named_kernels_in_their_order(monkeypatch: pytest.MonkeyPatch) -> None:
    names = ["filter:float32", "nearest", "filter:uint8"]
    monkeypatch.delenv("SPACR_ACCEL_NUMBA_KERNELS", raising=False)
    assert _compiler.restricted(names) == names
    monkeypatch.setenv("SPACR_ACCEL_NUMBA_KERNELS", " filter:uint8 ,,filter:float32,unknown")
    assert _compiler.restricted(names) == ["filter:float32", "filter:uint8"]


def test_the_compilers_environment_has_one_thread_and_no_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACR_ACCEL_PATCH", "1")
    monkeypatch.setenv("NUMBA_NUM_THREADS", "8")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = _compiler._environment()
    assert "SPACR_ACCEL_PATCH" not in env
    assert {env[name] for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                   "MKL_NUM_THREADS")} == {"1"}
    assert env["PYTHONPATH"].split(":") == [str(_compiler._PACKAGE.parent), "/elsewhere"]
