"""A ledger that does not read cleanly is set aside with one warning and rebuilt: never a traceback,
never a backend that stops counting its kernels."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from spacr_accel_numba import _compiler
from spacr_accel_numba._compiler import DAMAGED, LEDGER, Entry, read_ledger, write_ledger


def _damaged(text: str, how: str) -> str:
    record = json.loads(text)
    row = record["kernels"]["filter:float32"]
    if how == "overflowing float":
        return text.replace('"compiled": 2', '"compiled": 1e400')
    if how == "401 digits":
        return text.replace('"seconds": 1.0', '"seconds": ' + "9" * 401)
    if how == "negative":
        row["compiled"] = -3
    elif how == "boolean":
        row["compiled"] = True
    elif how == "text for a number":
        row["seconds"] = "1.0"
    elif how == "a list for a row":
        record["kernels"]["filter:float32"] = [1.0, 2]
    elif how == "failed not text":
        row["failed"] = 7
    elif how == "kernels a list":
        record["kernels"] = ["filter:float32"]
    elif how == "truncated":
        return text[: len(text) // 3]
    elif how == "foreign format":
        return "compiled = 2\n"
    elif how == "not utf-8":
        return "\udcff"
    elif how == "nested":
        return "[" * 100_000 + "]" * 100_000
    return json.dumps(record)


_DAMAGES = ["overflowing float", "401 digits", "negative", "boolean", "text for a number", "a list for a row",
            "failed not text", "kernels a list", "truncated", "foreign format", "not utf-8", "nested"]


@pytest.mark.parametrize("how", _DAMAGES)
def test_a_damaged_ledger_reads_empty_is_set_aside_and_warned_about_once(
        tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture) -> None:
    write_ledger(tmp_path, {"filter:float32": Entry(1.0, 2)}, "")
    path = tmp_path / LEDGER
    text = _damaged(path.read_text(), how)
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with caplog.at_level(logging.WARNING, logger=_compiler.__name__):
        assert read_ledger(tmp_path) == {}
        assert read_ledger(tmp_path) == {}
    assert [record.getMessage().count("\n") for record in caplog.records] == [0]
    assert "was damaged" in caplog.text and not path.exists()
    assert (tmp_path / (LEDGER + DAMAGED)).read_bytes() == text.encode("utf-8", "surrogateescape")
    write_ledger(tmp_path, {"filter:float32": Entry(1.0, 2)}, "")  # rebuilt by the next compiler
    assert read_ledger(tmp_path) == {"filter:float32": Entry(1.0, 2)}


def test_a_stale_ledger_is_not_damage(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_ledger(tmp_path, {"filter:float32": Entry(1.0, 2)}, "")
    path = tmp_path / LEDGER
    path.write_text(path.read_text().replace(_compiler.fingerprint(), "0" * 24))
    with caplog.at_level(logging.WARNING, logger=_compiler.__name__):
        assert read_ledger(tmp_path) == {}
    assert caplog.text == "" and path.exists()


def test_the_next_process_recovers_from_an_overflowing_ledger(sandbox) -> None:
    env = {"SPACR_ACCEL_NUMBA_COMPILE": "detached", "SPACR_ACCEL_NUMBA_KERNELS": "filter:float32"}
    folder = sandbox.root / _compiler._subpath(_compiler._PACKAGE)
    folder.mkdir(parents=True)
    (folder / LEDGER).write_text(json.dumps({"fingerprint": _compiler.fingerprint(), "kernels": {
        "filter:float32": {"seconds": 1e400, "compiled": int("9" * 401)}}}).replace("Infinity", "1e400"))
    doctor = sandbox.command("doctor", **env)
    assert doctor.returncode == 0, doctor.stderr[-3000:]
    assert "Traceback" not in doctor.stderr and "no installed backend builds" not in doctor.stdout
    assert [line for line in doctor.stderr.splitlines() if "ledger" in line] == [
        line for line in doctor.stderr.splitlines() if line.strip()]
    assert len([line for line in doctor.stderr.splitlines() if "was damaged" in line]) == 1
    assert "numba: not compiled yet" in doctor.stdout
    warm = sandbox.command("warm", "--timeout", "200", **env)
    assert warm.returncode == 0 and "Traceback" not in warm.stderr, warm.stderr[-3000:]
    assert "numba: 1 of 1 kernels ready" in warm.stdout
    assert "filter:float32" in read_ledger(folder)
