"""End to end: REAL throwaway third-party distributions, built and installed with pip, then discovered
through the ``spacr_accel`` entry-point group in a fresh interpreter.

- ``spacr-accel-thirdparty-demo`` (setuptools): a backend of priority 1000 serving matmul.
- ``spacr-accel-broken-demo`` (hatchling): its module raises at import.
- ``spacr-accel-impostor-demo`` (setuptools): claims the entry-point name ``thirdparty`` for another module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

THIRDPARTY_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "spacr-accel-thirdparty-demo"
version = "0.4.2"
requires-python = ">=3.10"

[project.entry-points.spacr_accel]
thirdparty = "thirdparty_accel"

[tool.setuptools]
py-modules = ["thirdparty_accel"]
"""

THIRDPARTY_MODULE = '''\
"""A third party's spacr_accel backend: only matmul, ranked above everything shipped."""
import numpy as np

from spacr_accel_core import BackendInfo, Declaration, hookimpl

SPACR_ACCEL_PLUGIN = Declaration(name="thirdparty", priority=1000.0, accelerated=False)
CALLS = []


@hookimpl
def spacr_accel_backend_info():
    return BackendInfo(usable=True, note="demo")


@hookimpl
def spacr_accel_matmul(first, second):
    CALLS.append((first.shape, second.shape))
    product = np.matmul(first.astype(np.float64), second.astype(np.float64))
    return np.asarray(product, dtype=np.float32)
'''

BROKEN_PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "spacr-accel-broken-demo"
version = "1.0.0"

[project.entry-points.spacr_accel]
broken = "broken_accel"

[tool.hatch.build.targets.wheel]
only-include = ["broken_accel.py"]
"""

BROKEN_MODULE = '''\
raise ImportError("libdemo.so.3: cannot open shared object file")
'''

IMPOSTOR_MODULE = '''\
raise AssertionError("the impostor must never be imported: the first entry point wins")
'''


def _write(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Build and install each distribution with pip, in parallel; one ``--target`` folder each."""
    tmp = tmp_path_factory.mktemp("third_party")
    thirdparty = _write(tmp / "src_thirdparty", {"pyproject.toml": THIRDPARTY_PYPROJECT,
                                                 "thirdparty_accel.py": THIRDPARTY_MODULE})
    broken = _write(tmp / "src_broken", {"pyproject.toml": BROKEN_PYPROJECT, "broken_accel.py": BROKEN_MODULE})
    impostor = _write(tmp / "src_impostor", {
        "pyproject.toml": THIRDPARTY_PYPROJECT.replace("thirdparty-demo", "impostor-demo")
        .replace('thirdparty = "thirdparty_accel"', 'thirdparty = "impostor_accel"')
        .replace('["thirdparty_accel"]', '["impostor_accel"]'),
        "impostor_accel.py": IMPOSTOR_MODULE,
    })
    # The same distribution twice (two path entries), the broken one, and the impostor.
    jobs = {"one": thirdparty, "two": thirdparty, "broken": broken, "impostor": impostor}
    sites = {key: tmp / f"site_{key}" for key in jobs}
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INDEX": "1"}
    running = {}
    for key, source in jobs.items():
        if key == "two":
            continue  # built from the same folder as "one": install it after, not concurrently
        running[key] = subprocess.Popen(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
             "--target", str(sites[key]), str(source)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
    for key, process in running.items():
        output, _ = process.communicate(timeout=180)
        assert process.returncode == 0, f"pip install {key} failed:\n{output}"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(sites["two"]), str(thirdparty)],
        check=False, env=env, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for key in jobs:
        assert list(sites[key].glob("*.dist-info")), f"nothing installed in {sites[key]}"
    return sites


def run_python(script: str, path: list[Path], **env_extra: str) -> tuple[dict, str]:
    """Run ``script`` in a fresh interpreter with ``path`` on PYTHONPATH; it prints one JSON line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPACR_ACCEL")}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in path)
    env.update(env_extra)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, check=False,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


PREAMBLE = """
    import json, sys
    import numpy as np
    import spacr_accel_core
    from spacr_accel_core import ops

    FIRST = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    SECOND = np.arange(8, dtype=np.float32).reshape(4, 2) / 2
    WANT = (FIRST.astype(np.float64) @ SECOND.astype(np.float64)).astype(np.float32)
    out = {}

    def row(name):
        found = [p for p in spacr_accel_core.plugins() if p.name == name]
        return [[p.distribution, p.version, p.status, p.reason, p.priority, list(p.operations)] for p in found]
