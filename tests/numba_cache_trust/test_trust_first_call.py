"""A fresh process with a complete kernel cache is served by numba from its first call: the call that
needs a kernel the ledger lists loads it itself, never compiling; ``warm`` compiles every signature
the operations' real calls reach, so nothing compiles after it; a kernel whose cache entry is gone
or damaged is declined as before (the floor answers) and left to the warm-up, never an error."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from spacr_accel_numba import _compiler

FAMILIES = "science:levels,science:planes,science:decode,science:points,science:smooth"
"""The kernels this file warms: spaCR's decode chain's, whose inputs vary most (dtypes, layouts, out=)."""

DEADLINE = 400.0
"""Seconds a subprocess may take at most (the detached compiler runs at nice 19 on a busy machine)."""


@dataclass(frozen=True)
class Warmed:
    """A cache ``spacr-accel warm`` filled, and the environment of a fresh process on it.

    :param root: ``NUMBA_CACHE_DIR``.
    :param folder: this package's cache folder inside it (the ledger).
    :param env: a fresh process's environment: the detached default, CPU backends only.
    """

    root: Path
    folder: Path
    env: dict[str, str]

    def python(self, code: str, **extra: str) -> list[str]:
        """Run ``code`` in a fresh interpreter on this cache; its output lines (a failure fails the test)."""
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              env={**self.env, **extra}, timeout=DEADLINE, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
        return done.stdout.splitlines()

    def copy(self, into: Path) -> Warmed:
        """The same cache, copied: a test may damage the copy."""
        shutil.copytree(self.root, into)
        folder = into / self.folder.name
        return Warmed(into, folder, {**self.env, "NUMBA_CACHE_DIR": str(into)})


def _stop_compiler(folder: Path) -> None:
    """End a compiler still holding ``folder``'s lock (this file's warm started it)."""
    end = time.monotonic() + 30.0
    while folder.is_dir() and _compiler.compiling(folder) and time.monotonic() < end:
        with contextlib.suppress(OSError, ValueError, IndexError, ProcessLookupError, PermissionError):
            os.kill(int((folder / _compiler.LOCK).read_text().split()[0]), signal.SIGTERM)
        time.sleep(0.2)


@pytest.fixture(scope="module")
def warmed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Warmed]:
    """A fresh cache filled by ``python -m spacr_accel_core warm`` (the detached compiler, as installed)."""
    root = tmp_path_factory.mktemp("first-call") / "numba-cache"
    env = {key: value for key, value in os.environ.items()
           if key not in ("SPACR_ACCEL_PATCH", "SPACR_ACCEL_NUMBA_COMPILE", "NUMBA_CACHE_LOCATOR_CLASSES")}
    env.update({"NUMBA_CACHE_DIR": str(root), "SPACR_ACCEL_NUMBA_KERNELS": FAMILIES,
                "SPACR_ACCEL_DISABLE": "torch,cupy,opencv,openvino"})
    made = Warmed(root, root / _compiler._subpath(_compiler._PACKAGE), env)
    try:
        done = subprocess.run([sys.executable, "-m", "spacr_accel_core", "warm"], capture_output=True, text=True,
                              env=env, timeout=DEADLINE, check=False)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        listed = _compiler.read_ledger(made.folder)
        assert sorted(listed) == sorted(FAMILIES.split(",")), listed
        yield made
    finally:
        _stop_compiler(made.folder)


_COMPILES = """
import sys

def compiles():
    # Functions numba compiled (cache misses: a load from the cache is a hit) in the package's kernels.
    total = 0
    for name, module in list(sys.modules.items()):
        if name.startswith("spacr_accel_numba.") and module is not None:
            for value in list(vars(module).values()):
                stats = getattr(value, "stats", None) if hasattr(value, "py_func") else None
                if stats is not None:
                    total += sum(stats.cache_misses.values())
    return total
"""

_WORKER = _COMPILES + """
import numpy as np

