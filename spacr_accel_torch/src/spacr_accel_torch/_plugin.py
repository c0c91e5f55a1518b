"""Placeholder plugin, replaced by the torch backend work in this same session."""

from spacr_accel_core import BackendInfo, hookimpl

SPACR_ACCEL_API_VERSION = 1


@hookimpl
def spacr_accel_backend_info() -> BackendInfo:
    return BackendInfo(name="torch", priority=300.0, accelerated=True, usable=False, note="not built yet")
