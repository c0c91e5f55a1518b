"""Installed distributions found through their metadata: an impostor floor, a plugin that exits.

Each distribution is a real ``*.dist-info`` folder (METADATA and entry_points.txt) with its module
beside it, on ``PYTHONPATH`` of a fresh interpreter: exactly what ``importlib.metadata`` reads for a
pip-installed wheel, without the minutes a build and an install take.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

IMPOSTOR = '''\
import numpy as np
from spacr_accel_core import Declaration, hookimpl

SPACR_ACCEL_PLUGIN = Declaration(name="numpy", priority=100.0, try_last=True)  # even claiming the floor's place


@hookimpl
def spacr_accel_matmul(first, second):
    return np.zeros((first.shape[0], second.shape[1]), np.float32)  # the wrong answer, confidently
'''

EXITER = '''\
import os

os._exit(17)  # what a crashing C extension's init does to the interpreter
'''


def distribution(site: Path, name: str, entry: str, module: str, source: str) -> None:
    """Write ``name`` as an installed distribution declaring ``entry = module`` in ``spacr_accel``."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[spacr_accel]\n{entry} = {module}\n")
    (site / f"{module}.py").write_text(source)


def run(code: str, site: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SPACR_ACCEL")}
    environment["PYTHONPATH"] = os.pathsep.join([str(site), environment.get("PYTHONPATH", "")])
    environment.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=environment, timeout=180, check=False)


def test_an_impostor_earlier_on_the_path_cannot_replace_the_floor(tmp_path: Path) -> None:
    distribution(tmp_path, "spacr-accel-impostor", "numpy", "impostor_floor", IMPOSTOR)
    done = run("""
        import json, sys
        import numpy as np
        import spacr_accel_core
        from spacr_accel_core import ops
        product = ops.matmul(np.ones((2, 2)), np.ones((2, 2)))
        rows = [(r.name, r.distribution, r.status, r.reason) for r in spacr_accel_core.plugins()
                if r.name == "numpy"]
        print(json.dumps({"product": product.tolist(), "served": spacr_accel_core.last_dispatch().backend,
                          "rows": rows, "imported": "impostor_floor" in sys.modules}))
        """, tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["product"] == [[2.0, 2.0], [2.0, 2.0]] and out["served"] == "numpy"
    (real, impostor) = out["rows"]
    assert real[:3] == ["numpy", "spacr-accel-numpy", "ok"]
    assert impostor[:3] == ["numpy", "spacr-accel-impostor", "duplicate"]
    assert "conflicts with" in impostor[3] and "spacr-accel-numpy" in impostor[3]
    assert out["imported"] is False
    assert "spacr-accel-impostor" in done.stderr  # the WARNING names the conflict


def test_a_plugin_that_ends_the_interpreter_at_import_is_named_first(tmp_path: Path) -> None:
    distribution(tmp_path, "spacr-accel-exiter", "aaa_exiter", "exiting_plugin", EXITER)
    done = run("""
        import numpy as np
        from spacr_accel_core.commands import _cli
        _cli.main(["doctor", "-vv"])
        """, tmp_path)
    assert done.returncode == 17  # the plugin did end the process: nothing can stop os._exit
    last = [line for line in done.stderr.splitlines() if line.strip()][-1]
    assert "importing spacr_accel plugin 'aaa_exiter'" in last and "spacr-accel-exiter" in last
    # ... and the name that log gives is the one that blocks it.
    blocked = run("""
        import numpy as np
        from spacr_accel_core import ops
        print(ops.matmul(np.ones((1, 1)), np.ones((1, 1))).tolist())
        """, tmp_path, SPACR_ACCEL_DISABLE="aaa_exiter")
    assert blocked.returncode == 0 and blocked.stdout.strip() == "[[1.0]]", blocked.stderr
