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

from typing import Any

from _spacr_accel_hook import VARIABLE, modes_from

__all__ = ["VARIABLE", "modes_from", "start"]


def start(modes: dict[str, Any]) -> None:
    """Install the patch with the variable's modes (the hook turns a failure into one warning, so a
    broken patch never stops the import that asked for it).

    :param modes: the :func:`spacr_accel_core.patch.install` keywords, as :func:`modes_from` reads them.
    """
    from . import install

    install(**modes)
