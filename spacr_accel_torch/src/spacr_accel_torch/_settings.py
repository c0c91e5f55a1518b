"""The settings this plugin declares, each named once: the declaration lists them (the doctor and
``spacr_accel_core.config.variables()`` show them) and the code reads them through
:func:`spacr_accel_core.toolkit.setting_value`."""

from __future__ import annotations

from typing import Final

from spacr_accel_core import Setting

PASS_BYTES: Final = Setting("SPACR_ACCEL_TORCH_PASS_BYTES", "a share of free device memory",
                            "bytes one pass of a primitive may hold on the device (lower it beside another job)")
MPS_FALLBACK: Final = Setting("PYTORCH_ENABLE_MPS_FALLBACK", "1 on macOS",
                              "run operators Metal lacks on the CPU instead of raising (read by torch at import)")
