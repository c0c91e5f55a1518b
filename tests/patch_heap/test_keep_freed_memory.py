"""``patch.keep_freed_memory``: glibc told to reuse large freed blocks, never trim its heap, and keep
one heap for every thread started after it.

The setting is process-wide and cannot be undone, so what it does to the allocator is observed in a
fresh interpreter (glibc's own ``mallinfo2`` counters); in this process only the paths that change
nothing run (a platform without glibc, a refused option), with the module's memo reset.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from spacr_accel_core.patch import HeapSetting, _heap, keep_freed_memory


def _glibc_with_mallinfo2() -> bool:
    found = _heap._glibc()
    return found is not None and hasattr(found[0], "mallinfo2")


OBSERVED = textwrap.dedent("""
    import ctypes, sys
    import numpy as np
    from spacr_accel_core.patch import keep_freed_memory

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                     "fordblks", "keepcost")]

    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MallInfo2
    block = 1 << 27  # 128 MiB, four times glibc's largest threshold for mapping a block on its own

    def heap_and_mapped():
        info = libc.mallinfo2()
        return info.arena, info.hblkhd

    def allocate():
        array = np.ones(block // 8)
        return array, heap_and_mapped()

    before, mapped_before = allocate()[1]  # the default: the block mapped apart, unmapped at free
    print("default", mapped_before >= block)
    setting = keep_freed_memory()
    print("applied", setting.applied, keep_freed_memory() is setting)
    kept, (heap, mapped) = allocate()
    print("in the heap", mapped < block and heap >= block)
    del kept
    print("kept after free", heap_and_mapped()[0] >= block)
    again, (heap_again, _) = allocate()
    print("reused", heap_again == heap)
""")


@pytest.mark.skipif(not _glibc_with_mallinfo2(), reason="needs glibc 2.33 or later (mallinfo2) to observe it")
def test_large_blocks_come_from_the_heap_and_stay_there_for_the_next_allocation() -> None:
    done = subprocess.run([sys.executable, "-c", OBSERVED], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:5] == ["default True", "applied True True", "in the heap True",
                                           "kept after free True", "reused True"], done.stdout


@pytest.fixture
def fresh_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_heap, "_applied", [])


def test_without_glibc_nothing_is_set_and_the_reason_says_so(fresh_memo: None,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_heap.sys, "platform", "darwin")
    setting = keep_freed_memory()
    assert setting == HeapSetting(False, setting.reason) and not setting.applied
    assert "glibc" in setting.reason and "darwin" in setting.reason
    assert keep_freed_memory() is setting  # once per process


class _RefusingLibc:
    """A C library whose ``mallopt`` refuses the mapping limit (returns 0) and takes the rest."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

        def mallopt(option: int, value: int) -> int:
            self.calls.append((option, value))
            return 0 if option == -4 else 1

        self.mallopt: Any = mallopt


def test_a_refused_option_is_named_and_not_reported_as_applied(fresh_memo: None,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    libc = _RefusingLibc()
    monkeypatch.setattr(_heap, "_glibc", lambda: (libc, "2.99"))
    setting = keep_freed_memory()
    assert not setting.applied and setting.reason == "glibc 2.99 refused M_MMAP_MAX"
    assert libc.calls == [(-4, 0), (-1, -1), (-8, 1)]
    assert libc.mallopt.argtypes == (ctypes.c_int, ctypes.c_int)


ARENAS = textwrap.dedent("""
    import ctypes, sys, threading
    import numpy as np
    from spacr_accel_core.patch import _heap

    if sys.argv[1] == "kept":
        assert _heap.keep_freed_memory().applied
    blocks = []
    threads = [threading.Thread(target=lambda: blocks.append(np.ones(1 << 16))) for _ in range(4)]
    for thread in threads:
        thread.start()
        thread.join()
    ctypes.CDLL(None).malloc_stats()  # one "Arena N:" paragraph per arena, on standard error
""")


@pytest.mark.skipif(_heap._glibc() is None, reason="only glibc's allocator is told to keep memory")
def test_a_kept_heap_is_one_heap_for_every_thread(tmp_path: Path) -> None:
    """glibc gives each new thread an arena of its own (up to eight a core), and memory freed in one
    arena serves only its threads: kept, every thread started afterwards allocates from the main one."""
    script = tmp_path / "arenas.py"
    script.write_text(ARENAS, encoding="utf-8")

    def arenas(mode: str) -> int:
        done = subprocess.run([sys.executable, str(script), mode], check=False, capture_output=True, text=True,
                              timeout=120, env={k: v for k, v in os.environ.items() if k != "SPACR_ACCEL_PATCH"})
        assert done.returncode == 0, done.stderr
        return sum(line.startswith("Arena ") for line in done.stderr.splitlines())

    assert arenas("kept") == 1
    assert arenas("default") > 1
