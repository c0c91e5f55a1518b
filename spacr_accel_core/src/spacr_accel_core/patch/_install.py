"""Putting the seams in and taking them out: module attributes, names bound at import, spaCR
modules imported later, and SciPy scoped to the spaCR functions that import it.

THREE KINDS OF BINDING, measured on spaCR 1.5's own modules:

* a name looked up per call (``from .ops_accel import maximum_filter`` inside a function): replacing
  the module attribute reaches every call;
* a name bound at another module's import (``ops_cycles`` binds ``phase_correlate`` from
  ``ops_register``): that module's own attribute is replaced too, and the original restored is
  spaCR's function, never a wrapper that happened to be bound;
* a library imported inside a function (``from scipy import ndimage`` in ``_decode_field``): the
  function is re-created from its own code with builtins whose ``__import__`` hands that one import
  a stand-in for ``scipy`` whose ``ndimage`` serves the table's functions and is SciPy's for every
  other name. Since Python 3.10 a function keeps the builtins of the moment it was made, so this
  reaches exactly the re-created function: the rest of the process, this project's own backends
  included, import the real SciPy.

Modules imported after :func:`install` are patched as they finish executing (a finder first in
``sys.meta_path`` wraps their loader), which is how the startup hook patches a spawned worker before
spaCR exists in it.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
import types
from collections.abc import Callable, Sequence
from typing import Any

from ._table import Scoped, Seam, SeamTable, Surface

__all__ = ["Installer"]

_ABSENT: Any = object()
"""Marks a name the module did not have (undone by deleting it)."""

_ORIGINAL = "__spacr_accel_original__"
"""The attribute a patch-made function carries its spaCR original in."""


def original_of(function: Any) -> Any:
    """spaCR's own function behind ``function`` (``function`` itself when it is not the patch's)."""
    return getattr(function, _ORIGINAL, function)


class _Loader(importlib.abc.Loader):
    """A spaCR module's own loader, followed by the patch once the module has executed."""

    def __init__(self, inner: Any, done: Callable[[types.ModuleType], None]) -> None:
        self._inner = inner
        self._done = done

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        created: types.ModuleType | None = self._inner.create_module(spec)
        return created

    def exec_module(self, module: types.ModuleType) -> None:
        self._inner.exec_module(module)
        self._done(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ...: the module's own loader's
        return getattr(self._inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds a watched spaCR module as the finders after it would, and wraps its loader."""

    def __init__(self, watched: frozenset[str], done: Callable[[types.ModuleType], None]) -> None:
        self._watched = watched
        self._done = done

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._watched:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, self._done)
                return spec
        return None


class _Library:
    """``scipy`` as a scoped function sees it: SciPy itself, but for ``ndimage``."""

    def __init__(self, real: types.ModuleType, ndimage: Any) -> None:
        self._real = real
        self.ndimage = ndimage

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _Ndimage:
    """``scipy.ndimage`` as a scoped function sees it: the served functions, SciPy's for the rest."""

    def __init__(self, real: types.ModuleType, served: dict[str, Callable[..., Any]]) -> None:
        self._real = real
        self.__dict__.update(served)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


Wrap = Callable[[str, Callable[..., tuple[Any, str]], Callable[..., Any], dict[str, Any]], Callable[..., Any]]


class Installer:
    """The patch's changes to one process, kept so that each can be undone exactly.

    :param table: the seams of the installed spaCR's release line.
    :param wrap: ``(seam name, way of serving, original, context) -> replacement``: how a seam's
        function is made.
    """

    def __init__(self, table: SeamTable, wrap: Wrap) -> None:
        self.table = table
        self._wrap = wrap
        self._lock = threading.RLock()
        self._undo: list[tuple[dict[str, Any], str, Any, Any]] = []
        self._applied: set[str] = set()
        self._finder: _Finder | None = None
        self.active = False

    def install(self) -> None:
        with self._lock:
            if self.active:
                return
            self.active = True
            self._finder = _Finder(self.table.modules, self._imported)
            sys.meta_path.insert(0, self._finder)
            for name in sorted(self.table.modules):
                module = sys.modules.get(name)
                if module is not None:
                    self._apply(module)

    def uninstall(self) -> None:
        with self._lock:
            if not self.active:
                return
            self.active = False
            if self._finder in sys.meta_path:
                sys.meta_path.remove(self._finder)
            self._finder = None
            for namespace, name, original, replacement in reversed(self._undo):
                if namespace.get(name) is replacement:
                    if original is _ABSENT:
                        del namespace[name]
                    else:
                        namespace[name] = original
            self._undo.clear()
            self._applied.clear()

    def _imported(self, module: types.ModuleType) -> None:
        with self._lock:
            if self.active:
                self._apply(module)

    def _apply(self, module: types.ModuleType) -> None:
        name = module.__name__
        if name in self._applied:
            return
        self._applied.add(name)
        if name == self.table.surface.module:
            self._add_surface(module, self.table.surface)
        # scoped first: a function that is a seam too (nuclear_points) is wrapped as remade, so a
        # call the seam leaves to spaCR still meets the scoped SciPy (see _replace_attribute)
        for scoped in self.table.scoped:
            if scoped.module == name:
                self._scope(module, scoped)
        for seam in self.table.attributes:
            if seam.module == name and callable(getattr(module, seam.attribute, None)):
                self._replace_attribute(module, seam)

    def _set(self, namespace: dict[str, Any], name: str, value: Any, original: Any = _ABSENT) -> None:
        """Replace ``namespace[name]``; undone by putting back ``original`` (default: what was there)."""
        self._undo.append((namespace, name, namespace.get(name, _ABSENT) if original is _ABSENT else original,
                           value))
        namespace[name] = value

    def _add_surface(self, module: types.ModuleType, surface: Surface) -> None:
        """spaCR's NumPy surface in its table replaced by the patch's stand-in (spaCR's own function
        but inside the seam's own call): no name is added, so a caller's ``backend=`` and spaCR's
        messages see spaCR's table as it is."""
        surfaces = getattr(module, surface.table, None)
        if isinstance(surfaces, dict) and callable(surfaces.get(surface.entry)):
            spacrs = original_of(surfaces[surface.entry])
            stand_in = surface.stand_in(spacrs)
            setattr(stand_in, _ORIGINAL, spacrs)
            self._set(surfaces, surface.entry, stand_in)

    def _replace_attribute(self, module: types.ModuleType, seam: Seam) -> None:
        current = getattr(module, seam.attribute)
        original = original_of(current)
        # a scoped function remade from spaCR's own code is what a call left to spaCR runs; any other
        # replacement found here (a name bound from a module patched first) is not
        through = current if getattr(current, "__code__", None) is getattr(original, "__code__", _ABSENT) else original
        replacement = self._wrap(seam.name, seam.serve, through, self._context(seam, module, original))
        setattr(replacement, _ORIGINAL, original)
        # a name bound from a module patched first (ops_cycles' phase_correlate) is put back as spaCR's own
        self._set(module.__dict__, seam.attribute, replacement, original)

    def replacement(self, seam: Seam, original: Callable[..., Any],
                    module: types.ModuleType | None = None) -> Callable[..., Any]:
        """What stands in ``seam``'s place in front of ``original``: its way of serving, given the
        keywords its row asks for, wrapped (each function of a scoped seam's stand-in is made so).

        :param seam: the seam's row.
        :param original: spaCR's (or SciPy's) own function, which answers every call left to it.
        :param module: the module holding the name, for a row that asks for it.
        """
        return self._wrap(seam.name, seam.serve, original, self._context(seam, module, original))

    def _context(self, seam: Seam, module: types.ModuleType | None, original: Any) -> dict[str, Any]:
        """The keywords ``seam``'s way of serving is given besides the call's own: those its row
        names, and its floor rule where that is above the floor."""
        context: dict[str, Any] = {}
        for needed in seam.context:
            if needed == "original":
                context["original"] = original
            elif needed == "register":
                register = self.table.surface.module
                context["register"] = sys.modules.get(register) or importlib.import_module(register)
            elif needed in ("accel", "module"):
                context[needed] = module
        if seam.floor.operation is not None:
            context["floor"] = seam.floor
        return context

    def _scope(self, module: types.ModuleType, scoped: Scoped) -> None:
        scoped_builtins = dict(vars(builtins))
        scoped_builtins["__import__"] = self._scoped_import(scoped)
        namespace = module.__dict__
        for name in scoped.functions:
            function = namespace.get(name)
            if not isinstance(function, types.FunctionType):
                continue
            self._set(namespace, name, _remade(function, namespace, scoped_builtins))

    def _scoped_import(self, scoped: Scoped) -> Callable[..., Any]:
        stand_in: list[_Library] = []

        def scoped_import(name: str, globals: Any = None, locals: Any = None,  # __import__'s names
                          fromlist: Sequence[str] | None = (), level: int = 0) -> Any:
            found = builtins.__import__(name, globals, locals, fromlist or (), level)
            if not (self.active and level == 0 and name == "scipy" and fromlist and "ndimage" in fromlist):
                return found
            if not stand_in:
                real = found.ndimage
                served = {seam.attribute: self.replacement(seam, getattr(real, seam.attribute))
                          for seam in scoped.seams}
                stand_in.append(_Library(found, _Ndimage(real, served)))
            return stand_in[0]

        return scoped_import


def _remade(function: types.FunctionType, namespace: dict[str, Any],
            scoped_builtins: dict[str, Any]) -> types.FunctionType:
    """``function`` again, from its own code, globals and closure, with ``scoped_builtins``.

    A function reads its builtins from its globals' ``__builtins__`` when it is made, so the module's
    entry is swapped for the moment of making it and put back at once.
    """
    had = "__builtins__" in namespace
    saved = namespace.get("__builtins__")
    namespace["__builtins__"] = scoped_builtins
    try:
        remade = types.FunctionType(function.__code__, namespace, function.__name__, function.__defaults__,
                                    function.__closure__)
    finally:
        if had:
            namespace["__builtins__"] = saved
        else:
            del namespace["__builtins__"]
    functools.update_wrapper(remade, function)
    remade.__kwdefaults__ = function.__kwdefaults__
    del remade.__wrapped__  # type: ignore[attr-defined]  # set by update_wrapper just above; the remade function IS the function, not a wrapper of it (inspect follows __wrapped__)
    setattr(remade, _ORIGINAL, function)
    return remade
