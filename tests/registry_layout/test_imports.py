"""Who may import whom, read from the sources with ``ast`` (nothing is imported to check it).

- No import circle among the modules of any shipped distribution, counting imports inside
  functions too: a circle held together by a late import is still a circle.
- No import placed late at module level (after the module's first statement that is not an
  import, a docstring, ``__future__`` or ``TYPE_CHECKING`` block): the one way such an import
  earns its place is by breaking a circle, and there are none.
- Inside the core, the folders form layers (``docs/contributing.md``, "Who imports whom"): a
  folder imports only the layers below it, never a public face (the top-level modules).
- The backend author's door: a shipped backend or an example imports from the core only
  ``spacr_accel_core`` itself (the contract), :mod:`spacr_accel_core.toolkit`, and, in
  :mod:`spacr_accel_core.testing`, only from its tests; no backend imports another, and no core
  module names a backend.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHIPPED = ("spacr_accel_core", "spacr_accel_numpy", "spacr_accel_numba", "spacr_accel_torch", "spacr_accel_cupy")
EXAMPLES = tuple(sorted(p for p in (ROOT / "examples").glob("*/src/*") if p.is_dir()))

LAYERS = {"contract": 0, "kit": 1, "operations": 2, "dispatch": 3, "devices": 4, "": 5, "dask": 6, "patch": 6,
          "testing": 6, "commands": 7}
"""The core's folders, lowest first ("" is the top level: the public faces and the package itself;
``dask`` is a face whose graphs call ``ops``; ``patch`` puts spaCR on the faces, and the command runs
programs through it). A module may import its own folder and any folder of a lower number."""

DOOR = {"spacr_accel_core", "spacr_accel_core.toolkit"}


def _modules(source: pathlib.Path) -> dict[str, tuple[pathlib.Path, bool]]:
    """``{dotted name: (path, is a package)}`` for every module under a ``src`` folder's package."""
    found = {}
    for path in sorted(source.rglob("*.py")):
        parts = list(path.relative_to(source.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


MODULES: dict[str, tuple[pathlib.Path, bool]] = {}
for _name in SHIPPED:
    MODULES.update(_modules(ROOT / _name / "src" / _name))
for _example in EXAMPLES:
    MODULES.update(_modules(_example))


def _targets(module: str, package: bool, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The dotted names an import statement reaches (a ``from x import y`` reaches ``x.y`` when that
    is a module, else ``x``)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:
        parts = module.split(".") if package else module.split(".")[:-1]
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    for alias in node.names:
        yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base


def _known(target: str) -> str | None:
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def imports(module: str, *, local: bool = True) -> set[str]:
    """The modules of ours that ``module`` imports (inside functions too when ``local``)."""
    path, package = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = ast.walk(tree) if local else iter(tree.body)
    found = set()
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for target in _targets(module, package, node):
                known = _known(target)
                if known is not None and known != module:
                    found.add(known)
    return found


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_the_graph_reader_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_any_shipped_tree() -> None:
    graph = {module: imports(module) for module in MODULES}
    assert "spacr_accel_core.dispatch._registry" in graph["spacr_accel_core.ops"]  # the control
    assert _circles(graph) == []


def _late(path: pathlib.Path) -> list[str]:
    body = ast.parse(path.read_text(encoding="utf-8")).body
    seen_code, late = False, []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if seen_code:
                late.append(f"line {node.lineno}")
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            seen_code = True
    return late


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_is_placed_late(module: str) -> None:
    assert not _late(MODULES[module][0]), f"{module}: imports after code at {_late(MODULES[module][0])}"


PLACED = {"spacr_accel_core.__main__": "commands", "spacr_accel_core.reference": "kit", "spacr_accel_core.ops": ""}
"""Top-level modules and packages that belong to a folder's layer: ``python -m spacr_accel_core``
(the command's other entry point); ``reference``, a public package of the kit's layer (a
documented path whose family modules import only the contract and the kit) which the operation
table names; and ``ops``, a face (its family modules declare the operations, and the package
imports it so that every row is declared before anything reads the table). A package's modules
are placed with it."""


def _folder(module: str) -> str:
    for placed, folder in PLACED.items():
        if module == placed or module.startswith(f"{placed}."):
            return folder
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and MODULES[module][1]) else ""


def test_the_core_folders_import_only_the_layers_below() -> None:
    wrong = []
    for module in MODULES:
        if not module.startswith("spacr_accel_core"):
            continue
        here = _folder(module)
        assert here in LAYERS, f"{module}: folder {here!r} is not in the layer table"
        for target in imports(module):
            there = _folder(target) if target.startswith("spacr_accel_core") else None
            if there is not None and there != here and LAYERS[there] >= LAYERS[here]:
                wrong.append(f"{module} -> {target}")
    assert not wrong, wrong


def test_the_backends_use_only_the_door() -> None:
    wrong = []
    for module in MODULES:
        owner = module.split(".")[0]
        if owner == "spacr_accel_core":
            continue
        for target in imports(module):
            other = target.split(".")[0]
            if other == owner:
                continue
            if other == "spacr_accel_core" and target not in DOOR:
                wrong.append(f"{module} -> {target}")
            elif other != "spacr_accel_core":
                wrong.append(f"{module} -> {target} (another backend)")
    assert not wrong, wrong


def test_no_core_module_names_a_backend() -> None:
    backends = [name for name in SHIPPED if name != "spacr_accel_core"]
    named = [f"{module} -> {target}" for module in MODULES if module.startswith("spacr_accel_core")
             for target in imports(module) if target.split(".")[0] in backends]
    assert not named, named


def _strings(path: pathlib.Path) -> Iterator[str]:
    """Every string constant of a module that is not a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.value


def test_no_core_module_holds_a_backends_module_path() -> None:
    backends = [name for name in SHIPPED if name != "spacr_accel_core"]
    held = [f"{module}: {text!r}" for module, (path, _) in MODULES.items() if module.startswith("spacr_accel_core")
            for text in _strings(path) if any(name in text for name in backends)]
    assert not held, held
