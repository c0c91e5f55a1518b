"""``SPACR_ACCEL_PATCH`` at interpreter start, at no cost: the import hook the installed ``.pth`` line
registers, in the standard library alone.

WHY A HOOK. The variable must reach every process, spaCR's spawned decode workers included (each
imports spaCR afresh and never sees a patch made in its parent), so it is read at every start. But
installing the patch there made every process with the variable set import NumPy and the core
(0.3 s for ``python -c pass``), and broke spaCR's own promise that ``spacr.ops_layout`` imports
without NumPy. So the start does no more than this module: it reads the variable (an unknown word
is warned about there), and puts a finder first in ``sys.meta_path`` that waits for the first
import of a module the patch changes (spaCR's modules with seams, :data:`SPACR_MODULES`) or of the
patch itself; it then installs the patch and takes itself out of ``sys.meta_path``. A process that
imports neither pays for this module and a list lookup per import.

HANDING OVER. The patch patches spaCR's modules as they load, through a finder of its own. For a
spaCR module the hook wraps the loader and installs the patch in ``create_module``: after
``find_spec`` (which Python runs under its global import lock, where importing NumPy could deadlock
another thread) and before the module exists. It then finds the module again through
``sys.meta_path``, where the patch's finder now stands, and the patch's loader creates, executes
and patches it: the first spaCR module is patched exactly as when the patch was installed at start,
and so are the modules it imports. For the patch's own package the patch is installed once the
package has executed (its code is what installs). One thread installs; a thread importing another
spaCR module meanwhile waits for it, a thread importing the patch's package does not (the installing
thread may be waiting for that very package).
"""

from __future__ import annotations

import _imp
import _thread
import os
import sys

TYPE_CHECKING = False  # typing itself costs an import; mypy reads this name as typing's
if TYPE_CHECKING:
    import types
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from typing import Any

__all__ = ["PATCH_PACKAGE", "SPACR_MODULES", "VARIABLE", "ImportHook", "modes_from", "register"]

VARIABLE = "SPACR_ACCEL_PATCH"

_MODES = {"check": "check", "strict": "strict", "report": "report"}
"""Each word of the variable and the ``spacr_accel_core.patch.install`` keyword it sets."""
_MEMORY = {"keep-memory": True, "free-memory": False}
"""The words for ``install``'s ``keep_memory``: freed memory kept in every patched process, or in
none; without either (or with both, which is warned about) it is None, spaCR's decode workers only."""
_WORDS = {"1", *_MODES, *_MEMORY}
_OFF = {"", "0", "false", "no", "off"}
_VALUED = {"dask": "dask"}
"""Each ``word=value`` of the variable and the ``install`` keyword its value goes to (``dask=ADDRESS``:
spaCR's decode on that Dask cluster). The value keeps its case; ``install`` judges it."""

SPACR_MODULES = frozenset({"spacr.ops_accel", "spacr.ops_cycles", "spacr.ops_engine", "spacr.ops_merge",
                           "spacr.ops_phenotype", "spacr.ops_register", "spacr.ops_sbs"})
"""The spaCR modules the patch changes, in every seam table (a test holds them to the tables): the
first import of one installs the patch. ``import spacr`` alone does not: spaCR's package and its
light modules stay free of NumPy."""

PATCH_PACKAGE = "spacr_accel_core.patch"
"""The patch's own package: a process that asks it anything gets it installed, as at start."""


def modes_from(value: str) -> dict[str, Any] | None:
    """The ``spacr_accel_core.patch.install`` keywords a variable's value asks for, or None for
    "off". Unknown words, and a ``word=`` without its value, are named in a warning and ignored.

    :param value: the variable's value, a comma list of ``1``, ``check``, ``strict``, ``report``,
        ``keep-memory`` or ``free-memory`` (any case, spaces around a word ignored) and
        ``dask=ADDRESS`` (the ``dask``
        keyword is in the answer only when that word is given; a ``dask=`` word alone asks for the
        patch too).
    """
    words: list[str] = []
    valued: dict[str, str] = {}
    unknown: list[str] = []
    for raw in value.split(","):
        name, equals, given = raw.partition("=")
        name = name.strip().lower()
        if not equals:
            words.append(name)
        elif name in _VALUED and given.strip():
            valued[_VALUED[name]] = given.strip()
        else:
            unknown.append(raw.strip())
    if all(word in _OFF for word in words) and not valued:
        return None
    unknown = sorted({*unknown, *(word for word in words if word not in _WORDS | _OFF)})
    memory = {_MEMORY[word] for word in words if word in _MEMORY}
    problems = []
    if unknown:
        problems.append(f"ignoring {', '.join(map(repr, unknown))} (a comma list of 1, "
                        f"{', '.join([*_MODES, *_MEMORY])}, {', '.join(f'{name}=...' for name in _VALUED)})")
    if len(memory) > 1:
        problems.append("keep-memory and free-memory contradict each other; neither is used")
    if problems:
        import warnings  # only here: a start whose words are all known imports nothing for them

        for problem in problems:
            warnings.warn(f"{VARIABLE}: {problem}", RuntimeWarning, stacklevel=2)
    keep_memory = memory.pop() if len(memory) == 1 else None
    return {**{keyword: word in words for word, keyword in _MODES.items()}, "keep_memory": keep_memory, **valued}


