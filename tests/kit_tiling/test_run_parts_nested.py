"""``tiling.run_parts`` called from inside one of its own parts: a user's or a backend's work that
calls an operation (whose checks read big stacks in bands on the same pool) must finish, not wait
for ever on a pool whose every thread is waiting for it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

NESTED = textwrap.dedent("""
    import numpy as np
    from spacr_accel_core import ops
    from spacr_accel_core.tiling import cpu_threads, run_parts

    def inner(index):
        return sum(run_parts(lambda k: index * 10 + k, [(k,) for k in range(3)]))

    # more outer parts than pool threads: every pool thread runs an outer part and nests a call
    print(run_parts(inner, [(index,) for index in range(cpu_threads() + 2)]))

    def failing(index):
        return run_parts(lambda k: index // k, [(1,), (0,)])

    try:
        run_parts(failing, [(index,) for index in range(cpu_threads() + 2)])
    except ZeroDivisionError:
        print("raised")

    rng = np.random.default_rng(1)
    first = rng.normal(size=(3, 200, 480))  # big enough that the finite check reads it in bands
    second = np.roll(first, (2, -3), axis=(-2, -1))

    def register(offset):
        return ops.phase_correlate(first, second, expected=(offset, 0), backend="numpy").dy.tolist()

    print(run_parts(register, [(0,)] * (cpu_threads() + 2)))
""")


def test_run_parts_inside_a_part_finishes() -> None:
    """It hung: a pool thread's nested call queued its parts behind the pool's own busy threads."""
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    out = subprocess.run([sys.executable, "-c", NESTED], capture_output=True, text=True, env=env,
                         timeout=60, check=True)
    lines = out.stdout.split("\n")
    threads = int(subprocess.run([sys.executable, "-c", "from spacr_accel_core.tiling import cpu_threads; "
                                  "print(cpu_threads())"], capture_output=True, text=True, env=env,
                                 check=True).stdout)
    assert lines[0] == str([30 * index + 3 for index in range(threads + 2)])
    assert lines[1] == "raised"  # a nested part's exception reaches the caller
    assert lines[2] == str([[-2, -2, -2]] * (threads + 2))