"""


def test_discovered_ranked_first_and_serving(sites):
    out, stderr = run_python(PREAMBLE + """
    out["thirdparty"] = row("thirdparty")
    out["first_row"] = spacr_accel_core.plugins()[0].name
    out["backends"] = list(ops.accelerated_backends())
    product = ops.matmul(FIRST, SECOND)
    out["product_ok"] = bool(np.array_equal(product, WANT)) and product.dtype == np.float32
    out["served"] = spacr_accel_core.last_dispatch().backend
    import thirdparty_accel
    out["calls"] = len(thirdparty_accel.CALLS)
    out["module_file"] = thirdparty_accel.__file__
    field = np.arange(20, dtype=np.float32).reshape(4, 5)
    out["filter_ok"] = bool(ops.maximum_filter(field, 3)[0, 0] == 6.0)
    out["filter_served"] = spacr_accel_core.last_dispatch().backend
    out["broken"] = row("broken")
    print(json.dumps(out))
    """, [sites["one"], sites["broken"]])
    assert out["thirdparty"] == [["spacr-accel-thirdparty-demo", "0.4.2", "ok", "", 1000.0, ["matmul"]]]
    assert out["first_row"] == "thirdparty"
    assert out["backends"][0] == "thirdparty" and out["backends"][-1] == "numpy"
    assert out["product_ok"] is True
    assert out["served"] == "thirdparty"
    assert out["calls"] == 1
    assert out["module_file"].startswith(str(sites["one"]))
    # It does not implement the filter: the next backend serves it, and right.
    assert out["filter_ok"] is True
    assert out["filter_served"] not in ("thirdparty", "broken", "core")
    # The broken distribution is reported, with its name and version, and breaks nothing.
    [[dist, version, status, reason, _, operations]] = out["broken"]
    assert (dist, version, status, operations) == ("spacr-accel-broken-demo", "1.0.0", "faulty", [])
    assert "import failed" in reason and "libdemo.so.3" in reason and "ImportError" in reason
    assert "'broken' failed to import" in stderr  # logged at WARNING, once
    assert stderr.count("'broken' failed to import") == 1


def test_same_distribution_twice_is_deduplicated(sites):
    out, stderr = run_python(PREAMBLE + """
    out["before"] = row("thirdparty")
    # Installed "later" in a second path entry: refresh() discovers again.
    sys.path.append(SITE_TWO)
    spacr_accel_core.refresh()
    out["after"] = row("thirdparty")
    out["statuses"] = sorted({p.status for p in spacr_accel_core.plugins()})
    product = ops.matmul(FIRST, SECOND)
    out["product_ok"] = bool(np.array_equal(product, WANT))
    out["served"] = spacr_accel_core.last_dispatch().backend
    print(json.dumps(out))
    """.replace("SITE_TWO", repr(str(sites["two"]))), [sites["one"]])
    expected = [["spacr-accel-thirdparty-demo", "0.4.2", "ok", "", 1000.0, ["matmul"]]]
    assert out["before"] == expected
    assert out["after"] == expected  # one row, not two, and not a "duplicate"
    assert "duplicate" not in out["statuses"] and "faulty" not in out["statuses"]
    assert out["product_ok"] is True and out["served"] == "thirdparty"
    assert "conflicts" not in stderr

    # Both path entries there from the start, in either order.
    for path in ([sites["one"], sites["two"]], [sites["two"], sites["one"]]):
        out, stderr = run_python(PREAMBLE + """
    out["rows"] = row("thirdparty")
    import thirdparty_accel
    out["module_file"] = thirdparty_accel.__file__
    print(json.dumps(out))
        """, path)
        assert out["rows"] == expected
        assert out["module_file"].startswith(str(path[0]))
        assert "conflicts" not in stderr


def test_conflicting_entry_point_name_first_wins(sites):
    out, stderr = run_python(PREAMBLE + """
    out["rows"] = row("thirdparty")
    product = ops.matmul(FIRST, SECOND)
    out["product_ok"] = bool(np.array_equal(product, WANT))
    out["served"] = spacr_accel_core.last_dispatch().backend
    out["impostor_imported"] = "impostor_accel" in sys.modules
    print(json.dumps(out))
    """, [sites["one"], sites["impostor"]])
    winner, loser = out["rows"]
    assert winner == ["spacr-accel-thirdparty-demo", "0.4.2", "ok", "", 1000.0, ["matmul"]]
    # The loser is listed (the doctor shows it) as a duplicate, never imported or ranked.
    assert loser[0] == "spacr-accel-impostor-demo" and loser[2] == "duplicate" and loser[5] == []
    assert "conflicts with" in loser[3]
    assert out["product_ok"] is True and out["served"] == "thirdparty"
    assert out["impostor_imported"] is False
    assert "conflicts" in stderr and "spacr-accel-impostor-demo" in stderr


def test_disabled_third_party_is_blocked_and_never_imported(sites):
    out, _ = run_python(PREAMBLE + """
    out["thirdparty"] = row("thirdparty")
    out["broken"] = row("broken")
    out["backends"] = list(ops.accelerated_backends())
    product = ops.matmul(FIRST, SECOND)
    out["product_ok"] = bool(np.array_equal(product, WANT))
    out["served"] = spacr_accel_core.last_dispatch().backend
    out["imported"] = sorted(m for m in ("thirdparty_accel", "broken_accel") if m in sys.modules)
    print(json.dumps(out))
    """, [sites["one"], sites["two"], sites["broken"]], SPACR_ACCEL_DISABLE="thirdparty,broken")
    assert out["thirdparty"] == [["spacr-accel-thirdparty-demo", "0.4.2", "blocked",
                                  "named in SPACR_ACCEL_DISABLE", 0.0, []]]
    assert out["broken"] == [["spacr-accel-broken-demo", "1.0.0", "blocked", "named in SPACR_ACCEL_DISABLE", 0.0, []]]
    assert "thirdparty" not in out["backends"] and out["backends"][-1] == "numpy"
    assert out["product_ok"] is True
    assert out["served"] not in ("thirdparty", "core")
    assert out["imported"] == []
