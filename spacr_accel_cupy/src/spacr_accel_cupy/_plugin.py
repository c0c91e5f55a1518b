"""Placeholder plugin, replaced by the cupy backend work in this same session."""

from spacr_accel_core import BackendInfo, hookimpl

SPACR_ACCEL_API_VERSION = 1


@hookimpl
def spacr_accel_backend_info() -> BackendInfo:
    return BackendInfo(name="cupy", priority=200.0, accelerated=True, usable=False, note="not built yet")
