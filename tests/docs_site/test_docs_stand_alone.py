"""The documentation stands alone for a user of the repository, and every page is on the site.

The site itself (``sphinx-build -W`` and its doctests) is built by ``.ci/run``; these checks are
the cheap ones a plain ``python -m pytest`` can make without Sphinx.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the rest of the suite runs on 3.10 too

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FOLDERS = ["spacr_accel_core", "spacr_accel_numpy", "spacr_accel_torch", "spacr_accel_cupy"]
READMES = [ROOT / "README.md", *(ROOT / folder / "README.md" for folder in FOLDERS)]
PAGES = sorted(DOCS.glob("*.md"))

# Planning material a user of the repository does not have.
FORBIDDEN = re.compile(r"\.\./shared|DESIGN\.md|\bseeds?\s+0\d\d\b|\bseed\s+`?0\d\d|\bissue\s+#?\d+", re.IGNORECASE)


@pytest.mark.parametrize("path", [*PAGES, *READMES], ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_cites_planning_material(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert not FORBIDDEN.findall(text), f"{path.relative_to(ROOT)} cites {FORBIDDEN.findall(text)}"


def test_every_page_is_in_the_sites_table_of_contents() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^([a-z_]+)$", index, re.MULTILINE))
    pages = {page.stem for page in PAGES} - {"index"}
    assert pages <= listed, f"not on the site: {sorted(pages - listed)}"


def test_the_readmes_docs_paths_exist() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    paths = set(re.findall(r"`((?:docs|benchmarks|scripts)/[\w./-]+)`", text))
    assert {"docs/quickstart.md", "docs/concepts.md", "docs/migrating.md", "docs/cli.md", "docs/plugins.md"} <= paths
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"the README links paths that do not exist: {missing}"


@pytest.mark.parametrize("folder", [".", *FOLDERS])
def test_each_distribution_ships_its_mit_license(folder: str) -> None:
    base = ROOT / folder
    assert (base / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    project = tomllib.loads((base / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert project["authors"] and project["classifiers"] and "Homepage" in project["urls"]
