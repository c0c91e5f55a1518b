"""The pluggy project name and the two markers every plugin decorates with."""

from __future__ import annotations

from typing import Final

import pluggy

PROJECT_NAME: Final = "spacr_accel"
"""The pluggy project name; also the entry-point group plugins register under."""

ENTRY_POINT_GROUP: Final = "spacr_accel"

API_VERSION: Final = 1
"""The plugin API this core speaks.

A plugin module may declare ``SPACR_ACCEL_API_VERSION = 1``; a plugin built for a different
major version is reported as incompatible (in the doctor and the load log) and never called,
instead of failing later with an obscure ``TypeError`` from a changed hook signature.
"""

hookspec: Final = pluggy.HookspecMarker(PROJECT_NAME)
"""Marks a hook specification of the ``spacr_accel`` project."""

hookimpl: Final = pluggy.HookimplMarker(PROJECT_NAME)
"""Marks a plugin's implementation of a ``spacr_accel`` hook."""
