"""A process that exits before its warm-up thread has started the detached compiler (one call and
out: the daemon thread may not have run at all yet) starts the compiler as it exits, so the cache
fills after it all the same; one whose kernels are all cached starts none."""

from __future__ import annotations

import subprocess

from spacr_accel_numba import _compiler

# The warm-up thread is made to wait for good, as a daemon thread that never got the interpreter
# before the exit does: only the exit can start the compiler.
_STALLED = """
import threading
import numpy as np
from spacr_accel_numba import _warm
_warm._compile_all = threading.Event().wait
from spacr_accel_core import config, last_dispatch, ops
with config.override(backends=["numba", "numpy"]):
    ops.maximum_filter(np.ones((16, 16), np.float32), 3)
print(last_dispatch().backend, last_dispatch().waiting, _warm._launched)
"""


def _lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def test_a_process_that_exits_before_its_warm_up_ran_still_leaves_a_compiler(cold) -> None:
    assert _lines(cold.python(_STALLED)) == ["numpy ('numba',) False"]  # nothing launched before the exit
    listed = cold.until(lambda: cold.ledger().get("filter:float32"), "the compiler started at exit listing its kernel")
    assert listed.compiled > 0 and not listed.failed
    cold.until(lambda: not _compiler.compiling(cold.folder), "the compiler exiting")
    writer = (cold.folder / _compiler.LEDGER).read_text()
    # Every kernel cached: the call loads its kernel itself (no warm-up, nothing to start at exit), and
    # a launch starts no compiler (it would only load, and rewrite the ledger).
    again = _STALLED + ("_warm._launch_at_exit()\nprint(_warm._launched)\n"
                        "_warm._launch(_warm._folder())\nprint(_warm._launched, _warm._compiler._child)\n")
    assert _lines(cold.python(again)) == ["numba () False", "False", "True None"]
    assert (cold.folder / _compiler.LEDGER).read_text() == writer
