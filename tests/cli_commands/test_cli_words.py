"""The command line tells the truth about itself: usage errors from the subcommand that was
mistyped, ``-v`` after the subcommand, help that points at no file a wheel lacks, and a doctor
that exits 0 even when its output cannot be written."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from spacr_accel_core.commands import _cli, _doctor


@pytest.fixture(autouse=True)
def _quiet_logging() -> Iterator[None]:
    """``-v`` adds a handler and a level to the library's logger; take them back afterwards."""
    log = logging.getLogger("spacr_accel_core")
    handlers, level = list(log.handlers), log.level
    yield
    log.handlers[:] = handlers
    log.setLevel(level)


@pytest.mark.parametrize(("argv", "usage"), [
    (["doctor", "--jsn"], "usage: spacr-accel doctor"),
    (["doctor", "--js"], "usage: spacr-accel doctor"),  # no abbreviations: --js is not --json
    (["bench", "--quik"], "usage: spacr-accel bench"),
])
def test_a_mistyped_option_shows_the_subcommands_usage(argv: list[str], usage: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        _cli.main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage) and f"unrecognized arguments: {argv[1]}" in err


@pytest.mark.parametrize(("argv", "level"), [
    (["doctor", "-v", "--json"], logging.INFO),
    (["-v", "doctor", "-v", "--json"], logging.DEBUG),  # counted together, before and after
    (["--verbose", "doctor", "--json"], logging.INFO),
])
def test_verbosity_is_accepted_after_the_subcommand(argv: list[str], level: int, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(_doctor, "collect", lambda: {"schema_version": 1})
    assert _cli.main(argv) == 0
    assert logging.getLogger("spacr_accel_core").level == level
    assert capsys.readouterr().out.strip().startswith("{")


def test_help_is_true_and_points_at_no_file_a_wheel_lacks(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _cli.main(["doctor", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "runs no computation" not in text.lower()
    assert "two-element tensor" in text and "always exits 0" in text
    assert "docs/cli.md" not in text.replace(_cli.DOCS_URL, "")
    assert _cli.DOCS_URL.startswith("https://")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_the_doctor_exits_0_without_a_traceback_when_stdout_is_full(json_flag: list[str]) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "spacr_accel_core", "doctor", *json_flag],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "could not write the report: No space left on device" in done.stderr
