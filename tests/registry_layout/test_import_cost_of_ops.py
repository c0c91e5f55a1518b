"""`import spacr_accel_core.ops` stays cheap: no torch, no cupy, no scipy.spatial (fresh interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = ("torch", "cupy", "cupyx", "scipy", "scipy.spatial", "scipy.ndimage")


def modules_after(code: str) -> set[str]:
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPACR_")}
    done = subprocess.run([sys.executable, "-c", script], check=False, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_import_ops_pulls_in_no_vendor_library():
    loaded = modules_after("import spacr_accel_core.ops")
    assert "spacr_accel_core.ops" in loaded and "numpy" in loaded  # the control
    for heavy in HEAVY:
        assert heavy not in loaded, heavy
    assert not any(name.startswith(("torch.", "cupy.", "cupyx.", "scipy.spatial.")) for name in loaded)


def test_import_core_pulls_in_no_vendor_library():
    loaded = modules_after("import spacr_accel_core")
    assert not {"torch", "cupy", "scipy"} & loaded


def test_import_every_core_module_pulls_in_no_vendor_library():
    loaded = modules_after("import spacr_accel_core.ops, spacr_accel_core.exact, spacr_accel_core.accelerator")
    assert {"spacr_accel_core.exact", "spacr_accel_core.accelerator"} <= loaded  # the control
    assert not {"torch", "cupy", "cupyx", "scipy"} & loaded


# ---- Dask: imported only when asked for ----------------------------------------------------


def test_core_and_ops_import_no_dask():
    loaded = modules_after("import spacr_accel_core, spacr_accel_core.ops\nspacr_accel_core.ops.CHUNK")
    assert "spacr_accel_core.ops" in loaded  # the control
    assert not {"dask", "distributed", "spacr_accel_core.dask", "spacr_accel_core.dask._blocks"} & loaded
    assert not any(name.startswith(("dask.", "distributed.")) for name in loaded)


def test_the_dask_module_brings_dask_but_not_distributed():
    loaded = modules_after("import spacr_accel_core.dask")
    assert {"dask", "dask.array", "spacr_accel_core.dask._blocks"} <= loaded  # the control: it is dask's face
    # distributed is asked for only when a report is gathered from a cluster that already exists
    assert "distributed" not in loaded
