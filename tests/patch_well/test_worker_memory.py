"""A worker of spaCR's decode pool keeps the memory it frees, by default and nowhere else: the patch
tells the allocator so when spaCR's decode initializer runs in a process that
``concurrent.futures``' process pool started, never in spaCR's own process (where the decode with one
worker calls the same initializer), never with ``free-memory``. A kept heap is one heap: threads
started after it share it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spacr_accel_core.patch import _heap

pytestmark = pytest.mark.skipif(_heap._glibc() is None, reason="only glibc's allocator is told to keep memory")

DECODE_POOL = textwrap.dedent("""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    def state(_):
        from spacr import ops_engine
        from spacr_accel_core.patch import _heap
        return [setting.applied for setting in _heap._applied], sorted(ops_engine._LIBRARY or ())

    if __name__ == "__main__":
        from spacr import ops_engine

        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=ops_engine._init_decode_worker,
                                 initargs=(frozenset({"ACGT"}),)) as pool:
            print(pool.submit(state, 0).result())
        ops_engine._init_decode_worker(frozenset({"TTTT"}))  # the decode with one worker, in this process
        print(state(0))
""")


def _decode_pool(tmp_path: Path, variable: str) -> list[str]:
    script = tmp_path / "pool.py"
    script.write_text(DECODE_POOL, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SPACR_ACCEL_PATCH": variable})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()


def test_a_decode_pool_worker_keeps_freed_memory_and_spacrs_own_process_does_not(tmp_path: Path) -> None:
    worker, own = _decode_pool(tmp_path, "1")
    assert worker == "([True], ['ACGT'])"  # kept, and spaCR's initializer ran with spaCR's arguments
    assert own == "([], ['TTTT'])"


def test_free_memory_keeps_it_nowhere(tmp_path: Path) -> None:
    worker, own = _decode_pool(tmp_path, "1,free-memory")
    assert worker == "([], ['ACGT'])"
    assert own == "([], ['TTTT'])"


def test_keep_memory_keeps_it_everywhere(tmp_path: Path) -> None:
    worker, own = _decode_pool(tmp_path, "1,keep-memory")
    assert worker == "([True], ['ACGT'])"
    assert own == "([True], ['TTTT'])"


def test_the_initializer_called_outside_a_process_pool_keeps_nothing() -> None:
    was = _heap.policy()
    try:
        _heap.set_policy(None)
        assert _heap.pool_worker_started() is None  # a test's thread is no pool worker
    finally:
        _heap.set_policy(was)
