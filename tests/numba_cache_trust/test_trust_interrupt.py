"""Ctrl-C on ``spacr-accel warm``: one line (the compiler goes on in the background), exit 130, no
traceback; the detached compiler it started is not interrupted with it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

from spacr_accel_core.commands._warm import INTERRUPTED
from spacr_accel_numba import _compiler


def _holder(folder) -> int | None:
    if not folder.is_dir() or not _compiler.compiling(folder):
        return None
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((folder / _compiler.LOCK).read_text().split()[0])
    return None


def test_ctrl_c_on_warm_prints_one_line_and_exits_130(sandbox) -> None:
    env = {**sandbox.env, "SPACR_ACCEL_NUMBA_COMPILE": "detached", "SPACR_ACCEL_NUMBA_KERNELS": "filter:float32"}
    folder = sandbox.root / _compiler._subpath(_compiler._PACKAGE)
    # Ctrl-C at a terminal reaches a command whose SIGINT is the default; a test run started in the
    # background (a shell without job control ignores SIGINT there, and a child inherits an ignored
    # signal) would otherwise start the command deaf to it. Python's own handler becomes the default
    # in the child.
    ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        command = subprocess.Popen([sys.executable, "-m", "spacr_accel_core", "warm", "--timeout", "200"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    finally:
        signal.signal(signal.SIGINT, ignored)
    try:
        assert command.stderr is not None
        first = command.stderr.readline()  # the bar's first line: it is waiting now
        assert "0 of 1 kernels" in first, first
        command.send_signal(signal.SIGINT)
        out, err = command.communicate(timeout=60)
    finally:
        if command.poll() is None:
            command.kill()
            command.wait()
    try:
        assert command.returncode == 130, (out, err)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
        assert err.splitlines() == [INTERRUPTED] and out == ""
        # the compiler was in a session of its own: it goes on, and fills the cache
        deadline = time.monotonic() + 200
        while "filter:float32" not in _compiler.read_ledger(folder):
            assert time.monotonic() < deadline, "the compiler did not finish after the interrupt"
            time.sleep(0.2)
    finally:
        pid = _holder(folder)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
