"""spacr-accel-openvino: OpenVINO inference devices that spaCR finds but never computes on.

The plugin lives in :mod:`spacr_accel_openvino._plugin` (the ``openvino`` entry point of the
``spacr_accel`` group); :func:`engines` is what it reports, for a caller that wants to ask
OpenVINO directly rather than through :func:`spacr_accel_core.accelerator.neural_engines`.
"""

from __future__ import annotations

from ._plugin import REACHED_BY_TORCH, engine_name, engines, is_neural_engine

__all__ = ["REACHED_BY_TORCH", "engine_name", "engines", "is_neural_engine"]
