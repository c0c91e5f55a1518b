"""A fork during numba's warm-up: the child answers at once, exactly, and compiles again on its own.

Every test forks for real, in a fresh interpreter run with a timeout: a child that waited on a
lock held by a thread it does not have would hang, and the parent kills it and reports it.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np

_ONLY_CPU = {**os.environ, "SPACR_ACCEL_DISABLE": "torch,cupy,opencv,openvino"}


def _forking_script() -> str:
    """The benchmark's forking script (``benchmarks/bench_numba_edges.py``): one script, timed there
    and judged here."""
    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "bench_numba_edges.py"
    spec = importlib.util.spec_from_file_location("bench_numba_edges", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    script: str = module.forking_script(90.0)
    return script


def _run_with_log(code: str, *args: str, timeout: float = 240) -> tuple[list[str], str]:
    """The script's lines, and what it logged (a warm-up that failed says why there)."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          env=_ONLY_CPU, timeout=timeout, check=True)
    return done.stdout.splitlines(), done.stderr


def _run(code: str, *args: str, timeout: float = 240) -> list[str]:
    return _run_with_log(code, *args, timeout=timeout)[0]


def test_twenty_children_forked_at_any_moment_of_the_warm_up_answer_exactly_at_once() -> None:
    # Moments spread over the whole warm-up from numba's cache (the grace, the import of numba,
    # loading each kernel), each nudged at random, four parents of five children each.
    rng = np.random.default_rng()
    moments = np.linspace(0.0, 2.4, 20) + rng.uniform(0.0, 0.12, 20)
    answered: list[str] = []
    warmed: list[str] = []
    script = _forking_script()
    for parent in range(4):
        lines, log = _run_with_log(script, *(f"{moment:.3f}" for moment in moments[parent::4]))
        answered += [line for line in lines if line.startswith("answered ")]
        warmed += [line for line in lines if line.startswith("warmed ")]
        assert lines[-1] == "parent True", (lines[-1], moments[parent::4].round(3).tolist(), log[-3000:])
    assert len(answered) == 20, answered  # a missing line is a child that hung
    for line in answered:
        _, exact, seconds = line.split()
        assert exact == "True" and float(seconds) <= 2.0, line
    assert [line.split()[:4] for line in warmed] == [["warmed", "True", "True", "None"]] * 20, warmed


def test_a_child_gets_back_the_numba_locks_a_lost_thread_held() -> None:
    lines = _run("""
        import os, threading, time
        import numba
        from numba.core.compiler_lock import global_compiler_lock
        from numba.core.registry import cpu_target
        from llvmlite.binding import ffi
        from spacr_accel_numba import _fork  # registers the fork handlers
        _fork.FORK_WAIT = 0.2  # the lost thread never leaves LLVM: the fork waits this long, then goes on
        @numba.njit
        def inner(x):
            return x + 1
        stack = cpu_target.typing_context.callstack
        held, never = threading.Event(), threading.Event()
        def holder():  # a compile in progress, as the warm-up thread holds it
            with global_compiler_lock, stack._lock:
                stack._stack.append("a frame of the lost thread")
                inner._compiling_counter.counter += 1  # compiling inner
                with ffi.lib._lock._lock:  # inside a call into LLVM
                    held.set()
                    never.wait()
        threading.Thread(target=holder, daemon=True).start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            @numba.njit
            def outer(x):
                return 2 * inner(x)
            print("child", outer(20), len(stack._stack), flush=True)  # compiles: takes every lock again
            os._exit(0)
        deadline = time.time() + 60
        while os.waitpid(pid, os.WNOHANG)[0] == 0:
            if time.time() > deadline:
                os.kill(pid, 9)
                print("the child hung")
                break
            time.sleep(0.05)
    """)
    assert lines == ["child 42 0"]


def test_a_fork_that_finds_no_safe_moment_leaves_numba_out_of_the_child(tmp_path: pathlib.Path) -> None:
    # The warm-up is stuck in an import for longer than a fork waits: the child cannot import
    # that module again (its lock belongs to the lost thread), so it uses the floor, at once.
    (tmp_path / "slow_module.py").write_text("import time\ntime.sleep(4)\n")
    lines = _run(f"""
        import os, sys, time
        import numpy as np
        sys.path.insert(0, {str(tmp_path)!r})
        from spacr_accel_core import ops, last_dispatch
        from spacr_accel_numba import _fork, _warm
        _fork.FORK_WAIT = 0.3
        def stuck():
            import slow_module
        _warm._jobs = lambda: [("filter:float32", stuck)]
        field = np.ones((16, 16), np.float32)
        ops.maximum_filter(field, 3)  # starts the warm-up
        _warm._hurry.set()
        time.sleep(1.5)  # the slow module is being imported (or numba still is)
        began = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            ops.maximum_filter(field, 3)
            print("child", last_dispatch().backend, _warm.warm(), flush=True)
            print("child", _warm.failure(), flush=True)
            os._exit(0)
        waited = time.perf_counter() - began
        os.waitpid(pid, 0)
        print("parent", round(waited, 1), _warm.warm(timeout=60), flush=True)
    """)
    assert lines[0] == "child numpy False"
    assert "forked while the warm-up was importing or compiling" in lines[1]
    _, waited, warmed = lines[2].split()
    assert 0.3 <= float(waited) <= 1.0  # the fork waited its bound, not for the import
    assert warmed == "True"  # and the parent's warm-up went on
