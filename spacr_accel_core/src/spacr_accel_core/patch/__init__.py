"""spaCR, unchanged, on the registry: the released spaCR's slow calls served by the best backend
that gives spaCR's own answer, and every other call left to spaCR.

As scikit-learn-intelex patches scikit-learn and ``cuml.accel`` an unchanged program, with three
promises of its own:

* **Identical or untouched.** A seam serves a call only where the registry's answer is spaCR's to
  the bit (dtype, shape, bits, spaCR's own record classes); every other call goes to spaCR's own
  function, with the reason counted (:func:`report`). ``check`` runs both and raises
  :class:`PatchMismatch` on the first difference; ``strict`` raises where a call would go to spaCR.
* **Scoped.** SciPy is replaced only inside the spaCR functions that import it; every other caller,
  the registry's backends included, reaches SciPy itself.
* **Everywhere spaCR runs.** ``SPACR_ACCEL_PATCH=1`` patches every Python process that imports
  spaCR (a ``.pth`` file the core installs registers an import hook at start, standard library only,
  that installs the patch at the first import of a module it changes), so spaCR's spawned decode
  workers are patched too; names spaCR bound at import are reached, modules imported later are
  patched as they load, and :func:`uninstall` puts every original object back.

Switching it on: :func:`install` in code, ``spacr-accel run [--check] [--strict] [--report]
[--keep-memory | --free-memory] script.py`` (or ``-m module``), ``python -m spacr_accel_core.patch
script.py``, the variable (a comma list of ``1``, ``check``, ``strict``, ``report``, ``keep-memory``,
``free-memory``), or
``%load_ext spacr_accel_core.patch``. ``dask=ADDRESS`` (``--dask ADDRESS``, ``install(dask=...)``)
sends spaCR's decode of a well's fields to a Dask cluster (:mod:`._cluster`).
``keep-memory`` (:func:`keep_freed_memory`) is the process's
allocator, not spaCR's: a decode worker's later fields reuse its freed arrays. By default only the
workers of spaCR's decode pool keep what they free; ``keep-memory`` asks it of every patched process,
``free-memory`` of none.

How it is built: each seam is one row of its release line's table (``_table``), naming the spaCR
attribute, the function that serves it (in a ``_served`` module) and when it may be served (its
floor rule, ``_floor``: by any backend, or only above the NumPy floor where the floor is no faster
than spaCR's own); the installer reads nothing else. The arithmetic a seam shares with the
backends (spaCR's correlation surface, its pair search, NumPy's percentile) is the kit's, and the
patch reaches the registry only through its public names (``spacr_accel_core``, ``ops``,
``config``).
"""

from __future__ import annotations

import atexit
import sys
import threading
import warnings
from typing import Any

from . import _cluster
from ._answers import first_difference
from ._calls import Modes, PatchMismatch, make_wrapper
from ._cluster import fields_on_workers
from ._heap import HeapSetting, keep_freed_memory, set_policy
from ._install import Installer
from ._report import PatchReport, SeamReport, Tally
from ._table import TABLES, table_for

__all__ = [
    "HeapSetting",
    "PatchMismatch",
    "PatchReport",
    "SeamReport",
    "fields_on_workers",
    "first_difference",
    "install",
    "installed",
    "keep_freed_memory",
    "load_ipython_extension",
    "report",
    "reset",
    "spacr_version",
    "uninstall",
    "unload_ipython_extension",
]

_lock = threading.RLock()
_modes = Modes()
_tally = Tally()
_installer: Installer | None = None
_found: list[str | None] = []  # the spaCR version, once looked up
_reporting_at_exit = False


def spacr_version() -> str | None:
    """The installed spaCR's version, from its distribution's metadata, without importing spaCR
    (``None`` when spaCR is not installed)."""
    if not _found:
        import importlib.metadata

        try:
            _found.append(importlib.metadata.version("spacr"))
        except importlib.metadata.PackageNotFoundError:
            _found.append(None)
    return _found[0]


