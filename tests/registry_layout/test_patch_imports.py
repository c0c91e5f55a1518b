"""spaCR's patch holds seams and policy: it reaches the registry only through public names.

A module of ``spacr_accel_core.patch`` may import its own folder, the kit (the arithmetic it shares
with the backends: spaCR's surface, the pair search, NumPy's percentile) and the public faces
(``spacr_accel_core`` itself, ``ops``, ``config``, ``tiling``, ...), never a private part of the
registry: not ``dispatch``, ``operations``, ``contract``, ``devices`` or ``commands``, and no private
module of a face (``ops._levels``). Read from the sources with ``ast``, imports inside functions
included.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator

CORE = pathlib.Path(__file__).resolve().parents[2] / "spacr_accel_core" / "src" / "spacr_accel_core"
PATCH = CORE / "patch"

PRIVATE_FOLDERS = frozenset({"contract", "operations", "dispatch", "devices", "commands"})
"""The registry's parts behind the faces."""


def _imported(path: pathlib.Path) -> Iterator[tuple[int, str]]:
    """``(line, dotted target)`` for every import of a ``spacr_accel_core`` name in a patch module
    (``from x import y`` is read as ``x.y``, so a module imported by name is seen)."""
    package = ["spacr_accel_core", "patch"]  # every patch module's relative imports start here
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package[: len(package) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def _allowed(target: str) -> bool:
    parts = target.split(".")
    if parts[0] != "spacr_accel_core" or len(parts) == 1:
        return True
    if parts[1] in ("patch", "kit"):
        return True
    if parts[1] in PRIVATE_FOLDERS or parts[1].startswith("_"):
        return False
    # a face (``ops``, ``config``, ...) or a public name of the package; never a face's private module
    return not (len(parts) > 2 and parts[2].startswith("_") and (CORE / parts[1]).is_dir())


def test_the_reader_sees_a_private_import() -> None:
    assert not _allowed("spacr_accel_core.dispatch._registry.REGISTRY")
    assert not _allowed("spacr_accel_core._ops_levels.percentile_q")
    assert not _allowed("spacr_accel_core.ops._levels.percentile_q")
    assert not _allowed("spacr_accel_core.contract._errors.NoBackendError")
    assert _allowed("spacr_accel_core.ops") and _allowed("spacr_accel_core.NoBackendError")
    assert _allowed("spacr_accel_core.kit._surface.spacr_surface") and _allowed("spacr_accel_core.config")


def test_the_patch_reaches_the_registry_only_through_public_names() -> None:
    files = sorted(PATCH.glob("*.py"))
    assert len(files) > 10
    wrong = [f"patch/{path.name}:{line} imports {target}" for path in files
             for line, target in _imported(path) if not _allowed(target)]
    assert not wrong, wrong
