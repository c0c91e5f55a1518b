"""The pluggy project name and the two markers every plugin decorates with."""

from __future__ import annotations

from typing import Final

import pluggy

PROJECT_NAME: Final = "spacr_accel"
"""The pluggy project name; also the entry-point group plugins register under."""

ENTRY_POINT_GROUP: Final = "spacr_accel"

API_VERSION: Final = 2
"""The plugin API this core speaks.

Version 2: a plugin states what it is in one ``SPACR_ACCEL_PLUGIN = Declaration(...)`` record, and
``spacr_accel_backend_info`` answers only whether it can run here now. A plugin written for
another version (a declaration with another ``api_version``, or none at all, the form of version 1)
is reported as ``incompatible`` in the doctor and the load log and never called, instead of
failing later with an obscure ``TypeError`` from a changed hook signature.
"""

hookspec: Final = pluggy.HookspecMarker(PROJECT_NAME)
"""Marks a hook specification of the ``spacr_accel`` project."""

hookimpl: Final = pluggy.HookimplMarker(PROJECT_NAME)
"""Marks a plugin's implementation of a ``spacr_accel`` hook."""
