"""Whole processes: ``SPACR_DEVICE`` from the environment, and the whole package beside a torch
whose import raises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPORT = """
import json, sys
from spacr_accel_core import accelerator
found = accelerator.resolve()
print(json.dumps({"kind": found.kind, "device": found.device, "note": found.note,
                  "torch_imported": "torch" in sys.modules}))
"""


def run(code: str, *args: str, **env: str) -> dict[str, Any]:
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("SPACR_", "PYTORCH_ENABLE_MPS"))}
    environment.update(env)
    done = subprocess.run([sys.executable, "-c", code, *args], env=environment, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_spacr_device_cpu_needs_no_probe_at_all() -> None:
    found = run(REPORT, SPACR_DEVICE="cpu")
    assert (found["kind"], found["device"]) == ("cpu", "cpu")
    assert found["note"] == "forced by SPACR_DEVICE=cpu"
    assert found["torch_imported"] is False  # forcing the CPU never touches a driver


def test_an_invalid_spacr_device_is_the_cpu_with_a_note() -> None:
    found = run(REPORT, SPACR_DEVICE="gpu0")
    assert (found["kind"], found["device"]) == ("cpu", "cpu")
    assert found["note"].startswith("SPACR_DEVICE='gpu0' names no device spacr-accel can drive")


def test_spacr_device_naming_a_second_card() -> None:
    found = run(REPORT, SPACR_DEVICE="cuda:1")
    # On a machine with two CUDA cards this is the second; anywhere else the CPU, saying why.
    assert found["device"] == "cuda:1" or (found["kind"] == "cpu" and found["note"].startswith("SPACR_DEVICE=cuda:1"))


WHOLE_PACKAGE = """
import json, sys
import numpy as np
import spacr_accel_core, spacr_accel_core.ops as ops
from spacr_accel_core import accelerator
import spacr_accel_numpy, spacr_accel_torch, spacr_accel_cupy
from spacr_accel_torch import _nodes, _plugin
if "--as-if-a-device-node" in sys.argv:  # a machine whose GPU node makes the prober import torch
    _nodes._no_device_node = lambda: None
found = accelerator.resolve()
report = {
    "kind": found.kind, "note": found.note, "describe": accelerator.describe(),
    "rows": len(accelerator.capabilities()), "engines": list(accelerator.neural_engines()),
    "cellpose": repr(accelerator.cellpose_kwargs()), "empty": accelerator.empty_cache(),
    "gpu": accelerator.is_gpu(), "device": repr(accelerator.torch_device()),
    "matmul": ops.matmul(np.eye(2), np.ones((2, 2))).tolist(),
    "plugins": [p.name for p in spacr_accel_core.plugins()],
}
print(json.dumps(report))
"""


@pytest.mark.parametrize(("body", "words"), [
    ("raise OSError('libtorch_cuda.so: cannot open shared object file')",
     "OSError: libtorch_cuda.so: cannot open shared object file"),
    ("raise SystemExit(3)", "SystemExit: 3"),
    ("raise ImportError('numpy.core.multiarray failed to import')",
     "ImportError: numpy.core.multiarray failed to import"),
])
def test_the_whole_package_beside_a_torch_whose_import_raises(tmp_path: Path, body: str, words: str) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(body + "\n")
    report = run(WHOLE_PACKAGE, "--as-if-a-device-node",
                 PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    assert report["kind"] == "cpu" and report["gpu"] is False
    assert "PyTorch could not be imported" in report["note"] and words in report["note"]
    assert report["describe"].startswith("CPU (no accelerator found: PyTorch")
    assert report["cellpose"] == "{'gpu': False, 'device': 'cpu', 'use_bfloat16': False}"
    assert (report["empty"], report["device"]) == ("", "'cpu'")
    assert report["matmul"] == [[1.0, 1.0], [1.0, 1.0]]
    assert "numpy" in report["plugins"]