def install(*, check: bool = False, strict: bool = False, report: bool = False,
            keep_memory: bool | None = None, dask: str | None = None) -> bool:
    """Patch the installed spaCR onto the registry (idempotent; a second call sets the modes anew).

    Works before or after spaCR's modules are imported. A spaCR no seam table was verified against
    is patched nowhere, with a warning naming its version; without spaCR nothing happens but the
    warning.

    :param check: also run spaCR's own function beside every served call, raising
        :class:`PatchMismatch` at the first difference.
    :param strict: raise :class:`PatchMismatch` where a call would go to spaCR's own function.
    :param report: print :func:`report` to standard error when the process exits.
    :param keep_memory: where freed memory is kept (the process keeps its peak memory, and a
        decode's later fields reuse it instead of faulting it in again): None, the default, in the
        workers of spaCR's decode pool only; True also in this process now (:func:`keep_freed_memory`;
        a warning says why where it cannot); False in no process. Never undone by :func:`uninstall`.
    :param dask: a Dask scheduler address (``tcp://host:8786``) or ``local:N`` (a ``LocalCluster``
        of N process workers started at the first decode): spaCR's decode pool becomes that
        cluster, each field a task, the workers patched with these modes
        (:mod:`spacr_accel_core.patch._cluster`). None keeps spaCR's own pool, and ``distributed``
        is never imported.
    :returns: whether spaCR is now patched.
    :raises ValueError: for a ``dask`` that is neither an address nor ``local:N`` (before anything is
        patched).
    """
    global _installer, _reporting_at_exit  # noqa: PLW0603  # one patch per process
    if dask is not None:
        _cluster.parse_address(dask)  # a typo is refused now, not when the first well decodes
    set_policy(keep_memory)
    if keep_memory:
        setting = keep_freed_memory()
        if not setting.applied:
            warnings.warn(f"spacr-accel patch: freed memory is not kept: {setting.reason}", RuntimeWarning,
                          stacklevel=2)
    with _lock:
        _modes.check, _modes.strict, _modes.report = bool(check), bool(strict), bool(report)
        if report and not _reporting_at_exit:
            atexit.register(_print_report)
            _reporting_at_exit = True
        if _installer is None:
            version = spacr_version()
            if version is None:
                warnings.warn("spacr-accel patch: spaCR is not installed, so nothing is patched",
                              RuntimeWarning, stacklevel=2)
                return False
            table = table_for(version)
            if table is None:
                lines = ", ".join(f"{line}.x" for line in sorted(TABLES))
                warnings.warn(f"spacr-accel patch: spaCR {version} is not a version the seams were verified "
                              f"against ({lines}), so nothing is patched", RuntimeWarning, stacklevel=2)
                return False
            _installer = Installer(table, make_wrapper(_tally, _modes))
        _installer.install()
        _cluster.use(dask, {"check": bool(check), "strict": bool(strict), "report": bool(report),
                            "keep_memory": bool(keep_memory)}, install)
        return True


def uninstall() -> None:
    """Put back every object the patch replaced (idempotent); the report is kept."""
    with _lock:
        if _installer is not None:
            _installer.uninstall()
        _cluster.use(None, {})


def installed() -> bool:
    """Whether spaCR is patched now."""
    return _installer is not None and _installer.active


def report() -> PatchReport:
    """What each seam did in this process: calls served by each backend, calls left to spaCR with
    each reason, and the seconds in each."""
    if _installer is None:
        return PatchReport(spacr_version(), None, ())
    return PatchReport(spacr_version(), _installer.table.name, _tally.seams(_installer.table.names))


def reset() -> None:
    """Start the report's counts again."""
    _tally.reset()


def _print_report() -> None:
    if _modes.report:
        print(report().format(), file=sys.stderr)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext spacr_accel_core.patch``: patch spaCR in this notebook's kernel."""
    cluster = _cluster.address()
    install(check=_modes.check, strict=_modes.strict, report=_modes.report,
            dask=None if cluster is None else cluster.text)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext spacr_accel_core.patch``: put spaCR back."""
    uninstall()
