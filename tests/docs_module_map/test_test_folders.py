"""The test folders follow one naming rule, and the "Tests" section of ``docs/contributing.md`` lists
every one of them.

WHY. A contributor changing one operation opens one folder, its family's, and finds there every
test of that family whatever part it exercises (the core's checks, its reference, each backend's
paths, its Dask form, the spaCR seams that serve it); a contributor changing a part that is no
family's (dispatch, a backend's device, the patch's install) finds it by the part's name. Folders
named by the order their tests were written send both searching, so the rule is held here, and the
list on the page is held to the folders on disk.

THE RULE. A folder is ``<part>_<topic>``. ``family_<family>`` names a module of ``ops/`` (one folder
per family, each family with one); ``backend_<name>`` or ``backend_<name>_<topic>`` names a backend
distribution; every other part is one of :data:`PARTS`.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
MAP = ROOT / "docs" / "contributing.md"
OPS = ROOT / "spacr_accel_core" / "src" / "spacr_accel_core" / "ops"
BACKENDS = ("numpy", "numba", "torch", "cupy")
PARTS = ("registry", "kit", "dask", "accelerator", "numba_cache", "patch", "cli", "docs", "examples", "e2e")
"""The parts that are no family and no backend: the registry, the backend author's kit, the Dask
layer's blocks, the accelerator, numba's compile and cache, the patch's mechanics, the command
line, the documentation, the example plugins, and installs from end to end."""
_TOPIC = r"[a-z0-9]+(?:_[a-z0-9]+)*"


def families() -> set[str]:
    """The operation families: the modules of ``ops/`` (``_filters.py`` is ``filters``)."""
    return {path.stem[1:] for path in OPS.glob("_*.py") if path.stem != "__init__"}


def follows_the_rule(name: str) -> bool:
    """Whether a folder's name is ``<part>_<topic>`` as the module docstring says."""
    if name.startswith("family_"):
        return name.removeprefix("family_") in families()
    if name.startswith("backend_"):
        return any(re.fullmatch(rf"{backend}(?:_{_TOPIC})?", name.removeprefix("backend_")) for backend in BACKENDS)
    return any(re.fullmatch(rf"{part}_{_TOPIC}", name) for part in PARTS)


def folders() -> set[str]:
    """The folders of ``tests/`` that hold Python files (a folder left with only caches is none)."""
    return {path.name for path in TESTS.iterdir()
            if path.is_dir() and path.name != "__pycache__" and any(path.glob("*.py"))}


def listed(text: str) -> list[str]:
    """The folders the page's "Tests" section lists, one ``- `tests/<folder>/`: ...`` line each."""
    section = text.split("\n## Tests\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^- `tests/(\w+)/`", section, flags=re.M)


def test_the_rule_is_read_as_written() -> None:
    assert {"filters", "registration", "landmarks"} <= families()  # the control: the families are found
    for good in ("family_filters", "registry_dispatch", "backend_torch", "backend_torch_prober",
                 "numba_cache_trust", "patch_edges_accel", "e2e_third_party"):
        assert follows_the_rule(good), good
    for bad in ("family_spline", "family_", "core_filters", "numba_backend", "backend_jax", "backend_numpyish",
                "spacr_patch_levels", "planes_ops", "registry", "patch_Edges"):
        assert not follows_the_rule(bad), bad


def test_every_folder_follows_the_rule() -> None:
    wrong = sorted(name for name in folders() if not follows_the_rule(name))
    assert not wrong, f"test folders outside the rule of docs/contributing.md's Tests section: {wrong}"


def test_each_family_has_one_folder() -> None:
    missing = sorted(f"family_{family}" for family in families() if f"family_{family}" not in folders())
    assert not missing, f"families without their test folder: {missing}"


def test_the_list_names_every_folder_and_no_other() -> None:
    names = listed(MAP.read_text(encoding="utf-8"))
    assert len(names) == len(set(names)), "docs/contributing.md's Tests section lists a folder twice"
    assert set(names) - folders() == set(), f"listed but not in tests/: {sorted(set(names) - folders())}"
    assert folders() - set(names) == set(), f"in tests/ but not listed: {sorted(folders() - set(names))}"


def test_every_test_module_sits_in_a_folder_of_tests() -> None:
    """One level, no packages: the suite imports by path (``--import-mode=importlib``), so a module's
    folder is its only address, and a folder name used twice would be two folders a reader confuses."""
    nested = sorted(str(path.relative_to(TESTS)) for path in TESTS.rglob("*.py")
                    if "__pycache__" not in path.parts and len(path.relative_to(TESTS).parts) > 2)
    assert not nested, f"test modules below a folder of tests/: {nested}"
    assert not list(TESTS.rglob("__init__.py")), "tests/ holds packages; the suite imports by path"
