"""Fixtures for the cold-start tests: each test gets a numba cache of its own, empty, and any
compiler left running in it is ended at teardown (none touches the developer's cache)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from spacr_accel_numba import _compiler

DEADLINE = 180.0
"""Seconds a test waits for a compile at most: the compiler runs at nice 19 on a busy machine."""


@dataclass(frozen=True)
class Cold:
    """A fresh numba cache and the environment that points a process at it.

    :param root: ``NUMBA_CACHE_DIR``.
    :param folder: the cache folder of this package's kernels inside it (the compiler's lock and ledger).
    :param env: the environment for a process on this cache: one small kernel, CPU backends only.
    """

    root: Path
    folder: Path
    env: dict[str, str]

    def python(self, code: str, *, timeout: float = DEADLINE, **extra: str) -> subprocess.CompletedProcess[str]:
        """Run ``code`` in a fresh interpreter on this cache (``extra``: more environment)."""
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              env={**self.env, **extra}, timeout=timeout, check=False)

    def command(self, *args: str, timeout: float = DEADLINE, **extra: str) -> subprocess.CompletedProcess[str]:
        """Run ``python -m spacr_accel_core ARGS`` (the ``spacr-accel`` command) on this cache."""
        return subprocess.run([sys.executable, "-m", "spacr_accel_core", *args], capture_output=True, text=True,
                              env={**self.env, **extra}, timeout=timeout, check=False)

    def ledger(self) -> dict[str, _compiler.Entry]:
        return _compiler.read_ledger(self.folder)

    @staticmethod
    def until(condition: Callable[[], object], what: str, deadline: float = DEADLINE) -> object:
        """Poll ``condition`` until it is true (returned), failing the test after ``deadline`` seconds."""
        return _until(condition, what, deadline)

    def holder(self) -> int | None:
        """The pid the compiler wrote in the lock file, while it holds the lock."""
        if not self.folder.is_dir() or not _compiler.compiling(self.folder):
            return None
        try:
            return int((self.folder / _compiler.LOCK).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None


def _until(condition: Callable[[], object], what: str, deadline: float = DEADLINE) -> object:
    """Poll ``condition`` until it is true (returned), failing the test after ``deadline`` seconds."""
    end = time.monotonic() + deadline
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"{what}: not within {deadline:g} s")
        time.sleep(0.1)


@pytest.fixture
def cold(tmp_path: Path) -> Iterator[Cold]:
    """A fresh cache; at teardown a compiler still running on it is ended (this test started it)."""
    root = tmp_path / "numba-cache"
    env = {key: value for key, value in os.environ.items()
           if key not in ("SPACR_ACCEL_PATCH", "SPACR_ACCEL_NUMBA_COMPILE", "NUMBA_CACHE_LOCATOR_CLASSES")}
    env.update({"NUMBA_CACHE_DIR": str(root), "SPACR_ACCEL_NUMBA_KERNELS": "filter:float32",
                "SPACR_ACCEL_DISABLE": "torch,cupy,opencv,openvino"})
    made = Cold(root, root / _compiler._subpath(_compiler._PACKAGE), env)
    try:
        yield made
    finally:
        pid = made.holder()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
            _until(lambda: made.holder() is None, "the compiler ending", 30.0)
