"""The prober's one hook: OpenVINO's inference devices that no torch device reaches.

An Intel Core Ultra laptop carries an NPU ("Intel(R) AI Boost") that only OpenVINO drives. spaCR
computes through torch, so it will never use that NPU; the doctor says "found, not used" instead of
leaving the user to wonder why it is idle. This plugin never selects a device and implements no
primitive: it answers :func:`spacr_accel_core.accelerator.neural_engines` and nothing else.

WHICH DEVICES COUNT. OpenVINO names its devices by type (``CPU``, ``GPU``, ``GPU.1``, ``NPU``, and on
older releases ``GNA``, ``MYRIAD``, ``HDDL``). Two types are silicon torch already reaches, so they
are never named here:

- ``CPU``: the processor spaCR already runs on.
- ``GPU``: OpenVINO's GPU plugin drives Intel GPUs only, the same silicon torch's ``xpu`` device
  drives; the torch prober reports it (usable or not, with why). Calling it unused inference
  silicon would tell the user something false about their GPU.

Every other type is inference silicon that torch has no device for (the NPU above all), so it is
named, with OpenVINO's own full name for it.
"""

from __future__ import annotations

import sys
from typing import Final, Protocol

from spacr_accel_core import Declaration, hookimpl
from spacr_accel_core.toolkit import call_bounded

SPACR_ACCEL_PLUGIN: Final = Declaration(name="openvino", priority=50.0)
"""What this plugin is: a prober with no primitive (so its priority only orders it among probers)."""

REACHED_BY_TORCH: Final = frozenset({"CPU", "GPU"})
"""OpenVINO device types that are silicon some torch device drives: never named as neural engines."""


class _Core(Protocol):
    """What this plugin asks of ``openvino.Core`` (the library ships no type information)."""

    @property
    def available_devices(self) -> list[str]: ...

    def get_property(self, device_name: str, name: str) -> object: ...


def is_neural_engine(device: str) -> bool:
    """Whether an OpenVINO device id (``"NPU"``, ``"GPU.1"``) is silicon no torch device reaches.

    :param device: an entry of ``openvino.Core().available_devices``; the type is the part before
        the first dot (``GPU.1`` is the second GPU).
    """
    kind = device.split(".", 1)[0].strip().upper()
    return bool(kind) and kind not in REACHED_BY_TORCH


def engine_name(core: _Core, device: str) -> str:
    """How the doctor names one device: OpenVINO's full name, then the road to it.

    :param core: an ``openvino.Core``.
    :param device: the device id, e.g. ``"NPU"``.
    :returns: e.g. ``"Intel(R) AI Boost (OpenVINO NPU)"``; just ``"OpenVINO NPU"`` when the
        device will not tell its name (a driver too old for the property): it is still there.
    """
    try:
        full = str(core.get_property(device, "FULL_DEVICE_NAME")).strip()
    except Exception:  # openvino raises its own error types for a device that will not answer
        full = ""
    return f"{full} (OpenVINO {device})" if full else f"OpenVINO {device}"


def _ask_openvino() -> list[str]:
    import openvino  # lazily: 0.7 s and a few hundred MiB, wanted only by the doctor

    core: _Core = openvino.Core()
    return [engine_name(core, device) for device in core.available_devices if is_neural_engine(device)]


def worth_asking() -> bool:
    """Whether OpenVINO may see an NPU here: on Linux only where the OS lists one.

    ``import openvino`` and ``Core()`` cost about 0.9 s, most of what ``spacr-accel doctor`` spends
    beyond the core. On Linux, Intel's NPU is a PCI processing accelerator that the host inventory
    (:func:`spacr_accel_core.toolkit.host_devices`, no vendor library) already lists, so without
    one there is nothing to ask. The devices this skips there are the ones OpenVINO itself has
    retired (GNA, a system peripheral; MYRIAD, a USB stick). Elsewhere OpenVINO is always asked.
    """
    if not sys.platform.startswith("linux"):
        return True
    from spacr_accel_core import toolkit

    return any(device.kind == "npu" for device in toolkit.host_devices())


def engines() -> list[str]:
    """The neural engines OpenVINO sees here, or ``[]`` when openvino is absent, broken or hangs,
    or when no NPU can be here (:func:`worth_asking`).

    Bounded with :func:`~spacr_accel_core.toolkit.call_bounded`: ``Core()`` loads every
    device plugin OpenVINO ships, and a wedged NPU driver must not hang the doctor.
    """
    if not worth_asking():
        return []
    try:
        return call_bounded(_ask_openvino, "the OpenVINO device list")
    except RuntimeError:  # not installed, broken, or did not answer in time: nothing to report
        return []


@hookimpl
def spacr_accel_neural_engines() -> list[str]:
    """OpenVINO's inference devices that spaCR finds and never uses (see :func:`engines`)."""
    return engines()
