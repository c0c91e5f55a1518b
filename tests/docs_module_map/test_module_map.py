"""The module map (``docs/contributing.md``) and the folders' own docstrings name every module, and the
README every benchmark.

WHY. A contributor opens the module named in the map first; a module the map does not name is one
they find only by searching, and a folder's ``__init__`` that lists three of its five modules says
the other two do not exist. Both drifted as modules were added, so the map is read here as a
contributor reads it and held to the files on disk.

HOW THE MAP IS READ. Each table row's first cell names modules in backticks. A name with a folder
(``patch/_served.py``, ``spacr_accel_numba/_warm.py``) sets where the bare names after it in the same
cell live (``_report.py`` beside ``patch/_surface.py``); a bare name first in its cell is a top-level
module of the core; ``src/...`` is the core distribution's source folder.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE_SRC = ROOT / "spacr_accel_core" / "src"
CORE = CORE_SRC / "spacr_accel_core"
BACKENDS = ("spacr_accel_numpy", "spacr_accel_numba", "spacr_accel_torch", "spacr_accel_cupy")
MAP = ROOT / "docs" / "contributing.md"


def named_in_map(text: str) -> set[Path]:
    """Every module a table row's first cell names, resolved to its path on disk.

    :param text: the page's text (markdown tables among prose).
    :returns: the resolved paths, whether or not they exist.
    """
    named: set[Path] = set()
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        cell = line.split("|")[1]
        folder = CORE
        for token in re.findall(r"`([^`]+)`", cell):
            if token.startswith("examples/"):
                break
            head, _, name = token.rpartition("/")
            if head:
                first = head.split("/")[0]
                if first in BACKENDS:
                    folder = ROOT / first / "src" / first
                elif first == "src":
                    folder = CORE_SRC
                else:
                    folder = CORE / head
            named.add(folder / name)
    return named


def shipped_modules() -> list[Path]:
    """Every Python module of the core and the four backends, and the core's start-up hook: those git
    tracks where there is a git checkout (a module still being written is judged when it is added),
    every one on disk otherwise (an unpacked archive)."""
    trees = [CORE, *(ROOT / name / "src" / name for name in BACKENDS)]
    found = [path for tree in trees for path in tree.rglob("*.py") if "__pycache__" not in path.parts]
    found = sorted([*found, *CORE_SRC.glob("*.py")])
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        return found
    listed = subprocess.run([git, "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60)
    tracked = {ROOT / name for name in listed.stdout.decode("utf-8").split("\0") if name}
    return [path for path in found if path in tracked]


def test_the_reading_resolves_folders_and_bare_names() -> None:
    text = ("| `patch/_surface.py`, `_report.py` | x |\n| `_ops_levels.py` | y |\n"
            "| `spacr_accel_numba/_levels.py`, `_levels_kernels.py` | z |\n| `src/_spacr_accel_hook.py` | w |\n"
            "| `examples/x/.../_plugin.py` | v |\nprose naming `kit/_peaks.py`\n")
    numba = ROOT / "spacr_accel_numba" / "src" / "spacr_accel_numba"
    assert named_in_map(text) == {CORE / "patch" / "_surface.py", CORE / "patch" / "_report.py",
                                  CORE / "_ops_levels.py", numba / "_levels.py", numba / "_levels_kernels.py",
                                  CORE_SRC / "_spacr_accel_hook.py"}


def test_the_shipped_modules_are_found() -> None:
    found = shipped_modules()
    assert CORE / "patch" / "_served.py" in found and CORE_SRC / "_spacr_accel_hook.py" in found
    assert ROOT / "spacr_accel_numba" / "src" / "spacr_accel_numba" / "_warm.py" in found


def test_the_map_names_every_shipped_module() -> None:
    named = named_in_map(MAP.read_text(encoding="utf-8"))
    missing = [str(path.relative_to(ROOT)) for path in shipped_modules() if path not in named]
    assert not missing, f"docs/contributing.md's module map does not name: {missing}"


def test_the_map_names_no_module_that_is_gone() -> None:
    named = named_in_map(MAP.read_text(encoding="utf-8"))
    gone = sorted(str(path.relative_to(ROOT)) for path in named if path.suffix == ".py" and not path.exists())
    assert not gone, f"docs/contributing.md's module map names modules that do not exist: {gone}"


def _parts_folders() -> list[Path]:
    """The core's folders of parts: those whose ``__init__`` says what they may import."""
    inits = CORE.glob("*/__init__.py")
    return sorted(path.parent for path in inits if "May import:" in path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("folder", _parts_folders(), ids=lambda path: path.name)
def test_each_folder_docstring_lists_its_modules(folder: Path) -> None:
    docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))) or ""
    listed = set(re.findall(r"``(_\w+)``", docstring))
    modules = {path.stem for path in folder.glob("_*.py") if path.stem != "__init__"}
    assert modules - listed == set(), f"{folder.name}/__init__.py does not list {sorted(modules - listed)}"


def test_the_folders_of_parts_are_found() -> None:
    assert {"contract", "kit", "operations", "dispatch", "devices", "commands"} <= {p.name for p in _parts_folders()}


def test_the_readme_names_every_benchmark() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(benchmarks/\w+\.py)`", readme))
    scripts = {f"benchmarks/{path.name}" for path in (ROOT / "benchmarks").glob("*.py")}
    assert "benchmarks/bench_numpy.py" in named  # the control: the reading finds the list
    assert scripts - named == set(), f"README.md's benchmark list does not name {sorted(scripts - named)}"
