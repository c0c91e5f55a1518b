"""A new operation takes one module in the core and one module per backend: a toy one, added here
the way ``docs/contributing.md`` says, is seen by dispatch, the conformance suite, the Dask layer
(on a real ``distributed.LocalCluster``), the doctor and the bench with no other change anywhere.

The toy runs in a fresh interpreter (the operation table is per process, and this one's must stay
the core's own), from two files written here: ``toy_levels.py``, the operation (its hook's
specification, its row and its public function), and ``toy_backend.py``, the backend that serves it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

OPERATION = '''
"""above_minimum: each pixel's height above its field's minimum (a toy operation)."""

from typing import Any

import numpy as np

from spacr_accel_core.table import Example, WholeFields, dispatch, operation


def spacr_accel_above_minimum(  # type: ignore[empty-body]  # a specification: its docstring, no body
        stack: np.ndarray) -> np.ndarray:
    """Each pixel minus its field's minimum, in float32.

    :param stack: a non-empty C-contiguous float32 ``(F, H, W)`` stack; never modify it.
    :returns: float32 ``(F, H, W)``.
    """


def reference(field: Any) -> np.ndarray:
    array = np.asarray(field, dtype=np.float32)
    return array - array.min(axis=(-2, -1), keepdims=True)


def check(result: Any, shape: tuple[int, ...]) -> str | None:
    if not isinstance(result, np.ndarray) or result.dtype != np.float32 or result.shape != shape:
        return f"returned {getattr(result, 'dtype', type(result))}{list(getattr(result, 'shape', ()))}"
    return None


def agree(expected: np.ndarray, got: np.ndarray) -> tuple[bool, str]:
    same = bool(np.array_equal(expected, got))
    return same, "bit for bit" if same else "differs"


def small() -> Example:
    return Example("a 2x3 ramp from 2", (np.arange(2, 8, dtype=np.float32).reshape(2, 3),))


def bench(quick: bool, rng: np.random.Generator) -> Example:
    side = 64 if quick else 512
    return Example(f"{side}x{side} float32", (rng.random((side, side), dtype=np.float32),))


@operation(spec=spacr_accel_above_minimum, task="Toy heights (above_minimum)", check=check, agree=agree,
           reference=reference, small=small, bench=bench, dask=WholeFields(dtype="float32"))
def above_minimum(field: Any, *, gpu: Any = True, backend: str | None = None) -> np.ndarray:
    array = np.asarray(field, dtype=np.float32)
    if array.ndim < 2 or array.size == 0:
        raise ValueError(f"field must be a non-empty 2-D field or a stack, got shape {array.shape}")
    stack = np.ascontiguousarray(array.reshape(-1, *array.shape[-2:]))
    answer = dispatch("above_minimum", {"stack": stack}, gpu=gpu, backend=backend, expected=stack.shape)
    return answer.reshape(array.shape)
'''

BACKEND = '''
"""The toy backend: one module serving the toy family."""

import numpy as np

from spacr_accel_core import Declaration, hookimpl

SPACR_ACCEL_PLUGIN = Declaration(name="toyback", priority=150.0)


@hookimpl
def spacr_accel_above_minimum(stack: np.ndarray) -> np.ndarray:
    return stack - stack.min(axis=(1, 2), keepdims=True)
'''

SEES_IT = '''
import json

import numpy as np

import spacr_accel_core
import toy_backend
import toy_levels

spacr_accel_core.register(toy_backend, "toyback")
seen = {}

field = np.arange(12, dtype=np.float32).reshape(3, 4) + 5
seen["dispatch"] = [toy_levels.above_minimum(field).tolist(), spacr_accel_core.last_dispatch().backend]
try:
    toy_levels.above_minimum(field, backend="numpy")
except RuntimeError as error:
    seen["floor"] = type(error).__name__

from spacr_accel_core import accelerator
seen["doctor"] = [row for row in accelerator.capabilities() if "above_minimum" in row[0]]
seen["plugin"] = [row.operations for row in spacr_accel_core.plugins() if row.name == "toyback"]

from spacr_accel_core.commands import _bench
case = next(c for c in _bench.cases(quick=True) if c.operation == "above_minimum")
names = ["numpy", "toyback"]
report = _bench._one_case(case, names, 1, 1.0, _bench.Progress(None, 4), _bench._implemented(names))
seen["bench"] = [report["input"], [(r["backend"], r["status"], r["agrees"]) for r in report["results"]]]

import dask.array as da
from distributed import Client, LocalCluster
from spacr_accel_core import dask as accel_dask
stack = da.from_array(np.random.default_rng(0).random((4, 6, 5), dtype=np.float32), chunks=(1, 3, 5))
# a real cluster, its worker in this process (where the toy backend is registered), fields split
# across blocks so that each block is given whole fields
with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster, \
        Client(cluster) as client, accel_dask.tally(client) as served:
    on_dask = accel_dask.above_minimum(stack).compute()
seen["dask"] = bool(np.array_equal(on_dask, toy_levels.reference(stack.compute())))
rows = served.report.served
seen["dask_served"] = sorted({backend for _, operation, backend, _ in rows if operation == "above_minimum"})
print(json.dumps(seen))
'''

CONFORMANCE = '''
import spacr_accel_core
import toy_backend
import toy_levels  # noqa: F401  (the operation declared before the suite reads the table)

from spacr_accel_core.testing import BackendConformance

spacr_accel_core.register(toy_backend, "toyback")


class TestToyConformance(BackendConformance):
    backend = "toyback"
'''


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("toy")
    (folder / "toy_levels.py").write_text(textwrap.dedent(OPERATION))
    (folder / "toy_backend.py").write_text(textwrap.dedent(BACKEND))
    return folder


def _environment(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPACR_ACCEL")}
    env["PYTHONPATH"] = os.pathsep.join([str(folder), env.get("PYTHONPATH", "")])
    return env


def test_a_toy_operation_is_seen_by_dispatch_the_doctor_the_bench_and_dask(toy: Path) -> None:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(SEES_IT)], cwd=toy, env=_environment(toy),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["dispatch"] == [[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], "toyback"]
    assert seen["floor"] == "BackendUnavailable", seen  # the floor does not implement it: forced, it says so
    assert seen["doctor"] and seen["doctor"][0][0] == "Toy heights (above_minimum)", seen["doctor"]
    assert seen["plugin"] == [["above_minimum"]], seen["plugin"]
    label, rows = seen["bench"]
    assert label == "64x64 float32" and ["toyback", "ok", True] in rows, seen["bench"]
    assert seen["dask"] is True and seen["dask_served"] == ["toyback"], seen


def test_the_conformance_suite_runs_the_toy_operation_on_its_backend(toy: Path) -> None:
    (toy / "test_toy_conformance.py").write_text(textwrap.dedent(CONFORMANCE))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "small_case",
                           "test_toy_conformance.py"], cwd=toy, env=_environment(toy), capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout, done.stdout


def test_a_wrong_toy_backend_fails_the_conformance_suite(toy: Path) -> None:
    """The control: the suite's verdict on the toy is the reference's, not the backend's own."""
    wrong = toy / "wrong"
    wrong.mkdir()
    (wrong / "toy_levels.py").write_text(textwrap.dedent(OPERATION))
    (wrong / "toy_backend.py").write_text(textwrap.dedent(BACKEND).replace("stack - stack.min", "stack + stack.min"))
    (wrong / "test_toy_conformance.py").write_text(textwrap.dedent(CONFORMANCE))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "small_case",
                           "test_toy_conformance.py"], cwd=wrong, env=_environment(wrong), capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode != 0 and "1 failed" in done.stdout, done.stdout + done.stderr
