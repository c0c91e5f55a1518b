"""No writable cache anywhere (``NUMBA_CACHE_DIR``, the package folder, the user's cache): numba
compiles in memory, in the background, and serves; the doctor says why each process compiles."""

from __future__ import annotations

_NOWHERE = """
from spacr_accel_numba import _compiler
_compiler._writable = lambda folder: False  # every candidate refused, as on a read-only disk (even for root)
"""


def test_numba_serves_after_an_in_memory_compile(sandbox) -> None:
    done = sandbox.python(_NOWHERE + """
import glob, os
import numpy as np
import spacr_accel_numba
from spacr_accel_core import ops, last_dispatch
print(_compiler.cache_folder())
print(spacr_accel_numba.warm(timeout=200), spacr_accel_numba.failure())
field = np.arange(64, dtype=np.float32).reshape(8, 8)
answer = ops.maximum_filter(field, 3)
print(last_dispatch().backend, answer.tobytes() == ops.maximum_filter(field, 3, backend="numpy").tobytes())
print(len(glob.glob(os.path.join(os.environ["NUMBA_CACHE_DIR"], "**", "*.nb*"), recursive=True)))
""", SPACR_ACCEL_NUMBA_COMPILE="detached", SPACR_ACCEL_NUMBA_KERNELS="filter:float32")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["None", "True None", "numba True", "0"]
    assert "Traceback" not in done.stderr and "no locator available" not in done.stderr


def test_the_doctor_says_each_process_compiles_in_memory(sandbox) -> None:
    done = sandbox.python(_NOWHERE + """
from spacr_accel_core.commands._cli import main
main(["doctor"])
""", SPACR_ACCEL_NUMBA_COMPILE="detached", SPACR_ACCEL_NUMBA_KERNELS="filter:float32")
    assert done.returncode == 0, done.stderr[-3000:]
    text = " ".join(done.stdout.split())
    assert ("numba: not compiled yet (`spacr-accel warm`); no writable cache folder (NUMBA_CACHE_DIR, the "
            "package's __pycache__, the user's cache): each process compiles its kernels in memory") in text, text
