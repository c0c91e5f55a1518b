"""``spacr-accel`` with no arguments prints the help, on stdout, and exits 0: a newcomer's first try
is not a usage error."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spacr_accel_core.commands import _cli


def test_the_bare_command_prints_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli.main([]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: spacr-accel") and err == ""
    assert "doctor" in out and "bench" in out and "what this machine can run" in out
    assert "error" not in out


def test_the_bare_command_from_a_shell_exits_0() -> None:
    done = subprocess.run([sys.executable, "-m", "spacr_accel_core"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: spacr-accel") and "doctor" in done.stdout


def test_options_without_a_command_are_still_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        _cli.main(["-v"])
    assert info.value.code == 2
    assert "the following arguments are required: COMMAND" in capsys.readouterr().err
