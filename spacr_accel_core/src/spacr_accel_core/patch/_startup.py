"""The patch installed from ``SPACR_ACCEL_PATCH``: what the import hook calls, once spaCR's patched
modules or the patch itself are first imported.

A spawned worker (spaCR decodes each field in one) imports spaCR afresh and never sees a patch made
in its parent; it inherits the parent's environment, so a variable read at every interpreter's
start reaches it, as pytest-cov reaches subprocesses. The installed ``.pth`` line reads it and,
when it is set, registers the standard-library import hook of the top-level ``_spacr_accel_hook``
module (which also owns the variable's words): the start imports neither NumPy nor this package,
and the hook calls :func:`start` when spaCR is first reached.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from _spacr_accel_hook import VARIABLE, modes_from

__all__ = ["VARIABLE", "modes_from", "start"]


def start(modes: dict[str, Any] | None = None) -> None:
    """Install the patch with the variable's modes. Never raises: a broken patch must not stop the
    import that asked for it (nor, from an older ``.pth`` line, Python's start).

    :param modes: the :func:`spacr_accel_core.patch.install` keywords, as :func:`modes_from` reads
        them; None reads the variable now (and does nothing when it is unset).
    """
    if modes is None:
        modes = modes_from(os.environ.get(VARIABLE, ""))
        if modes is None:
            return
    try:
        from . import install

        install(**modes)
    except Exception as error:  # a broken patch must not stop the import that asked for it
        warnings.warn(f"{VARIABLE}: the patch could not be installed ({type(error).__name__}: {error})",
                      RuntimeWarning, stacklevel=2)
