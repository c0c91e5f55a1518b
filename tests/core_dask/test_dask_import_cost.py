"""`spacr_accel_core.dask` is imported only when asked for: the core and its ops import no dask."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def modules_after(code: str) -> set[str]:
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPACR_")}
    done = subprocess.run([sys.executable, "-c", script], check=False, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_core_and_ops_import_no_dask():
    loaded = modules_after("import spacr_accel_core, spacr_accel_core.ops\nspacr_accel_core.ops.CHUNK")
    assert "spacr_accel_core.ops" in loaded  # the control
    assert not {"dask", "distributed", "spacr_accel_core.dask", "spacr_accel_core._dask"} & loaded
    assert not any(name.startswith(("dask.", "distributed.")) for name in loaded)


def test_the_dask_module_brings_dask_but_not_distributed():
    loaded = modules_after("import spacr_accel_core.dask")
    assert {"dask", "dask.array", "spacr_accel_core._dask"} <= loaded  # the control: it is dask's face
    # distributed is asked for only when a report is gathered from a cluster that already exists
    assert "distributed" not in loaded
