"""Fixtures for the trust tests: a private numba cache, and a private copy of the numba backend's
package for tests that change its source (the installed files are never touched)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import spacr_accel_numba

DEADLINE = 240.0
"""Seconds a subprocess may take at most (a compile at nice 19 on a busy machine)."""


@dataclass(frozen=True)
class Sandbox:
    """A numba cache of its own, and optionally a copy of the package that a test may edit.

    :param root: ``NUMBA_CACHE_DIR``.
    :param package: the package folder the subprocesses import (a copy, or the installed one).
    :param env: the environment of a subprocess on this cache.
    """

    root: Path
    package: Path
    env: dict[str, str]

    def python(self, code: str, *, timeout: float = DEADLINE, **extra: str) -> subprocess.CompletedProcess[str]:
        """Run ``code`` in a fresh interpreter on this cache (``extra``: more environment)."""
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              env={**self.env, **extra}, timeout=timeout, check=False)

    def command(self, *args: str, timeout: float = DEADLINE, **extra: str) -> subprocess.CompletedProcess[str]:
        """Run ``python -m spacr_accel_core ARGS`` on this cache."""
        return subprocess.run([sys.executable, "-m", "spacr_accel_core", *args], capture_output=True, text=True,
                              env={**self.env, **extra}, timeout=timeout, check=False)


def _environment(root: Path, path: Path | None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if key not in ("SPACR_ACCEL_PATCH", "SPACR_ACCEL_NUMBA_COMPILE", "NUMBA_CACHE_LOCATOR_CLASSES")}
    env.update({"NUMBA_CACHE_DIR": str(root), "SPACR_ACCEL_DISABLE": "torch,cupy,opencv,openvino",
                "SPACR_ACCEL_NUMBA_COMPILE": "here"})
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(path), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    """The installed package on a cache of its own (compiled in the process: no compiler left behind)."""
    root = tmp_path / "numba-cache"
    return Sandbox(root, Path(spacr_accel_numba.__file__).resolve().parent, _environment(root, None))


@pytest.fixture
def copied(tmp_path: Path) -> Sandbox:
    """A copy of the package first on the path, on a cache of its own: a test may change its files."""
    root = tmp_path / "numba-cache"
    source = Path(spacr_accel_numba.__file__).resolve().parent
    shutil.copytree(source, tmp_path / "site" / source.name, ignore=shutil.ignore_patterns("__pycache__"))
    return Sandbox(root, tmp_path / "site" / source.name, _environment(root, tmp_path / "site"))
