"""The plain install from a clone: the README's command, the script it names, and CI running it.

The install itself (a fresh virtual environment, wheels built from the folders, the doctor and one
call of each operation) is what ``.ci/plain-install`` does in CI; here the script's pip command is
checked without running pip, by pointing ``PYTHON`` at a stand-in that records its arguments.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "install-from-clone"
CHECK = ROOT / ".ci" / "plain-install"


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, re.DOTALL)


def _calls(tmp_path: Path, *extras: str) -> list[list[str]]:
    """Each call the script makes of ``python``: the folder it ran in, then its arguments, recorded
    by a stand-in interpreter."""
    record = tmp_path / "calls"
    stand_in = tmp_path / "python"
    stand_in.write_text(f'#!/bin/sh\n{{ pwd; for a in "$@"; do echo "$a"; done; echo ---; }} >> {record}\n',
                        encoding="utf-8")
    stand_in.chmod(0o755)
    subprocess.run(["bash", str(SCRIPT), *extras], check=True, timeout=60,
                   env={**os.environ, "PYTHON": str(stand_in)})
    text = record.read_text(encoding="utf-8")
    return [call.strip("\n").splitlines() for call in text.split("---\n") if call.strip()]


def _pip_arguments(tmp_path: Path, *extras: str) -> list[str]:
    """The arguments of the script's pip command (its first call)."""
    return _calls(tmp_path, *extras)[0][1:]


def _distribution(folder: str) -> str:
    name: str = tomllib.loads((ROOT / folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"]
    return name


def test_the_readme_gives_the_plain_install_and_keeps_the_development_one() -> None:
    blocks = _bash_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert any(line.strip() == "scripts/install-from-clone && spacr-accel doctor"
               for block in blocks for line in block.splitlines())
    assert any(line.strip() == "pip install -r requirements-dev.txt && spacr-accel doctor"
               for block in blocks for line in block.splitlines())
    assert any(line.strip() == "python -m pytest" for block in blocks for line in block.splitlines())


def test_the_script_is_executable_and_installs_the_family_from_its_folders(tmp_path: Path) -> None:
    assert SCRIPT.stat().st_mode & stat.S_IXUSR
    arguments = _pip_arguments(tmp_path)
    assert arguments[:3] == ["-m", "pip", "install"]
    folders = arguments[3:]
    assert "-e" not in folders and "--editable" not in folders  # a plain install, as a user has it
    assert folders[-1] == "."  # the meta-distribution, after every sibling it needs
    installed = {_distribution(folder) for folder in folders}
    assert installed == {"spacr-accel", "spacr-accel-core", "spacr-accel-numpy", "spacr-accel-numba"}
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    needed = {re.split(r"[<>=\[ ;]", requirement)[0] for requirement in meta["dependencies"]}
    assert needed <= installed, "pip would have to find a sibling on an index"


def test_the_script_then_compiles_the_kernels_from_outside_the_clone(tmp_path: Path) -> None:
    """``spacr-accel warm`` after pip, so that a fresh install's first process computes on numba's
    compiled kernels; run from ``/`` so that the installed package, not the clone's folder, is cached."""
    calls = _calls(tmp_path)
    assert len(calls) == 2
    assert calls[1] == ["/", "-m", "spacr_accel_core", "warm"]


def test_no_warm_installs_only(tmp_path: Path) -> None:
    calls = _calls(tmp_path, "--no-warm", "torch")
    assert len(calls) == 1 and calls[0][1:4] == ["-m", "pip", "install"]
    assert "./spacr_accel_torch" in calls[0]


def test_a_kernel_that_cannot_compile_is_no_failed_install(tmp_path: Path) -> None:
    stand_in = tmp_path / "python"
    stand_in.write_text('#!/bin/sh\n[ "$3" = warm ] && exit 1\nexit 0\n', encoding="utf-8")
    stand_in.chmod(0o755)
    done = subprocess.run(["bash", str(SCRIPT)], check=False, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHON": str(stand_in)})
    assert done.returncode == 0 and "each compiles on first use" in done.stderr


def test_a_relative_interpreter_is_the_callers(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    stand_in = tmp_path / "bin" / "python"
    record = tmp_path / "ran"
    stand_in.write_text(f'#!/bin/sh\necho "$0" >> {record}\n', encoding="utf-8")
    stand_in.chmod(0o755)
    subprocess.run(["bash", str(SCRIPT)], check=True, timeout=60, cwd=tmp_path,
                   env={**os.environ, "PYTHON": "bin/python"})
    assert record.read_text(encoding="utf-8").splitlines() == [str(stand_in)] * 2


def test_the_extras_add_their_folders(tmp_path: Path) -> None:
    folders = _pip_arguments(tmp_path, "torch", "cupy", "dask")[3:]
    assert {"./spacr_accel_torch", "./spacr_accel_cupy", "./spacr_accel_core[dask]"} <= set(folders)
    assert "./spacr_accel_core" not in folders


def test_an_unknown_extra_is_refused_before_pip_runs(tmp_path: Path) -> None:
    done = subprocess.run(["bash", str(SCRIPT), "gpu"], check=False, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHON": str(tmp_path / "no-such-python")})
    assert done.returncode == 2
    assert "unknown extra 'gpu'" in done.stderr and "torch, cupy, dask" in done.stderr


def test_ci_runs_the_plain_install_in_a_fresh_environment_then_the_doctor_and_the_operations() -> None:
    assert "bash .ci/plain-install" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    check = CHECK.read_text(encoding="utf-8")
    assert "python3 -m venv" in check and "scripts/install-from-clone" in check
    assert '/bin/spacr-accel" doctor' in check  # the fresh environment's own command
    for operation in ("maximum_filter", "matmul", "nearest_neighbours"):
        assert f"ops.{operation}(" in check
    subprocess.run(["bash", "-n", str(CHECK)], check=True, timeout=60)  # it parses
