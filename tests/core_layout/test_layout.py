"""Every shipped distribution stays readable: every module at most 600 lines, every function at most
60 (compiled kernels, decorated ``numba.njit``, are exempt: a loop nest stays whole so LLVM sees it
entire), and no shipped distribution imports another's private module (a backend author needs only
public names, ours included)."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DISTRIBUTIONS = ("spacr_accel_core", "spacr_accel_numpy", "spacr_accel_numba", "spacr_accel_torch",
                 "spacr_accel_cupy")
MODULES = sorted([*(path for name in DISTRIBUTIONS for path in (ROOT / name / "src" / name).rglob("*.py")),
                  *(ROOT / "examples").glob("*/src/*/*.py")])


def _id(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT))


def _compiled(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any("njit" in ast.unparse(decorator) for decorator in node.decorator_list)


@pytest.mark.parametrize("module", MODULES, ids=_id)
def test_modules_are_at_most_600_lines(module):
    lines = module.read_text(encoding="utf-8").count("\n")
    assert lines <= 600, f"{module.name} has {lines} lines"


@pytest.mark.parametrize("module", MODULES, ids=_id)
def test_functions_are_at_most_60_lines(module):
    tree = ast.parse(module.read_text(encoding="utf-8"))
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)" for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _compiled(node)
            and node.end_lineno is not None and node.end_lineno - node.lineno + 1 > 60]
    assert not long, f"{module.name}: {', '.join(long)}"


def test_the_size_check_reads_every_distribution():
    assert {path.relative_to(ROOT).parts[0] for path in MODULES} == {*DISTRIBUTIONS, "examples"}
PRIVATE_IMPORT = re.compile(r"^\s*(?:from|import)\s+(spacr_accel_\w+)\.(_\w+)", re.MULTILINE)


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_no_distribution_imports_anothers_private_module(distribution):
    sources = (ROOT / distribution / "src" / distribution).rglob("*.py")
    found = [f"{path.name}: {owner}.{module}" for path in sources
             for owner, module in PRIVATE_IMPORT.findall(path.read_text(encoding="utf-8"))
             if owner != distribution]
    assert not found, found


FAMILIES = {
    "_ops_levels": ("percentiles", "clip_to_percentiles", "normalise_to_percentile", "rescale_fields"),
    "_ops_planes": ("spot_score", "translate"),
    "_ops_points": ("attribute_reads", "count_within"),
}


def test_ops_is_a_face_under_600_lines_and_each_family_lives_in_its_own_module():
    from spacr_accel_core import ops

    lines = (ROOT / "spacr_accel_core" / "src" / "spacr_accel_core" / "ops.py").read_text(
        encoding="utf-8").count("\n")
    assert lines < 600, f"ops.py has {lines} lines"
    placed = {name: getattr(ops, name).__module__ for names in FAMILIES.values() for name in names}
    assert placed == {name: f"spacr_accel_core.{family}" for family, names in FAMILIES.items()
                      for name in names}
    assert set(placed) <= set(ops.__all__)