class ImportHook:
    """The finder that installs the patch at the first import of a module it changes.

    :param modes: the ``install`` keywords the variable asked for.
    """

    def __init__(self, modes: dict[str, Any]) -> None:
        self._modes = modes
        self._lock = _thread.allocate_lock()  # guards the claim below, never held while installing
        self._installing = _thread.allocate_lock()  # held by the installing thread until it is done
        self._owner: int | None = None
        self.over = False

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> ModuleSpec | None:
        """A watched module's spec, with a loader that installs the patch first; None otherwise."""
        if (fullname not in SPACR_MODULES and fullname != PATCH_PACKAGE) or self.over \
                or self._owner == _thread.get_ident():
            return None
        try:
            spec = self.others(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _Loader(self, fullname != PATCH_PACKAGE, spec.loader, path)  # type: ignore[assignment]  # a Loader by its methods: importlib.abc, to subclass, costs a start 50 ms of imports
            return spec
        except Exception:  # the hook must never stop an import: the finders after it answer
            return None

    def others(self, fullname: str, path: Sequence[str] | None,
               target: types.ModuleType | None = None) -> ModuleSpec | None:
        """The spec the finders of ``sys.meta_path`` other than this one give."""
        for finder in list(sys.meta_path):
            find = None if finder is self else getattr(finder, "find_spec", None)
            if find is not None:
                spec: ModuleSpec | None = find(fullname, path, target)
                if spec is not None:
                    return spec
        return None

    def claim(self) -> bool:
        """Whether this thread is the one to install (the first to ask)."""
        with self._lock:
            if self.over or self._owner is not None:
                return False
            self._installing.acquire()
            self._owner = _thread.get_ident()
            return True

    def install(self) -> None:
        """Install the patch with the variable's modes, then leave ``sys.meta_path``. Never raises."""
        try:
            __import__("spacr_accel_core.patch._startup", fromlist=["start"]).start(self._modes)
        except Exception as error:  # a broken patch must not stop the import that asked for it
            import warnings

            warnings.warn(f"{VARIABLE}: the patch could not be installed ({type(error).__name__}: {error})",
                          RuntimeWarning, stacklevel=2)
        finally:
            self.over = True
            if self in sys.meta_path:  # only the installing thread gets here
                sys.meta_path.remove(self)
            self._installing.release()

    def wait(self) -> None:
        """Return once the patch is installed (at once in the installing thread, or when none is)."""
        if self._owner != _thread.get_ident():
            with self._installing:
                pass


class _Loader:
    """A watched module's own loader, with the patch installed before (spaCR's module) or after
    (the patch's package) it runs."""

    def __init__(self, hook: ImportHook, before: bool, inner: Any, path: Sequence[str] | None) -> None:
        self._hook = hook
        self._before = before
        self._inner = inner
        self._path = path

    def create_module(self, spec: ModuleSpec) -> types.ModuleType | None:
        if self._before:
            if self._hook.claim():
                self._hook.install()
            else:
                self._hook.wait()
            self._inner = self._handed_over(spec)
        created: types.ModuleType | None = self._inner.create_module(spec)
        return created

    def exec_module(self, module: types.ModuleType) -> None:
        spec = module.__spec__
        loader: object = None if spec is None else spec.loader
        if spec is not None and loader is self:  # the module reads as its own loader's
            spec.loader = module.__loader__ = self._inner
        self._inner.exec_module(module)
        if not self._before and self._hook.claim():
            self._hook.install()

    def _handed_over(self, spec: ModuleSpec) -> Any:
        """The loader the finders give now that the patch is installed (the patch's own, which
        patches the module once it has run), or the module's own where none does."""
        _imp.acquire_lock()  # as Python itself asks finders, under its import lock
        try:
            found = self._hook.others(spec.name, self._path)
        finally:
            _imp.release_lock()
        if found is None or found.loader is None or not hasattr(found.loader, "exec_module"):
            return self._inner
        return found.loader

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ...: the module's own loader's
        return getattr(self._inner, name)


def register() -> None:
    """The ``.pth`` line's call: the hook first in ``sys.meta_path`` when the variable asks for the
    patch. Never lets the interpreter's start fail."""
    try:
        modes = modes_from(os.environ.get(VARIABLE, ""))
        if modes is not None and not any(isinstance(finder, ImportHook) for finder in sys.meta_path):
            sys.meta_path.insert(0, ImportHook(modes))
    except Exception as error:  # a start never fails for the patch
        import warnings

        warnings.warn(f"{VARIABLE}: the patch's import hook could not be registered ({type(error).__name__}: "
                      f"{error})", RuntimeWarning, stacklevel=2)
