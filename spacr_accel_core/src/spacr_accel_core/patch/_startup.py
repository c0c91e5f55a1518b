"""The patch at interpreter start, from ``SPACR_ACCEL_PATCH``: what the installed ``.pth`` file calls.

A spawned worker (spaCR decodes each field in one) imports spaCR afresh and never sees a patch made
in its parent; it inherits the parent's environment, so a variable read at every interpreter's
start reaches it, as pytest-cov reaches subprocesses. The ``.pth`` line imports this module only
when the variable is set: unset, it costs a dictionary lookup.
"""

from __future__ import annotations

import os
import warnings

__all__ = ["VARIABLE", "modes_from", "start"]

VARIABLE = "SPACR_ACCEL_PATCH"

_MODES = {"check": "check", "strict": "strict", "report": "report", "keep-memory": "keep_memory"}
"""Each word of the variable and the :func:`spacr_accel_core.patch.install` keyword it sets."""
_WORDS = {"1", *_MODES}
_OFF = {"", "0", "false", "no", "off"}


def modes_from(value: str) -> dict[str, bool] | None:
    """The :func:`spacr_accel_core.patch.install` keywords a variable's value asks for, or None
    for "off". Unknown words are named in a warning and ignored."""
    words = [word.strip().lower() for word in value.split(",")]
    if all(word in _OFF for word in words):
        return None
    unknown = sorted({word for word in words if word not in _WORDS | _OFF})
    if unknown:
        warnings.warn(f"{VARIABLE}: ignoring {', '.join(map(repr, unknown))} (a comma list of "
                      f"1, {', '.join(_MODES)})", RuntimeWarning, stacklevel=2)
    return {keyword: word in words for word, keyword in _MODES.items()}


def start() -> None:
    """Install the patch if the variable asks for it. Never lets interpreter start-up fail."""
    modes = modes_from(os.environ.get(VARIABLE, ""))
    if modes is None:
        return
    try:
        from . import install

        install(**modes)
    except Exception as error:  # a broken patch must not stop Python from starting
        warnings.warn(f"{VARIABLE}: the patch could not be installed ({type(error).__name__}: {error})",
                      RuntimeWarning, stacklevel=2)
