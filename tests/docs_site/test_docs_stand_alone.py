"""The documentation stands alone for a user of the repository, and every page is on the site.

The site itself (``sphinx-build -W`` and its doctests) is built by ``.ci/run``; these checks are
the cheap ones a plain ``python -m pytest`` can make without Sphinx.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the rest of the suite runs on 3.10 too

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FOLDERS = ["spacr_accel_core", "spacr_accel_numpy", "spacr_accel_torch", "spacr_accel_cupy"]
READMES = [ROOT / "README.md", *(ROOT / folder / "README.md" for folder in FOLDERS)]
PAGES = sorted(DOCS.glob("*.md"))

# Planning material a user of the repository does not have: the tracker's issue numbers, the
# project's private notes, the starting code it grew from ("the seed's"; a random seed is fine), and
# the machines it was measured on.
FORBIDDEN = re.compile(
    r"\.\./shared|DESIGN\.md|\bissues?\s+#?\d+|\blent\b|\bH[1-2]00\b|\bplanning\b"
    r"|\bseed['\u2019]s\b|\b(?:the|our|its|this|that)\s+seed\b(?!\s*[=:,)])|\bseeds?\s+`?0\d\d"
    r"|\bseed\s+(?:brute|cdist|max_pool\w*|code|path|order|version|implementation)\b",
    re.IGNORECASE,
)


def _tracked_outside_tests() -> list[Path]:
    """Every file git tracks outside ``tests/`` (whose fixtures may quote the words to ban them);
    without git (an unpacked archive), the pages and READMEs."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        return [*PAGES, *READMES]
    listed = subprocess.run([git, "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60)
    names = [name for name in listed.stdout.decode("utf-8").split("\0") if name and not name.startswith("tests/")]
    return [ROOT / name for name in names if (ROOT / name).is_file()]


def _text(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data:
        return None  # a binary file
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_the_banned_words_are_found() -> None:
    for text in ("Issue 2's numbers", "issue 4", "the lent H200", "the seed's order", "The seed padded",
                 "see ../shared/notes", "DESIGN.md", "seed brute force", "seed 042"):
        assert FORBIDDEN.search(text), text
    for text in ("rng = np.random.default_rng(seed)", "a fixed seed", ":param seed: the random seed",
                 "def cases(quick: bool, seed: int = 0)", "equivalent", "tissue 4", "Issues = 'https://...'"):
        assert not FORBIDDEN.search(text), text


@pytest.mark.parametrize("path", _tracked_outside_tests(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_tracked_file_cites_planning_material(path: Path) -> None:
    text = _text(path)
    if text is None:
        return
    found = [f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}" for m in FORBIDDEN.finditer(text)]
    assert not found, f"{path.relative_to(ROOT)} cites {found}"


def test_every_tracked_folder_is_searched() -> None:
    searched = {path.relative_to(ROOT).parts[0] for path in _tracked_outside_tests()}
    if (ROOT / ".git").exists() and shutil.which("git"):
        assert {"benchmarks", "scripts", "docs", "spacr_accel_core", "examples", "README.md"} <= searched


def test_the_quick_start_says_which_backends_the_sites_examples_block() -> None:
    conf = (DOCS / "conf.py").read_text(encoding="utf-8")
    blocked = re.search(r'os\.environ\["SPACR_ACCEL_DISABLE"\] = "([^"]+)"', conf)
    device = re.search(r'os\.environ\["SPACR_DEVICE"\] = "([^"]+)"', conf)
    assert blocked and device, "docs/conf.py no longer sets the doctests' environment"
    page = (DOCS / "quickstart.md").read_text(encoding="utf-8")
    assert f"SPACR_ACCEL_DISABLE={blocked.group(1)}" in page
    assert f"SPACR_DEVICE={device.group(1)}" in page
    for name in blocked.group(1).split(","):
        if name != "openvino":  # a prober: it serves no operation, so no example's answer changes
            assert f"'{name}'" in page, f"the quick start does not say what serves instead of {name}"


def test_the_api_page_documents_every_public_module() -> None:
    package = ROOT / "spacr_accel_core" / "src" / "spacr_accel_core"
    public = {f"spacr_accel_core.{p.stem}" for p in package.glob("*.py") if not p.stem.startswith("_")}
    # A folder of the core's parts (docs/contributing.md) holds private modules only; its
    # __init__ says what lives there and what it may import. Any other folder is a public package.
    parts = {p.parent.name for p in package.glob("*/__init__.py") if "May import:" in p.read_text(encoding="utf-8")}
    assert {"contract", "dispatch", "devices"} <= parts  # the control
    public |= {f"spacr_accel_core.{p.parent.name}" for p in package.glob("*/__init__.py")
               if not p.parent.name.startswith("_") and p.parent.name not in parts}
    documented = set(re.findall(r"\.\. automodule:: (\S+)", (DOCS / "api.md").read_text(encoding="utf-8")))
    assert "spacr_accel_core.dask" in public
    assert public <= documented, f"not on the API page: {sorted(public - documented)}"


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
