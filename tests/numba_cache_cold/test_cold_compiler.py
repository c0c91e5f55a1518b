"""The detached compiler, in real processes on a fresh cache each: it outlives the process that
started it, runs alone per cache at the lowest priority, and a later process loads its kernel."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spacr_accel_numba import _compiler

_MISSES = "from spacr_accel_numba._compile_child import _compiles, _ours\n"


def _lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def test_the_cache_fills_after_the_process_that_needed_it_exits(cold) -> None:
    lines = _lines(cold.python("""
        import numpy as np
        from spacr_accel_core import ops, config, last_dispatch
        with config.override(backends=["numba", "numpy"]):
            ops.maximum_filter(np.ones((16, 16), np.float32), 3)
        print(last_dispatch().backend, last_dispatch().waiting)
    """))
    assert lines == ["numpy ('numba',)"]  # numba declined while compiling: the floor answered
    listed = cold.until(lambda: cold.ledger().get("filter:float32"), "the compiler listing its kernel")
    assert listed.compiled > 0 and not listed.failed
    cold.until(lambda: not _compiler.compiling(cold.folder), "the compiler exiting")
    lines = _lines(cold.python(_MISSES + textwrap.dedent("""
        import numpy as np, spacr_accel_core
        from spacr_accel_core import ops, config, last_dispatch
        print(spacr_accel_core.warm_up(timeout=120))
        with config.override(backends=["numba", "numpy"]):
            ops.maximum_filter(np.ones((16, 16), np.float32), 3)
        print(last_dispatch().backend, _compiles(_ours()))
    """)))
    assert lines == ["{'numba': True}", "numba 0"]  # ready, and loaded from the cache: nothing compiled


def test_one_compiler_at_a_time_and_none_for_another_copy_of_the_package(cold, tmp_path: Path) -> None:
    cold.folder.mkdir(parents=True)
    with (cold.folder / _compiler.LOCK).open("a+b") as handle:
        assert _compiler.try_lock(handle)
        try:
            lines = _lines(cold.python(f"""
                from pathlib import Path
                from spacr_accel_numba import _compiler
                print(_compiler.compiling(Path({str(cold.folder)!r})))
            """))
            assert lines == ["True"]
            child = [sys.executable, "-m", "spacr_accel_numba._compile_child", str(cold.folder)]
            second = subprocess.run([*child, str(_compiler._PACKAGE)], env=cold.env, capture_output=True,
                                    text=True, timeout=120, check=False)
            assert second.returncode == 0, second.stderr
            assert not (cold.folder / _compiler.LEDGER).exists()  # it compiled nothing
        finally:
            _compiler.unlock(handle)
    other = subprocess.run([*child, str(tmp_path)], env=cold.env, capture_output=True, text=True,
                           timeout=120, check=False)
    assert other.returncode == 3, other.stderr
    assert not (cold.folder / _compiler.LEDGER).exists()


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="POSIX priorities")
def test_the_compiler_runs_at_the_lowest_priority_with_one_thread_and_no_patch(cold) -> None:
    lines = _lines(cold.python(f"""
        from pathlib import Path
        from spacr_accel_numba import _compiler
        folder = Path({str(cold.folder)!r})
        folder.mkdir(parents=True, exist_ok=True)
        print(_compiler.start(folder), _compiler._child.pid)
    """, SPACR_ACCEL_PATCH="1"))
    started, pid = lines[0].split()
    assert started == "True"
    holder = cold.until(cold.holder, "the compiler taking its lock", 60.0)
    assert holder == int(pid)  # the compiler wrote its own pid in the lock file
    assert os.getpriority(os.PRIO_PROCESS, holder) == 19
    group = Path(f"/proc/{holder}/autogroup")  # Linux: its own session's scheduling group, at 19 too
    if group.exists() and Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1":
        # A process in a control group of its own (a container, a CI runner) is scheduled by that
        # group, not by an autogroup, and Linux prints nothing for it: only a printed group is checked.
        theirs = group.read_text().split()
        ours = Path("/proc/self/autogroup").read_text().split()
        if theirs:
            assert theirs[-1] == "19", theirs
            assert not ours or theirs[0] != ours[0], (theirs, ours)
    environ = Path(f"/proc/{holder}/environ")
    if environ.exists():
        variables = dict(item.split("=", 1) for item in environ.read_text().split("\0") if "=" in item)
        assert variables["NUMBA_NUM_THREADS"] == "1" and "SPACR_ACCEL_PATCH" not in variables


_AUTOGROUP = Path("/proc/self/autogroup")


@pytest.mark.skipif(not _AUTOGROUP.exists() or not hasattr(os, "getsid"), reason="Linux's session groups")
def test_a_compiler_run_inside_another_session_leaves_that_sessions_group_alone(cold) -> None:
    # A session of its own for the one who asks (this test's session is never touched), and in it
    # the compiler's priority lowered by a process that does not lead the session (as when
    # `python -m spacr_accel_numba._compile_child` is run from a terminal): the session's group
    # keeps its nice value.
    script = textwrap.dedent("""
        import pathlib, subprocess, sys
        group = pathlib.Path("/proc/self/autogroup")
        before = group.read_text().split()
        subprocess.run([sys.executable, "-c", "from spacr_accel_numba import _compile_child; "
                        "_compile_child._lower_priority()"], check=True)
        print(" ".join(before[-1:]), " ".join(group.read_text().split()[-1:]))
    """)
    asker = subprocess.run([sys.executable, "-c", script], env=cold.env, capture_output=True, text=True,
                           timeout=120, check=False, start_new_session=True)
    assert asker.returncode == 0, asker.stderr
    before, after = [*asker.stdout.split(), "", ""][:2]
    if before:  # a group Linux prints (none in a control group of its own)
        assert after == before, asker.stdout


def test_compiling_here_starts_no_compiler(cold) -> None:
    lines = _lines(cold.python(_MISSES + textwrap.dedent("""
        import spacr_accel_numba
        print(spacr_accel_numba.warm(timeout=170), _compiles(_ours()) > 0)
    """), SPACR_ACCEL_NUMBA_COMPILE="here"))
    assert lines == ["True True"]  # ready, compiled in this process
    written = [path.name for path in cold.root.rglob("*")]
    assert written and _compiler.LOCK not in written and _compiler.LEDGER not in written


def test_eight_workers_on_one_fresh_cache_compile_each_kernel_once(cold) -> None:
    script = _MISSES + textwrap.dedent("""
        import numpy as np, scipy.ndimage, spacr_accel_core
        from spacr_accel_core import ops, config, last_dispatch
        ready = spacr_accel_core.warm_up(timeout=170)["numba"]
        field = np.random.default_rng(7).random((40, 50), dtype=np.float32)
        with config.override(backends=["numba"], only=True):
            answer = ops.maximum_filter(field, 5)
        same = np.array_equal(answer, scipy.ndimage.maximum_filter(field, size=5, mode="nearest"))
        print(ready, last_dispatch().backend, same, _compiles(_ours()))
    """)
    workers = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], env=cold.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(8)]
    answers = []
    for worker in workers:
        out, err = worker.communicate(timeout=240)
        assert worker.returncode == 0, err[-3000:]
        answers.append(out.split())
    assert [answer[:3] for answer in answers] == [["True", "numba", "True"]] * 8
    assert sum(int(answer[3]) for answer in answers) == 0  # every worker loaded it from the cache
    entry = cold.ledger()["filter:float32"]
    assert entry.compiled > 0 and not entry.failed  # compiled once, by the one compiler
