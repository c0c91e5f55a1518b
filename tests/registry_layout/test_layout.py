"""No shipped distribution imports another's private module: a backend author needs only public
names, ours included. (No module or function size is held to a number: a module splits where an
idea ends, never to meet a count.)"""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DISTRIBUTIONS = ("spacr_accel_core", "spacr_accel_numpy", "spacr_accel_numba", "spacr_accel_torch",
                 "spacr_accel_cupy")
MODULES = sorted([*(path for name in DISTRIBUTIONS for path in (ROOT / name / "src" / name).rglob("*.py")),
                  *(ROOT / "examples").glob("*/src/*/*.py")])


def test_the_import_check_reads_every_distribution():
    assert {path.relative_to(ROOT).parts[0] for path in MODULES} == {*DISTRIBUTIONS, "examples"}


PRIVATE_IMPORT = re.compile(r"^\s*(?:from|import)\s+(spacr_accel_\w+)\.(_\w+)", re.MULTILINE)


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_no_distribution_imports_anothers_private_module(distribution):
    sources = (ROOT / distribution / "src" / distribution).rglob("*.py")
    found = [f"{path.name}: {owner}.{module}" for path in sources
             for owner, module in PRIVATE_IMPORT.findall(path.read_text(encoding="utf-8"))
             if owner != distribution]
    assert not found, found
