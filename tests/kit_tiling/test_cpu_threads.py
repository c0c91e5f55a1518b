"""``tiling.cpu_threads``: what a CPU backend may start, honouring a host's ``OMP_NUM_THREADS``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from spacr_accel_core.tiling import cpu_threads


def test_omp_num_threads_caps_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    free = cpu_threads()
    assert 1 <= free <= 8
    assert cpu_threads(most=1) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert cpu_threads() == 1
    for ignored in ("", "0", "two", "-3"):
        monkeypatch.setenv("OMP_NUM_THREADS", ignored)
        assert cpu_threads() == free


def test_a_dask_worker_environment_makes_both_cpu_backends_single_threaded() -> None:
    code = ("from spacr_accel_numpy import _filters; from spacr_accel_core import tiling; "
            "print(_filters._WORKERS, tiling.cpu_threads())")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["1", "1"]