def decode_step(seed):
    # One spaCR call in a spawned worker, patched: its backend, compiles, the answer against spaCR's own.
    from spacr_accel_core import patch
    from spacr_accel_numba import _warm
    assert patch.install()
    from spacr import ops_cycles
    plane = (np.random.default_rng(seed).random((300, 310)) * 4000).astype(np.uint16)
    mine = ops_cycles._clipped(plane)
    report = patch.report().format()
    thread = _warm._thread
    patch.uninstall()
    theirs = ops_cycles._clipped(plane)
    same = mine.dtype == theirs.dtype and mine.tobytes() == theirs.tobytes()
    return "served by numba: 1" in report, compiles(), thread is None, same
"""


def test_a_spawned_spacr_worker_is_served_by_numba_from_its_first_call(warmed: Warmed, tmp_path: Path) -> None:
    pytest.importorskip("spacr")
    (tmp_path / "first_call_worker.py").write_text(_WORKER)
    lines = warmed.python("""
        import multiprocessing
        import first_call_worker
        with multiprocessing.get_context("spawn").Pool(2) as pool:
            for answer in pool.map(first_call_worker.decode_step, [1, 2]):
                print(answer)
    """, PYTHONPATH=os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]))
    # Served by numba, nothing compiled, no warm-up thread (the call loaded its kernel), spaCR's bits.
    assert lines == ["(True, 0, True, True)"] * 2


_REAL_CALLS = _COMPILES + """
import numpy as np
from spacr_accel_core import config, last_dispatch, ops

rng = np.random.default_rng(11)

def layouts(shape):
    for dtype in (np.float32, np.uint16, np.uint8):
        plain = (rng.random(shape) * 200).astype(dtype)
        frozen = plain.copy()
        frozen.flags.writeable = False
        yield plain
        yield frozen
        yield np.asfortranarray(plain)
        yield np.repeat(plain, 2, axis=-1)[..., ::2]

calls = []
for f in layouts((2, 30, 40)):
    calls += [
        lambda o, f=f: o.spot_score(np.stack([f, f + 1, f * 2]), **o.kw),
        lambda o, f=f: o.spot_score(np.stack([f, f]).reshape(2, 2, 30, 40), **o.kw),
        lambda o, f=f: o.window_maxima(f, np.array([[3, 4], [10, 12], [0, 0]]), 3, **o.kw),
        lambda o, f=f: o.minimum_filter(f, 3, **o.kw),
        lambda o, f=f: o.minimum_filter(f[0], 5, out=np.empty(f.shape[1:], np.float32), **o.kw),
        lambda o, f=f: o.gaussian_filter(f, 1.0, **o.kw),
        lambda o, f=f: o.gaussian_filter(f[0], (1.0, 2.0), mode="nearest", out=np.empty(f.shape[1:], np.float32),
                                         **o.kw),
        lambda o, f=f: o.gaussian_laplace(f, 1.0, **o.kw),
        lambda o, f=f: o.gaussian_laplace(f[0], (0.0, 1.5), **o.kw),
        lambda o, f=f: o.percentiles(f, [1.0, 99.0], **o.kw),
        lambda o, f=f: o.percentiles(f[0], 50.0, **o.kw),
        lambda o, f=f: o.clip_to_percentiles(f, 2.0, 98.0, **o.kw),
        lambda o, f=f: o.rescale_fields(f, np.full(2, 3.0, np.float32), np.zeros(2, np.float32),
                                        np.full(2, 100.0, np.float32), **o.kw),
    ]
for dtype in (np.float32, np.float64):
    a = rng.random((2, 32, 32)).astype(dtype)
    b = np.roll(a, (2, 3), axis=(1, 2))
    calls += [lambda o, a=a, b=b: o.phase_correlate(a[0], b[0], **o.kw),
              lambda o, a=a, b=b: o.phase_correlate(a, b, **o.kw)]
for dtype in (np.float32, np.float64, np.int64):
    peaks = (rng.random((50, 2)) * 100).astype(dtype)
    centroids = rng.random((10, 2)) * 100
    moved = (rng.random((4, 20, 2)) * 100).astype(dtype)
    calls += [lambda o, p=peaks, c=centroids: o.attribute_reads(p, c, np.full(10, 30.0), **o.kw),
              lambda o, p=peaks, c=centroids: o.attribute_reads(np.asfortranarray(p), c.astype(np.float32),
                                                                np.full(10, 30, np.int64), **o.kw),
              lambda o, m=moved, c=centroids: o.count_within(m, c, 5.0, **o.kw),
              lambda o, m=moved, c=centroids: o.count_within(m[0], c.astype(np.float32), 5.0, **o.kw)]

