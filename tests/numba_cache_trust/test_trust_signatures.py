"""``warm`` compiles every signature a real call reaches: after the warm-up, the operations on the
inputs spaCR hands them compile nothing more (a compile during a call takes seconds, and waits for
numba's compiler lock)."""

from __future__ import annotations

_COUNT = """
import numpy as np
import spacr_accel_numba
from spacr_accel_core import ops, last_dispatch
from spacr_accel_numba import _warm
assert spacr_accel_numba.warm(timeout=400), spacr_accel_numba.failure()
from spacr_accel_numba import _levels_kernels as module

def signatures():
    return {name: len(value.signatures) for name, value in sorted(vars(module).items()) if hasattr(value, "py_func")}

before = signatures()
rng = np.random.default_rng(5)
served = set()
for dtype in (np.float32, np.uint16):
    stack = (rng.random((3, 40, 50)) * 1000).astype(dtype)
    for call in (lambda: ops.percentiles(stack, [1.0, 50.0, 99.5], backend="numba"),
                 lambda: ops.percentiles(stack[0], 90.0, backend="numba"),
                 lambda: ops.clip_to_percentiles(stack, 2.0, 98.0, backend="numba"),
                 lambda: ops.rescale_fields(stack, np.full(3, 7.0, np.float32), np.zeros(3, np.float32),
                                            np.full(3, 100.0, np.float32), backend="numba")):
        call()
        served.add(last_dispatch().backend)
ops.normalise_to_percentile(stack.astype(np.float32), 99.0, backend="numba")
served.add(last_dispatch().backend)
after = signatures()
print(sorted(served))
print({name: (before[name], after[name]) for name in before if after[name] != before[name]})
"""


def test_the_levels_calls_compile_nothing_after_warm(sandbox) -> None:
    done = sandbox.python(_COUNT, SPACR_ACCEL_NUMBA_KERNELS="science:levels")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "['numba']"
    assert lines[1] == "{}", f"compiled during a call (signatures before, after): {lines[1]}"
