"""On a cold cache the kernel a process waits for is compiled before the others: a process calling
only one operation (``nearest_neighbours``, a filter of a rarer dtype) sees numba after that kernel's
compile, not after the whole set's."""

from __future__ import annotations

import contextlib
import json
import os
import signal

import pytest

from spacr_accel_numba import _compiler

_KERNELS = "filter:float32,science:levels,filter:uint8"
"""The uint8 filter last in the order, after two kernels a process calling it does not need (the
smallest kernels that show the order: the search's compile alone takes tens of seconds)."""

_CALL_NEAREST = """
import json, os, time
import numpy as np
from spacr_accel_core import ops, last_dispatch
from spacr_accel_numba import _compiler
rng = np.random.default_rng(2)
field = rng.integers(0, 255, (64, 64)).astype(np.uint8)
began = time.monotonic()
while time.monotonic() - began < 200:
    ops.maximum_filter(field, 3)
    if last_dispatch().backend == "numba":
        break
    time.sleep(0.05)
print(last_dispatch().backend)
folder = _compiler.cache_folder()
print(json.dumps(list(_compiler.read_ledger(folder)) if folder else []))
"""


@pytest.mark.parametrize("where", ["detached", "here"])
def test_the_kernel_a_call_waits_for_is_compiled_first(sandbox, where: str) -> None:
    done = sandbox.python(_CALL_NEAREST, SPACR_ACCEL_NUMBA_COMPILE=where, SPACR_ACCEL_NUMBA_KERNELS=_KERNELS)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "numba", done.stdout
    if where == "detached":
        # the ledger lists the kernels in the order the compiler wrote them: the asked one first,
        # or second where the compiler had begun the first of its order before the call asked
        order = json.loads(lines[1])
        assert "filter:uint8" in order[:2] and "science:levels" not in order[:order.index("filter:uint8")], order
    folder = sandbox.root / _compiler._subpath(_compiler._PACKAGE)
    holder = (folder / _compiler.LOCK).read_text().split() if _compiler.compiling(folder) else []
    if holder:  # the compiler this test started goes on with the rest: ended here
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(holder[0]), signal.SIGTERM)


def test_the_wanted_list_reads_back_first_asked_first(tmp_path) -> None:
    for name in ("nearest", "science:levels", "nearest"):
        _compiler.want(tmp_path, name)
    assert _compiler.wanted(tmp_path) == ["nearest", "science:levels"]
    _compiler.served_all(tmp_path)
    assert _compiler.wanted(tmp_path) == []
    (tmp_path / _compiler.WANTED).write_bytes(b"\xff\xfe\x00garbled\n")
    assert _compiler.wanted(tmp_path) == ["\ufffd\ufffd\x00garbled"]  # read, never raised; matches no kernel
    assert json.dumps(_compiler.wanted(tmp_path / "missing")) == "[]"