class Numba:
    kw = {}
    def __getattr__(self, name):
        return getattr(ops, name)

class Floor(Numba):
    kw = {"backend": "numpy"}

def bits(answer):
    if isinstance(answer, tuple):
        return [bits(part) for part in answer]
    if hasattr(answer, "__dataclass_fields__"):  # a registration: the backend's name aside, and the peak
        # ratio to 1e-9 (numba sums the surface's mean by rows, NumPy pairwise: the last bits may differ)
        return [bits(np.round(getattr(answer, name), 9) if name == "peak_ratio" else getattr(answer, name))
                for name in answer.__dataclass_fields__ if name != "backend"]
    array = np.asarray(answer)
    return (array.dtype.str, array.shape, array.tobytes())

served, differ = set(), 0
with config.override(backends=("numba",), only=True):  # a decline raises: every call is numba's
    for call in calls:
        mine = call(Numba())
        served.add(last_dispatch().backend)
        differ += bits(mine) != bits(call(Floor()))
print(len(calls))
print(sorted(served), differ, compiles())
"""


def test_after_warm_no_real_call_compiles(warmed: Warmed) -> None:
    count, answer = warmed.python(_REAL_CALLS)
    assert int(count) > 100
    # Every call numba's, with the floor's bits, and not one function compiled after warm.
    assert answer == "['numba'] 0 0", answer


_DECLINED = _COMPILES + """
import numpy as np
from spacr_accel_core import config, last_dispatch, ops
from spacr_accel_numba import _planes_kernels, _warm
stack = np.arange(2 * 3 * 8 * 9, dtype=np.float32).reshape(2, 3, 8, 9)
with config.override(backends=("numba", "numpy")):
    first = ops.spot_score(stack)
print(last_dispatch().backend, last_dispatch().waiting, sorted(_warm._unloadable),
      len(_planes_kernels.score_rows.overloads))
print(_warm.warm(timeout=300), _warm.failure())
with config.override(backends=("numba", "numpy")):
    again = ops.spot_score(stack)
print(last_dispatch().backend, again.tobytes() == first.tobytes())
"""


@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_a_listed_kernel_that_does_not_load_goes_to_the_floor_and_the_warm_up(warmed: Warmed, tmp_path: Path,
                                                                              damage: str) -> None:
    copy = warmed.copy(tmp_path / "cache")
    entries = sorted(copy.folder.glob("_planes_kernels*.nbc" if damage == "truncated" else "_planes_kernels*.nbi"))
    assert entries
    for path in entries:
        if damage == "truncated":
            path.write_bytes(path.read_bytes()[:20])
        else:
            path.unlink()
    try:
        lines = copy.python(_DECLINED)
    finally:
        _stop_compiler(copy.folder)
    # The call's own load stopped before compiling anything; the floor answered; the warm-up mended it.
    assert lines == ["numpy ('numba',) ['science:planes'] 0", "True None", "numba True"]


_THREADS = _COMPILES + """
import threading
import numpy as np
from spacr_accel_core import config, last_dispatch, ops
from spacr_accel_numba import _warm
stack = np.arange(4 * 3 * 30 * 20, dtype=np.uint16).reshape(4, 3, 30, 20)
expected = ops.spot_score(stack, backend="numpy").tobytes()
start, answers = threading.Barrier(6), []

def call():
    start.wait()
    with config.override(backends=("numba", "numpy")):
        answer = ops.spot_score(stack)
        answers.append((last_dispatch().backend, answer.tobytes() == expected))

threads = [threading.Thread(target=call) for _ in range(6)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(sorted({backend for backend, _ in answers} - {"numpy"}), all(same for _, same in answers), len(answers),
      "science:planes" in _warm._ready, sorted(_warm._unloadable), compiles())
"""


def test_threads_asking_at_once_get_the_same_bits_and_one_load(warmed: Warmed) -> None:
    # One thread loads; one finding the load under way is answered by the floor, never kept waiting.
    assert warmed.python(_THREADS) == ["['numba'] True 6 True [] 0"]
