"""spacr-accel-opencv: ``maximum_filter`` on OpenCV's ``dilate``, for spacr-accel.

The plugin lives in :mod:`spacr_accel_opencv._plugin` (the ``opencv`` entry point of the
``spacr_accel`` group). Installing this distribution is all it takes: spacr-accel then runs every
``maximum_filter`` it can here, above the NumPy floor, and hands NumPy the fields holding a NaN.
"""

from __future__ import annotations

from ._plugin import NAME, PRIORITY, SPACR_ACCEL_PLUGIN

__all__ = ["NAME", "PRIORITY", "SPACR_ACCEL_PLUGIN"]
