"""A damaged kernel cache is set aside and rebuilt: numba still runs, in that process and later ones.

The cache files are really damaged, in a temporary ``NUMBA_CACHE_DIR`` seeded with a copy of the
cache this test run already compiled (so only the damaged kernels compile again), and each
process is a fresh interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import spacr_accel_numba
from spacr_accel_numba import _neighbours_kernels

_COPY = """
import glob, os, shutil, sys
from spacr_accel_numba import _neighbours_kernels  # numba's cache paths are known; nothing is compiled yet
here = _neighbours_kernels.grid_empty._cache._cache_path
os.makedirs(here, exist_ok=True)
for path in glob.glob(os.path.join(sys.argv[1], "*_kernels.*.nb[ic]")):  # every kernel module's
    shutil.copy(path, here)
def index(kernel):  # this source's, by numba's own name for it
    return getattr(_neighbours_kernels, kernel)._cache._cache_file._index_path
"""

_DAMAGE = _COPY + """
with open(index("grid_empty"), "r+b") as damaged:  # overwritten in the middle
    damaged.seek(40)
    damaged.write(os.urandom(64))
data = index("brute_rows")[:-len(".nbi")] + ".1.nbc"  # cut short
with open(data, "rb") as whole:
    kept = whole.read()[:100]
with open(data, "wb") as part:
    part.write(kept)
open(index("settle_held"), "wb").close()  # emptied
"""

_USE = """
import glob, os
import numpy as np
import spacr_accel_numba
from spacr_accel_core import ops, last_dispatch
from spacr_accel_numba import _neighbours_kernels
print(spacr_accel_numba.warm(timeout=600), spacr_accel_numba.failure(), flush=True)
rng = np.random.default_rng(1)
target = rng.uniform(0, 100, (2000, 2))
source = np.concatenate([target[:300] + 0.3, [[1e30, 5.0]]])  # the last one: the brute force
wide = rng.standard_normal((300, 16)).astype(np.float32)
for s, t in ((source, target), (wide[:50], wide)):
    got = ops.nearest_neighbours(s, t, backend="numba")
    served = last_dispatch().backend
    floor = ops.nearest_neighbours(s, t, backend="numpy")
    print(served, all(a.tobytes() == b.tobytes() for a, b in zip(got, floor)))
here = _neighbours_kernels.grid_empty._cache._cache_path
print(" ".join(sorted({os.path.basename(path).split("-")[0] for path in glob.glob(os.path.join(here, "*.damaged"))})))
print(sum(_neighbours_kernels.grid_empty.stats.cache_hits.values()),
      sum(_neighbours_kernels.settle_held.stats.cache_hits.values()))
"""


def _run(code: str, cache: Path, *args: str) -> list[str]:
    # compiled in this process (not by the detached compiler, tests/numba_cache_cold): the repair here is this process's
    env = {**os.environ, "SPACR_ACCEL_DISABLE": "torch,cupy,opencv,openvino", "NUMBA_CACHE_DIR": str(cache),
           "SPACR_ACCEL_NUMBA_COMPILE": "here"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          env=env, timeout=600, check=True)
    return done.stdout.splitlines()


def test_a_damaged_cache_is_set_aside_and_rebuilt_for_later_processes(tmp_path: Path) -> None:
    assert spacr_accel_numba.warm(timeout=600)  # this process's cache: the copy's source
    cache = tmp_path / "numba-cache"
    _run(_DAMAGE, cache, _neighbours_kernels.grid_empty._cache._cache_path)
    first = _run(_USE, cache)
    assert first[0] == "True None", first  # it used to fail here: "UnpicklingError: ..." for good
    assert first[1:3] == ["numba True", "numba True"]
    damaged = ["_neighbours_kernels.brute_rows", "_neighbours_kernels.grid_empty", "_neighbours_kernels.settle_held"]
    assert first[3].split() == damaged  # each set aside beside itself
    assert first[4] == "0 0"  # compiled again here, not loaded
    later = _run(_USE, cache)
    assert later[:3] == ["True None", "numba True", "numba True"]
    assert later[4] == "1 1"  # the rebuilt cache serves a later process


def test_a_cache_that_cannot_be_written_is_still_read_and_the_rest_compiled_in_memory(tmp_path: Path) -> None:
    assert spacr_accel_numba.warm(timeout=600)
    cache = tmp_path / "numba-cache"
    lines = _run(_COPY + """
import errno
import numba.core.caching
import spacr_accel_numba
from spacr_accel_core import ops, last_dispatch
from spacr_accel_numba import _filters_kernels
for path in glob.glob(index("grid_empty")[:-len(".nbi")] + ".*"):
    os.remove(path)  # this kernel compiles; writing its cache fails, as on a full disk
def full(*args):
    raise OSError(errno.ENOSPC, "No space left on device")
numba.core.caching.IndexDataCacheFile._save_data = full
print(spacr_accel_numba.warm(timeout=600), spacr_accel_numba.failure())
import numpy as np
points = np.random.default_rng(2).uniform(0, 10, (500, 2))
got = ops.nearest_neighbours(points[:50] + 0.1, points, backend="numba")
print(last_dispatch().backend, sum(_neighbours_kernels.grid_empty.stats.cache_misses.values()),
      sum(_filters_kernels.filter_band.stats.cache_hits.values()) >= 3)  # compiled; what was there loaded
""", cache, _neighbours_kernels.grid_empty._cache._cache_path)
    assert lines == ["True None", "numba 1 True"]


def test_a_failure_beside_the_cache_sets_no_file_aside(tmp_path: Path) -> None:
    # numba calls back into its compiler while it loads an entry (refreshing its registries); a
    # failure there is not a damaged file, and must not cost the machine its good cache.
    assert spacr_accel_numba.warm(timeout=600)
    cache = tmp_path / "numba-cache"
    lines = _run(_COPY + """
import numba.core.base
import spacr_accel_numba
def broken(self):
    raise ValueError("generator already executing")
numba.core.base.BaseContext.refresh = broken
print(spacr_accel_numba.warm(timeout=600), spacr_accel_numba.failure())
print(len(glob.glob(os.path.join(here, "*.damaged"))), len(glob.glob(os.path.join(here, "*.nbi"))) > 0)
""", cache, _neighbours_kernels.grid_empty._cache._cache_path)
    assert lines == ["False ValueError: generator already executing", "0 True"]
