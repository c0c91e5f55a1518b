"""The install command a message tells a user to run: the one that works for how THIS copy was
installed.

The distributions are installed from a clone of the repository (``scripts/install-from-clone``)
until they are published on a package index; ``pip install 'spacr-accel[torch]'`` fails there
("No matching distribution found"), so advice that names it sends a user into an error. Which
applies is read from the core's own install record: pip writes ``direct_url.json`` (PEP 610) for a
distribution installed from a local folder, editable or not, and none for one from an index.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # both are imported when a message names a command, not with the package
    from pathlib import Path

_CLONE_SCRIPT = ("scripts", "install-from-clone")
_CLONE_EXTRAS = frozenset({"torch", "cupy", "dask"})
"""What the clone's script takes; numba and the NumPy floor are part of every clone install."""


@functools.cache
def _clone_script() -> Path | None:
    """``<clone>/scripts/install-from-clone`` when the core was installed from a clone that is
    still there, else ``None`` (an index install, or the clone was removed)."""
    import json  # local: importlib.metadata alone costs tens of milliseconds, and every process
    from importlib import metadata  # that imports the package would pay it for advice it may
    from pathlib import Path  # never print
    from urllib.parse import unquote, urlparse

    try:
        record = metadata.distribution("spacr-accel-core").read_text("direct_url.json")
        url = urlparse(json.loads(record)["url"]) if record else None
    except (metadata.PackageNotFoundError, ValueError, KeyError, TypeError, OSError):
        return None
    if url is None or url.scheme != "file":
        return None
    script = Path(unquote(url.path)).parent.joinpath(*_CLONE_SCRIPT)  # the record names <clone>/spacr_accel_core
    return script if script.is_file() else None


def install_command(*extras: str) -> str:
    """The shell command that adds ``extras`` (``"torch"``, ``"cupy"``, ``"dask"``, ``"numba"``) to
    this installation: the clone's script for a copy installed from a clone, else pip from an index.

    :param extras: the optional parts wanted; none for the core and the NumPy floor alone.
    :returns: one command, ready to paste (an index command quoted, as zsh needs for ``[...]``).
    """
    script = _clone_script()
    if script is not None:
        return " ".join([str(script), *(e for e in extras if e in _CLONE_EXTRAS)])
    if not extras:
        return "pip install spacr-accel"
    return f"pip install 'spacr-accel[{','.join(extras)}]'"
